// BERT HDF5 shards: round trips through our writer and both read paths, commit behaviour, value
// validation, damaged files, foreign layouts, and NVIDIA's own files against their instance dumps.
#include "formats/bert_hdf5.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <chrono>
#include <thread>

#include <cstring>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <unordered_map>

#include "common/error.h"
#include "common/file.h"
#include "bert_record_expect.h"
#include "test_util.h"

namespace pretrain::bert_hdf5_test {
namespace {

using testing::TempDir;

BertRecord random_record(std::mt19937& rng, int64_t seq, int64_t max_pred) {
  BertRecord r;
  int64_t tokens = std::uniform_int_distribution<int64_t>(2, seq)(rng);
  int64_t split = std::uniform_int_distribution<int64_t>(1, tokens - 1)(rng);
  for (int64_t j = 0; j < tokens; ++j) {
    r.input_ids.push_back(std::uniform_int_distribution<int32_t>(0, 30521)(rng));
    r.input_mask.push_back(1);
    r.segment_ids.push_back(j >= split);
  }
  int64_t preds = std::uniform_int_distribution<int64_t>(0, std::min(max_pred, tokens - 1))(rng);
  for (int64_t k = 0; k < preds; ++k) {
    r.masked_lm_positions.push_back(static_cast<int32_t>(1 + k));
    r.masked_lm_ids.push_back(std::uniform_int_distribution<int32_t>(0, 30521)(rng));
  }
  r.next_sentence_label = static_cast<int32_t>(rng() & 1);
  return r;
}

// The record as the file holds it: every field padded with zeros to its full width.
BertRecord padded(BertRecord r, int64_t seq, int64_t max_pred) {
  for (auto* v : {&r.input_ids, &r.input_mask, &r.segment_ids}) v->resize(static_cast<size_t>(seq), 0);
  for (auto* v : {&r.masked_lm_positions, &r.masked_lm_ids}) v->resize(static_cast<size_t>(max_pred), 0);
  return r;
}

bool same_batch(const BertBatch& a, const BertBatch& b) {
  return a.size == b.size && a.input_ids == b.input_ids && a.input_mask == b.input_mask &&
         a.segment_ids == b.segment_ids && a.masked_lm_positions == b.masked_lm_positions &&
         a.masked_lm_ids == b.masked_lm_ids && a.next_sentence_labels == b.next_sentence_labels;
}

// Writes n random records (half one by one, half as batches) and returns them padded.
std::vector<BertRecord> write_random(const std::string& path, int64_t n, int64_t seq, int64_t max_pred,
                                     int64_t per_chunk, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<BertRecord> records;
  BertShardOptions options;
  options.records_per_chunk = per_chunk;
  options.in_flight_chunks = 2;
  BertShardWriter writer(path, seq, max_pred, options);
  while (static_cast<int64_t>(records.size()) < n) {
    int64_t left = n - static_cast<int64_t>(records.size());
    if (records.size() % 2 == 0 || left < 5) {
      records.push_back(padded(random_record(rng, seq, max_pred), seq, max_pred));
      writer.append(records.back());
    } else {
      int64_t take = std::min<int64_t>(left, 1 + static_cast<int64_t>(rng() % 11));
      BertBatch batch(take, seq, max_pred);
      for (int64_t i = 0; i < take; ++i) {
        records.push_back(padded(random_record(rng, seq, max_pred), seq, max_pred));
        batch.set(i, records.back());
      }
      writer.append(batch);
    }
  }
  EXPECT_EQ(writer.size(), n);
  writer.commit();
  return records;
}

void expect_reads_back(const std::string& path, const std::vector<BertRecord>& records, int64_t seq, int64_t max_pred,
                       int64_t max_pack = 0) {
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab}) {
    BertShardReader reader(path, read_path);
    ASSERT_EQ(reader.size(), static_cast<int64_t>(records.size()));
    EXPECT_EQ(reader.seq_len(), seq);
    EXPECT_EQ(reader.max_predictions(), max_pred);
    EXPECT_EQ(reader.max_pack(), max_pack);
    EXPECT_EQ(reader.raw_chunk_path(), read_path == BertReadPath::automatic);
    for (size_t i = 0; i < records.size(); ++i)
      testing::expect_same_record(reader.read(static_cast<int64_t>(i)), records[i], static_cast<int64_t>(i));
    // Ranges of every length from every start cover chunk boundaries from both sides.
    BertBatch batch;
    for (int64_t begin = 0; begin < reader.size(); begin += 3)
      for (int64_t count : {int64_t{1}, int64_t{5}, reader.size() - begin}) {
        count = std::min(count, reader.size() - begin);
        reader.read_range(begin, count, batch);
        ASSERT_EQ(batch.size, count);
        for (int64_t i = 0; i < count; ++i)
          testing::expect_same_record(batch.record(i), records[static_cast<size_t>(begin + i)], begin + i);
      }
  }
}

// The same records give the same file bytes whatever the thread count and the time of writing
// (make-pretraining-shards promises byte-identical shards at any --threads; HDF5 would otherwise
// store modification times, which broke that once).
TEST(BertHdf5, FileBytesDoNotDependOnThreadsOrTime) {
  pretrain::testing::TempDir dir;
  std::string bytes[2];
  for (int threads : {1, 2}) {
    if (threads == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
    const std::string path = dir.file(cat("t", threads, ".hdf5"));
    std::mt19937 rng(5);
    BertShardOptions options;
    options.records_per_chunk = 7;
    BertShardWriter writer(path, 32, 5, options);
    for (int i = 0; i < 400; ++i) writer.append(padded(random_record(rng, 32, 5), 32, 5));
    writer.commit();
    bytes[threads - 1] = read_file(path);
  }
  EXPECT_EQ(bytes[0], bytes[1]);
}

TEST(BertHdf5, RoundTripAcrossChunksWithPartialLastChunk) {
  TempDir dir;
  std::string path = dir.file("shard.hdf5");
  auto records = write_random(path, 7 * 6 + 3, 32, 5, 7);
  EXPECT_TRUE(BertShardReader(path).raw_chunk_path());
  EXPECT_EQ(count_bert_records(path), records.size());
  expect_reads_back(path, records, 32, 5);
}

TEST(BertHdf5, RoundTripExactChunkMultipleAndDefaultChunking) {
  TempDir dir;
  expect_reads_back(dir.file("a.hdf5"), write_random(dir.file("a.hdf5"), 28, 16, 3, 7, 2), 16, 3);
  expect_reads_back(dir.file("b.hdf5"), write_random(dir.file("b.hdf5"), 1100, 128, 20, 0, 3), 128, 20);
}

TEST(BertHdf5, EmptyShard) {
  TempDir dir;
  std::string path = dir.file("empty.hdf5");
  BertShardWriter(path, 128, 20).commit();
  BertShardReader reader(path);
  EXPECT_EQ(reader.size(), 0);
  EXPECT_EQ(reader.seq_len(), 128);
  EXPECT_EQ(reader.max_predictions(), 20);
  BertBatch batch;
  reader.read_range(0, 0, batch);
  EXPECT_EQ(batch.size, 0);
  EXPECT_THROW(reader.read(0), Error);
}

TEST(BertHdf5, AppearsOnlyOnCommitAndUncommittedIsRemoved) {
  TempDir dir;
  std::string path = dir.file("shard.hdf5");
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  std::mt19937 rng(5);
  {
    BertShardWriter writer(path, 16, 2, {.records_per_chunk = 4});
    for (int i = 0; i < 10; ++i) writer.append(random_record(rng, 16, 2));
    EXPECT_TRUE(file_exists(tmp));
    EXPECT_FALSE(file_exists(path));
  }
  EXPECT_FALSE(file_exists(tmp));
  EXPECT_FALSE(file_exists(path));
  {
    BertShardWriter writer(path, 16, 2, {.records_per_chunk = 4});
    for (int i = 0; i < 10; ++i) writer.append(random_record(rng, 16, 2));
    writer.close();
    EXPECT_TRUE(file_exists(path));
    EXPECT_FALSE(file_exists(tmp));
    EXPECT_THROW(writer.append(random_record(rng, 16, 2)), Error);
  }
  EXPECT_EQ(count_bert_records(path), 10u);
}

// A full disk (here a file-size limit) part-way through a shard: the writer throws naming the file,
// and the process then exits normally. libhdf5 1.10 keeps a file whose H5Fclose failed (its
// metadata flush hit the full disk) in its id table after freeing it, and its atexit cleanup then
// closed it again: SIGSEGV after the error message (make-pretraining-shards on a tiny filesystem,
// chaos.sh diskfull). Each limit runs in a child that exits through exit(), atexit handlers and all.
// Set in the forked children below: LeakSanitizer's check at their exit would report what the
// parent's other threads (gone in the child) allocated, e.g. their thread_local compressors.
bool in_forked_child = false;

}  // namespace
}  // namespace pretrain::bert_hdf5_test

// LeakSanitizer asks this at exit (sanitizer/lsan_interface.h); other builds never call it.
extern "C" int __lsan_is_turned_off() { return pretrain::bert_hdf5_test::in_forked_child ? 1 : 0; }

namespace pretrain::bert_hdf5_test {
namespace {

TEST(BertHdf5, AFullDiskEndsInAnErrorNotACrashAtExit) {
  TempDir dir;
  const std::string whole = dir.file("whole.hdf5");
  write_random(whole, 300, 64, 10, 16);
  const uint64_t bytes = file_size(whole);
  int crashed = 0, limits = 0;
  std::string how;
  for (uint64_t limit = 2048; limit < bytes; limit += bytes / 40, ++limits) {
    const std::string path = dir.file(cat("cut-", limit, ".hdf5"));
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      in_forked_child = true;
      std::signal(SIGXFSZ, SIG_IGN);
      const rlimit r{limit, limit};
      ::setrlimit(RLIMIT_FSIZE, &r);
      int code = 0;
      try {
        write_random(path, 300, 64, 10, 16);
      } catch (const Error& e) {
        code = std::string(e.what()).find(path) != std::string::npos ? 1 : 3;
      }
      std::exit(code);  // not _exit: HDF5's atexit handler runs, as at the end of a command
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    if (!WIFEXITED(status)) {
      ++crashed;
      how = cat("signal ", WTERMSIG(status), " at a limit of ", limit, " bytes");
    } else {
      EXPECT_EQ(WEXITSTATUS(status), 1) << "at a limit of " << limit << " bytes of " << bytes
                                        << " (0: no error, 3: the error does not name the file)";
    }
    EXPECT_FALSE(file_exists(path)) << "a partial shard under its finished name at a limit of " << limit;
  }
  EXPECT_EQ(crashed, 0) << crashed << " of " << limits << " limits crashed the process, e.g. " << how;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << parts.front();
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(BertHdf5, WriterRejectsValuesThatDoNotFit) {
  TempDir dir;
  std::string path = dir.file("shard.hdf5");
  BertShardWriter writer(path, 8, 2);
  BertRecord good{{101, 5, 102}, {1, 1, 1}, {0, 0, 1}, {1}, {7}, 0};
  writer.append(good);
  auto with = [&](auto change) {
    BertRecord r = good;
    change(r);
    return [&writer, r] { writer.append(r); };
  };
  expect_error(with([](BertRecord& r) { r.input_mask[2] = 200; }), {path, "record 1", "input_mask[2] = 200", "int8"});
  expect_error(with([](BertRecord& r) { r.segment_ids[0] = -129; }), {path, "segment_ids[0] = -129"});
  expect_error(with([](BertRecord& r) { r.next_sentence_label = 128; }), {path, "next_sentence_label = 128"});
  expect_error(with([](BertRecord& r) { r.masked_lm_positions[0] = 8; }), {path, "masked_lm_positions[0] = 8", "[0, 8)"});
  expect_error(with([](BertRecord& r) { r.masked_lm_positions[0] = -1; }), {path, "masked_lm_positions[0] = -1"});
  expect_error(with([](BertRecord& r) { r.input_ids.resize(9, 1); }), {path, "seq_len 8"});
  expect_error(with([](BertRecord& r) { r.input_mask.pop_back(); }), {path, "one length"});
  expect_error(with([](BertRecord& r) { r.masked_lm_ids.push_back(3); }), {path, "max_predictions 2"});
  BertBatch wrong(1, 9, 2);
  expect_error([&] { writer.append(wrong); }, {path, "seq_len 9"});
  BertBatch bad_position(3, 8, 2);
  bad_position.masked_lm_positions[5] = 99;
  expect_error([&] { writer.append(bad_position); }, {path, "record 3", "masked_lm_positions[1] = 99"});
  EXPECT_EQ(writer.size(), 1);  // rejected appends leave nothing behind
  writer.commit();
  expect_reads_back(path, {padded(good, 8, 2)}, 8, 2);
  EXPECT_THROW(BertShardWriter(dir.file("x.hdf5"), 0, 2), UsageError);
  EXPECT_THROW(BertShardWriter(dir.file("x.hdf5"), 8, 2, {.gzip_level = 10}), UsageError);
}

// A file in the layout h5py would write from other dtypes: int64 and uint8, contiguous or odd chunks.
struct ForeignDataset {
  std::string name;
  hid_t type;
  std::vector<hsize_t> dims;
  std::vector<int64_t> values;
  std::vector<hsize_t> chunk;  // empty: contiguous (compact when `compact`)
  bool compact = false;
};

void write_foreign(const std::string& path, const std::vector<ForeignDataset>& sets) {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const auto& s : sets) {
    hid_t space = H5Screate_simple(static_cast<int>(s.dims.size()), s.dims.data(), nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (!s.chunk.empty()) {
      H5Pset_chunk(dcpl, static_cast<int>(s.chunk.size()), s.chunk.data());
      H5Pset_shuffle(dcpl);
      H5Pset_deflate(dcpl, 1);
    } else if (s.compact) {
      H5Pset_layout(dcpl, H5D_COMPACT);
    }
    hid_t d = H5Dcreate2(file, s.name.c_str(), s.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    if (!s.values.empty()) {
      ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.values.data()), 0);
    }
    H5Dclose(d), H5Pclose(dcpl), H5Sclose(space);
  }
  H5Fclose(file);
}

std::vector<ForeignDataset> foreign_layout(int64_t n, int64_t seq, int64_t mp) {
  auto fill = [](int64_t count, int64_t mod, int64_t add) {
    std::vector<int64_t> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = i % mod + add;
    return v;
  };
  auto N = static_cast<hsize_t>(n), S = static_cast<hsize_t>(seq), P = static_cast<hsize_t>(mp);
  return {{"input_ids", H5T_STD_I64BE, {N, S}, fill(n * seq, 30000, 0), {}},
          {"input_mask", H5T_STD_U8LE, {N, S}, fill(n * seq, 2, 0), {3, 2}},
          {"segment_ids", H5T_STD_I16LE, {N, S}, fill(n * seq, 2, 0), {}},
          {"masked_lm_positions", H5T_STD_I64LE, {N, P}, fill(n * mp, seq - 1, 1), {2, 1}},
          {"masked_lm_ids", H5T_STD_I64LE, {N, P}, fill(n * mp, 999, 5), {}},
          {"next_sentence_labels", H5T_STD_I32LE, {N}, fill(n, 2, 0), {4}}};
}

TEST(BertHdf5, ReadsOtherIntegerWidthsAndLayoutsThroughHdf5) {
  TempDir dir;
  std::string path = dir.file("foreign.hdf5");
  auto sets = foreign_layout(7, 6, 3);
  write_foreign(path, sets);
  BertBatch batch;
  {
    BertShardReader reader(path);
    EXPECT_FALSE(reader.raw_chunk_path());
    ASSERT_EQ(reader.size(), 7);
    reader.read_range(0, 7, batch);
  }
  for (int64_t i = 0; i < 7 * 6; ++i) {
    EXPECT_EQ(batch.input_ids[static_cast<size_t>(i)], i % 30000);
    EXPECT_EQ(batch.input_mask[static_cast<size_t>(i)], i % 2);
  }
  for (int64_t i = 0; i < 7 * 3; ++i) EXPECT_EQ(batch.masked_lm_positions[static_cast<size_t>(i)], i % 5 + 1);
  EXPECT_EQ(batch.next_sentence_labels[3], 1);

  sets[2].values[9] = 1000;  // does not fit int8: HDF5 would clamp it; we must refuse
  write_foreign(path, sets);
  expect_error([&] { BertShardReader(path).read_range(0, 7, batch); }, {path, "segment_ids", "int8"});
  sets[2].values[9] = 0;
  sets[3].values[4] = 6;  // position == seq_len
  write_foreign(path, sets);
  expect_error([&] { BertShardReader(path).read(1); }, {path, "record 1", "masked_lm_positions[1] = 6"});
}

// A packed row of 1..max_pack random instances (the layout of bert_hdf5.h), fields as long as
// the row's tokens (the writer pads).
BertRecord random_packed_record(std::mt19937& rng, int64_t seq, int64_t max_pred, int64_t max_pack) {
  BertRecord row;
  const int64_t k = std::uniform_int_distribution<int64_t>(1, std::min(max_pack, seq / 2))(rng);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t room = seq - static_cast<int64_t>(row.input_ids.size()) - 2 * (k - j - 1);
    const int64_t preds_room = max_pred - static_cast<int64_t>(row.masked_lm_positions.size());
    BertRecord one = random_record(rng, std::min<int64_t>(room, 2 + static_cast<int64_t>(rng() % 9)), preds_room);
    const auto offset = static_cast<int32_t>(row.input_ids.size());
    row.next_sentence_positions.push_back(offset);
    row.packed_next_sentence_labels.push_back(one.next_sentence_label);
    if (j == 0) row.next_sentence_label = one.next_sentence_label;
    for (size_t t = 0; t < one.input_ids.size(); ++t) {
      row.input_ids.push_back(one.input_ids[t]);
      row.input_mask.push_back(1);
      row.segment_ids.push_back(one.segment_ids[t]);
      row.position_ids.push_back(static_cast<int32_t>(t));
      row.sequence_ids.push_back(static_cast<int32_t>(j + 1));
    }
    for (size_t p = 0; p < one.masked_lm_positions.size(); ++p) {
      row.masked_lm_positions.push_back(offset + one.masked_lm_positions[p]);
      row.masked_lm_ids.push_back(one.masked_lm_ids[p]);
    }
  }
  return row;
}

BertRecord padded_packed(BertRecord r, int64_t seq, int64_t max_pred, int64_t max_pack) {
  r = padded(std::move(r), seq, max_pred);
  for (auto* v : {&r.position_ids, &r.sequence_ids}) v->resize(static_cast<size_t>(seq), 0);
  r.next_sentence_positions.resize(static_cast<size_t>(max_pack), 0);
  r.packed_next_sentence_labels.resize(static_cast<size_t>(max_pack), -1);
  return r;
}

// Packed rows, one by one and in batches, across chunks: every field back on both read paths,
// and every row as shard-tool verify wants it.
TEST(BertHdf5, PackedRoundTripOnBothReadPaths) {
  TempDir dir;
  const std::string path = dir.file("packed.hdf5");
  const int64_t seq = 24, max_pred = 6, max_pack = 3;
  std::mt19937 rng(11);
  std::vector<BertRecord> records;
  BertShardWriter writer(path, seq, max_pred, {.records_per_chunk = 4, .in_flight_chunks = 2, .max_pack = max_pack});
  while (records.size() < 37) {
    if (records.size() % 3 != 2) {
      records.push_back(padded_packed(random_packed_record(rng, seq, max_pred, max_pack), seq, max_pred, max_pack));
      writer.append(records.back());
    } else {
      BertBatch batch(5, seq, max_pred, max_pack);
      for (int64_t i = 0; i < batch.size; ++i) {
        records.push_back(padded_packed(random_packed_record(rng, seq, max_pred, max_pack), seq, max_pred, max_pack));
        batch.set(i, records.back());
      }
      writer.append(batch);
    }
  }
  writer.commit();
  expect_reads_back(path, records, seq, max_pred, max_pack);
  BertBatch all;
  BertShardReader(path).read_range(0, static_cast<int64_t>(records.size()), all);
  for (int64_t i = 0; i < all.size; ++i) EXPECT_EQ(packed_row_problem(all, i), "") << "record " << i;
  EXPECT_EQ(count_bert_records(path), records.size());
  std::ostringstream inspect;
  inspect_bert_shard(path, inspect, 1);
  EXPECT_NE(inspect.str().find("up to 3 instances per row"), std::string::npos) << inspect.str();
  EXPECT_NE(inspect.str().find("packed_next_sentence_labels: dtype=|i1 shape=(37, 3)"), std::string::npos)
      << inspect.str();
}

TEST(BertHdf5, PackedWriterRejectsValuesOutOfRange) {
  TempDir dir;
  const std::string path = dir.file("packed.hdf5");
  BertShardWriter writer(path, 8, 2, {.max_pack = 2});
  const BertRecord good{{101, 5, 102, 101, 6, 102}, {1, 1, 1, 1, 1, 1}, {0, 0, 1, 0, 0, 1}, {1, 4}, {7, 8}, 1,
                        {0, 1, 2, 0, 1, 2}, {1, 1, 1, 2, 2, 2}, {0, 3}, {1, 0}};
  writer.append(good);
  auto with = [&](auto change) {
    BertRecord r = good;
    change(r);
    return [&writer, r] { writer.append(r); };
  };
  expect_error(with([](BertRecord& r) { r.sequence_ids[3] = 3; }), {path, "record 1", "sequence_ids[3] = 3", "[0, 2]"});
  expect_error(with([](BertRecord& r) { r.position_ids[1] = 8; }), {path, "position_ids[1] = 8", "[0, 7]"});
  expect_error(with([](BertRecord& r) { r.next_sentence_positions[1] = -1; }), {path, "next_sentence_positions[1] = -1"});
  expect_error(with([](BertRecord& r) { r.packed_next_sentence_labels[0] = 2; }),
               {path, "packed_next_sentence_labels[0] = 2", "[-1, 1]"});
  expect_error(with([](BertRecord& r) { r.sequence_ids.pop_back(); }), {path, "as long as input_ids"});
  expect_error(with([](BertRecord& r) { r.next_sentence_positions.push_back(5); }), {path, "max_pack 2"});
  BertBatch batch(2, 8, 2, 2);
  batch.sequence_ids[9] = -1;
  expect_error([&] { writer.append(batch); }, {path, "record 2", "sequence_ids[1] = -1"});
  expect_error([&] { writer.append(BertBatch(1, 8, 2)); }, {path, "max_pack 0", "expected 2"});
  EXPECT_EQ(writer.size(), 1);
  writer.commit();
  expect_reads_back(path, {padded_packed(good, 8, 2, 2)}, 8, 2, 2);
  BertShardWriter unpacked(dir.file("plain.hdf5"), 8, 2);
  expect_error([&] { unpacked.append(good); }, {"plain.hdf5", "record 0", "not packed"});
  EXPECT_THROW(BertShardWriter(dir.file("x.hdf5"), 8, 2, {.max_pack = 128}), UsageError);
}

// A file with some of the four packed datasets is neither kind; a wrong shape names the dataset.
TEST(BertHdf5, PackedDatasetsAllOrNoneWithTheirShapes) {
  TempDir dir;
  const std::string path = dir.file("packed.hdf5");
  auto packed = foreign_layout(4, 6, 3);
  auto zeros = [](int64_t n) { return std::vector<int64_t>(static_cast<size_t>(n), 0); };
  packed.push_back({"position_ids", H5T_STD_I32LE, {4, 6}, zeros(24), {}});
  packed.push_back({"sequence_ids", H5T_STD_I8LE, {4, 6}, std::vector<int64_t>(24, 1), {2, 6}});
  packed.push_back({"next_sentence_positions", H5T_STD_I32LE, {4, 2}, zeros(8), {}});
  packed.push_back({"packed_next_sentence_labels", H5T_STD_I8LE, {4, 2}, std::vector<int64_t>(8, -1), {}});
  write_foreign(path, packed);
  {
    BertShardReader reader(path);
    EXPECT_EQ(reader.max_pack(), 2);
    BertRecord r = reader.read(3);
    EXPECT_EQ(r.sequence_ids, std::vector<int32_t>(6, 1));
    EXPECT_EQ(r.packed_next_sentence_labels, (std::vector<int32_t>{-1, -1}));
  }
  for (size_t drop = 6; drop < 10; ++drop) {
    auto some = packed;
    const std::string name = some[drop].name;
    some.erase(some.begin() + static_cast<std::ptrdiff_t>(drop));
    write_foreign(path, some);
    expect_error([&] { BertShardReader r(path); }, {path, cat("missing dataset '", name, "'"), "all four"});
    expect_error([&] { count_bert_records(path); }, {path, name});
  }
  auto wrong = packed;
  wrong[7].dims = {4, 5};
  wrong[7].values.resize(20);
  wrong[7].chunk = {};
  write_foreign(path, wrong);
  expect_error([&] { BertShardReader r(path); }, {path, "'sequence_ids' has shape [4, 5], expected [4, 6]"});
  wrong = packed;
  wrong[9].dims = {4, 3};
  wrong[9].values.resize(12);
  write_foreign(path, wrong);
  expect_error([&] { BertShardReader r(path); },
               {path, "'packed_next_sentence_labels' has shape [4, 3], expected [4, 2]", "max_pack from next_sentence_positions"});
  wrong = packed;
  wrong[6].values[7] = 6;  // position_ids past seq_len
  write_foreign(path, wrong);
  expect_error([&] { BertShardReader(path).read(1); }, {path, "record 1", "position_ids[1] = 6"});
}

// Each broken invariant of a packed row is named.
TEST(BertHdf5, PackedRowProblemsAreNamed) {
  const BertRecord good{{101, 5, 102, 101, 6, 102}, {1, 1, 1, 1, 1, 1}, {0, 0, 1, 0, 0, 1}, {1, 4}, {7, 8}, 1,
                        {0, 1, 2, 0, 1, 2}, {1, 1, 1, 2, 2, 2}, {0, 3}, {1, 0}};
  auto problem = [&](auto change) {
    BertRecord r = padded_packed(good, 8, 3, 3);
    change(r);
    BertBatch b(1, 8, 3, 3);
    b.set(0, r);
    return packed_row_problem(b, 0);
  };
  auto names = [](const std::string& problem, const std::string& part) {
    return problem.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << "'" << problem << "' lacks '" << part << "'";
  };
  EXPECT_EQ(problem([](BertRecord&) {}), "");
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[4] = 1; }), "sequence_ids[4] = 1, expected 2"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[3] = 3; }), "sequence_ids[3] = 3"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[7] = 2, r.input_mask[7] = 1; }), "after padding"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.input_mask[6] = 1; }), "input_mask[6] = 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.position_ids[4] = 2; }), "position_ids[4] = 2, expected 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.next_sentence_positions[1] = 2; }), "next_sentence_positions[1] = 2"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.packed_next_sentence_labels[2] = 0; }), "-1 (no instance)"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.packed_next_sentence_labels[1] = -1; }), "0 or 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.next_sentence_label = 0; }), "the first instance's 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.masked_lm_positions[1] = 3; }), "instance 2's [CLS]"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.masked_lm_positions[1] = 7; }), "is padding"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.masked_lm_positions = {4, 1, 0}; }), "ascending"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[0] = 0, r.input_mask[0] = 0; }), "starts with its first"));
}

TEST(BertHdf5, ReaderNamesWhatIsMissingOrInconsistent) {
  TempDir dir;
  std::string path = dir.file("bad.hdf5");
  auto sets = foreign_layout(4, 6, 3);
  auto without_labels = sets;
  without_labels.pop_back();
  write_foreign(path, without_labels);
  expect_error([&] { BertShardReader r(path); }, {path, "missing dataset 'next_sentence_labels'", "[N]"});

  auto wrong_rank = sets;
  wrong_rank[1].dims = {24};
  wrong_rank[1].chunk = {};
  write_foreign(path, wrong_rank);
  expect_error([&] { BertShardReader r(path); }, {path, "'input_mask' has rank 1", "[N, seq_len]"});

  auto wrong_n = sets;
  wrong_n[4].dims = {3, 3};
  wrong_n[4].values.resize(9);
  write_foreign(path, wrong_n);
  expect_error([&] { BertShardReader r(path); }, {path, "'masked_lm_ids' has shape [3, 3], expected [4, 3]"});

  auto floats = sets;
  floats[0].type = H5T_IEEE_F32LE;
  write_foreign(path, floats);
  expect_error([&] { BertShardReader r(path); }, {path, "'input_ids'", "integer"});

  write_file_atomic(path, "not hdf5 at all");
  expect_error([&] { BertShardReader r(path); }, {path, "not an HDF5 file"});
  expect_error([&] { BertShardReader r(dir.file("nope.hdf5")); }, {"nope.hdf5"});
}

TEST(BertHdf5, TruncatedAndCorruptFilesThrowNamingTheFile) {
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 50, 32, 5, 8);
  std::string bytes = read_file(good);
  std::string cut = dir.file("cut.hdf5");
  std::vector<size_t> lengths = {0, 1, 7, 8, 100, 511, 512, 1000, 2048, bytes.size() - 1};
  for (size_t at = 0; at < bytes.size(); at += bytes.size() / 23) lengths.push_back(at);
  for (size_t len : lengths) {
    write_file_atomic(cut, std::string_view(bytes).substr(0, len));
    expect_error([&] {
      BertShardReader reader(cut);
      BertBatch b;
      reader.read_range(0, reader.size(), b);
    }, {cut});
  }
  // Flipped bytes anywhere: an Error naming the file or, where the damage is in unused space, a
  // clean read; never a crash or another exception type.
  for (size_t at = 0; at < bytes.size(); at += 97) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    write_file_atomic(cut, damaged);
    for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab}) {
      try {
        BertShardReader reader(cut, read_path);
        BertBatch b;
        reader.read_range(0, std::min<int64_t>(reader.size(), 1000), b);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
      }
    }
  }
}

// Writes a small shard and returns, for each of its six datasets, a copy of the file whose layout
// message `damage` changed. The layout message of our files is a version-1 object header message
// (type 8), layout version 3, class chunked: 08 00 len len flags 0 0 0 | 03 02 rank+1 |
// address (8) | dims (4 bytes each); `damage` gets the file and the offset of that message.
std::vector<std::string> files_with_layout(const TempDir& dir, const std::function<void(std::string&, size_t)>& damage) {
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  std::string bytes = read_file(good);
  std::vector<std::string> paths;
  for (size_t at = 0; at + 8 + 3 + 8 + 4 <= bytes.size(); ++at) {
    if (bytes[at] != 8 || bytes[at + 1] != 0 || bytes[at + 8] != 3 || bytes[at + 9] != 2) continue;
    if (bytes[at + 10] != 2 && bytes[at + 10] != 3) continue;
    std::string damaged = bytes;
    damage(damaged, at);
    paths.push_back(dir.file(cat("damaged-", paths.size(), ".hdf5")));
    write_file_atomic(paths.back(), damaged);
  }
  EXPECT_EQ(paths.size(), 6u) << "expected one chunked layout message per dataset";
  return paths;
}

// The same, with the first chunk dimension set to `rows`.
std::vector<std::string> files_with_chunk_rows(const TempDir& dir, uint32_t rows) {
  return files_with_layout(dir, [&](std::string& bytes, size_t at) { std::memcpy(bytes.data() + at + 8 + 3 + 8, &rows, 4); });
}

// A chunk dimension of 0 in a layout message made libhdf5 1.10 die of SIGFPE inside H5Dopen2
// (found by fuzzing). The reader must refuse such a file with an Error before HDF5 divides by it.
TEST(BertHdf5, ZeroChunkDimensionIsAnErrorNotACrash) {
  TempDir dir;
  for (const std::string& path : files_with_chunk_rows(dir, 0))
    expect_error([&] { BertShardReader reader(path); }, {path, "chunk dimension of 0"});
}

// libhdf5 takes a chunk dimension for each axis of the dataspace and 0 for one the layout message
// does not list, then divides by it: SIGFPE inside H5Dopen2 (found by fuzzing on a lent 16-core
// machine, a layout of 0 dimensions for next_sentence_labels, rank 1; the reproducer is in the
// fuzz corpus, which CI replays under ASan). Every dataset, with 0 dimensions and with its rank.
TEST(BertHdf5, LayoutWithFewerDimensionsThanItsDataspaceIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/layout-of-0-dimensions-for-rank-1.hdf5";
  // The file found is damaged elsewhere too: input_ids' chunk index root is zeros, which the reader
  // refuses first since the chunk index guard (DamagedChunkIndexIsAnErrorNotACrash). The files
  // below damage the layout alone.
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab})
    expect_error([&] { BertShardReader reader(found, read_path); },
                 {found, "dataset 'input_ids' has a chunk index (v1 B-tree) node at address 2936, its root, that is not a chunk"});
  TempDir dir;
  for (int dims : {0, 1}) {
    // rank + 1 → dims, or → rank for the rank-2 datasets when dims is 1.
    auto files = files_with_layout(dir, [&](std::string& bytes, size_t at) {
      bytes[at + 10] = static_cast<char>(dims == 0 ? 0 : bytes[at + 10] - 1);
    });
    for (const std::string& path : files)
      expect_error([&] { BertShardReader reader(path); }, {path, "has a chunked layout message of", "for a dataspace of rank"});
  }
}

// A chunk shape made larger by damage (within the unlimited maximum) made libhdf5 read past the
// shorter buffer its gzip filter returned (ASan: heap-buffer-overflow in H5VM_memcpyvv). Both
// read paths must find that the chunk decodes to fewer bytes than its shape says.
TEST(BertHdf5, ChunkShapeLargerThanItsDataIsAnError) {
  TempDir dir;
  // The row count of the chunk grows; the stored chunks stay 8 rows.
  for (const std::string& path : files_with_chunk_rows(dir, 5898248))
    for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab})
      expect_error([&] {
        BertShardReader reader(path, read_path);
        BertBatch b;
        reader.read_range(0, reader.size(), b);
      }, {path});
}

// A copy of `bytes` with `with` written at `at`, as a file in `dir` named for `name`.
std::string damaged_copy(const TempDir& dir, std::string bytes, size_t at, std::string_view with, const std::string& name) {
  bytes.replace(at, with.size(), with);
  std::string path = dir.file(name + ".hdf5");
  write_file_atomic(path, bytes);
  return path;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// Opens `path` and reads every record, on both read paths, expecting an Error naming `expected`.
void expect_read_error(const std::string& path, const std::vector<std::string>& expected) {
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab})
    expect_error([&] {
      BertShardReader reader(path, read_path);
      BertBatch b;
      reader.read_range(0, reader.size(), b);
    }, expected);
}

// libhdf5 1.10 looks names up through the root group's symbol table and reads its local heap
// without checking it against the file: a damaged one killed the process with SIGSEGV inside
// H5Lexists (found by fuzzing; the reproducer is in the fuzz corpus). The reader must refuse such a
// root group before its first lookup. Our files' root group is the only old-style group, so its
// B-tree node is the one "TREE" of node type 0 and its local heap the one "HEAP".
TEST(BertHdf5, DamagedRootGroupIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/root-group-symbol-table-past-the-file.hdf5";
  expect_read_error(found, {found, "byte 120: the root group's symbol table message names a B-tree at address"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  const std::string bytes = read_file(good);
  const size_t heap = bytes.find("HEAP"), tree = bytes.find(std::string("TREE\0", 5));
  ASSERT_NE(heap, std::string::npos);
  ASSERT_NE(tree, std::string::npos);
  ASSERT_EQ(bytes.find("HEAP", heap + 1), std::string::npos) << "expected one local heap";
  struct Damage {
    size_t at;
    std::string with, expected;
  };
  const Damage damages[] = {
      {heap, "PAEH", "a local heap at address"},
      {heap + 8, le64(uint64_t{1} << 40), "bytes of names at address"},  // the names' size
      {heap + 24, le64(bytes.size()), "bytes of names at address"},      // their address
      {tree, "EERT", "a B-tree at address"},
      {tree + 4, std::string(1, '\1'), "a B-tree at address"},  // a chunk B-tree node, not a group's
  };
  for (const Damage& d : damages) {
    std::string path = damaged_copy(dir, bytes, d.at, d.with, cat("root-", d.at));
    expect_read_error(path, {path, "the root group's symbol table message names", d.expected, "the file is damaged"});
  }
  BertShardReader reader(good);  // and the undamaged file still opens
  EXPECT_EQ(reader.size(), 20);
}

// A chunk index entry with an address and 0 stored bytes made libhdf5 1.10 copy a whole chunk out
// of a shorter buffer (ASan: heap-buffer-overflow in H5VM_memcpyvv under H5Dread; found by fuzzing,
// the reproducer is in the fuzz corpus). Both read paths must refuse it. A chunk B-tree node is
// "TREE", type 1, level, entries (2), two sibling addresses, then keys: stored size (4), filter
// mask (4), offsets; the first key's size is set to 0.
TEST(BertHdf5, ChunkWithAnAddressAndNoStoredBytesIsAnError) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/chunk-with-an-address-and-0-stored-bytes.hdf5";
  // Damaged elsewhere too (input_ids' chunk index lists chunk (0, 0) twice; segment_ids' index
  // root is zeros), which the reader refuses first since the chunk index guards; the file below
  // has the one damage.
  expect_read_error(found, {found, "dataset 'input_ids' has a chunk index (v1 B-tree) node at address 2936, its root, "
                            "whose entry 1 is chunk (0, 0, 0), not after entry 0's (0, 0, 0)"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  const std::string bytes = read_file(good);
  const size_t tree = bytes.find(std::string("TREE\1\0", 6));
  ASSERT_NE(tree, std::string::npos);
  std::string path = damaged_copy(dir, bytes, tree + 24, std::string(4, '\0'), "empty-chunk");
  expect_read_error(path, {path, "claims 0 stored bytes at address", "a written chunk is never empty"});
}

// A compact dataset whose layout message's size field was damaged (0: no buffer at all) made
// libhdf5 1.10 copy the dataspace's bytes out of it anyway (SEGV in H5VM_memcpyvv under H5Dread,
// h5py too; found by fuzzing, the reproducer is in the fuzz corpus). Both read paths must refuse
// it. A version-3 layout message of a compact dataset is 3, 0 (its class), the size (2 bytes),
// then the values.
TEST(BertHdf5, CompactDatasetWithADamagedSizeIsAnError) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/compact-layout-with-0-stored-bytes.hdf5";
  expect_read_error(found, {found, "dataset 'input_ids' is compact with 0 bytes stored for shape [5, 8] of 4-byte values",
                            "expected 160", "the file is damaged"});
  TempDir dir;
  std::string good = dir.file("compact.hdf5");
  auto sets = foreign_layout(7, 6, 3);
  sets[0].type = H5T_STD_I32LE;
  sets[0].compact = true;
  sets[5].chunk = {}, sets[5].compact = true;  // next_sentence_labels: rank 1
  write_foreign(good, sets);
  BertBatch batch;
  BertShardReader(good).read_range(0, 7, batch);  // undamaged, it reads
  EXPECT_EQ(batch.input_ids[41], 41);
  EXPECT_EQ(batch.next_sentence_labels[3], 1);
  const std::string bytes = read_file(good);
  std::string ids(7 * 6 * 4, '\0');
  for (int32_t i = 0; i < 42; ++i) std::memcpy(ids.data() + 4 * i, &i, 4);
  const size_t message = bytes.find(std::string("\3\0\xa8\0", 4) + ids);  // 168 bytes of values
  ASSERT_NE(message, std::string::npos);
  for (std::string size : {std::string(2, '\0'), std::string("\x08\0", 2)}) {  // no buffer; a short one
    const int stored = static_cast<unsigned char>(size[0]);
    std::string path = damaged_copy(dir, bytes, message + 2, size, cat("compact-", stored));
    expect_read_error(path, {path, cat("dataset 'input_ids' is compact with ", stored, " bytes stored for shape [7, 6]"),
                             "expected 168"});
  }
}

// A chunk index (v1 B-tree) whose root's level byte was damaged (0 → 255) made libhdf5 1.10 take
// chunk addresses for child nodes and die with SIGSEGV (a null read in H5F__accum_read under
// H5B_iterate, from H5Dget_chunk_info_by_coord; found by fuzzing, the reproducer is in the fuzz
// corpus). Every node must be a whole chunk node one level below its parent. A node is "TREE",
// node type (1: chunks), level, entries (2 bytes), siblings, then keys and children.
TEST(BertHdf5, DamagedChunkIndexIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/chunk-index-root-at-level-255.hdf5";
  // Its root's keys are damaged too, and the key-order check (ChunkIndexKeysOutOfOrderAreAnError-
  // NotACrash) refuses them before the walk reaches the child at address 680 that libhdf5 died on;
  // the damages below change the level alone.
  expect_read_error(found, {found, "byte 2936", "has a chunk index (v1 B-tree) node at address 2936, its root, whose entry 2 "
                            "is chunk (12, 131074, 34), not after entry 1's (48, 0, 34)"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  auto records = write_random(good, 200, 16, 4, 1);  // 200 one-record chunks: more than a node's 64
  expect_reads_back(good, records, 16, 4);            // so the root is at level 1, and reads
  const std::string bytes = read_file(good);
  const size_t root = bytes.find(std::string("TREE\1\1", 6)), leaf = bytes.find(std::string("TREE\1\0", 6));
  ASSERT_NE(root, std::string::npos) << "expected a two-level chunk index";
  ASSERT_NE(leaf, std::string::npos);
  struct Damage {
    size_t at;
    std::string with, expected;
  };
  const Damage damages[] = {
      {root + 5, std::string(1, '\xff'), "expected at level 254, at level 0"},  // its children are leaves
      {root + 5, std::string(1, '\2'), "expected at level 1, at level 0"},  // its children are leaves
      {leaf, "TREX", "expected at level 0, that is not a chunk B-tree node"},
      {leaf + 6, std::string("\xff\0", 2), "at level 0 with 255 entries (at most 64)"},
  };
  for (const Damage& d : damages) {
    std::string path = damaged_copy(dir, bytes, d.at, d.with, cat("index-", d.at, "-", static_cast<int>(d.with[0])));
    expect_read_error(path, {path, "has a chunk index (v1 B-tree) node at address", d.expected, "the file is damaged"});
  }
}

// libhdf5 1.10's H5Dread finds a chunk by binary search over its index's keys, while
// H5Dget_chunk_info_by_coord, which the reader's checks of a chunk's stored bytes use, took the
// first match. A leaf listing chunk (0, 0) twice, the second time 26 bytes with gzip marked
// skipped, passed those checks, then H5Dread copied a whole 64-byte chunk out of the 26 bytes
// (ASan: heap-buffer-overflow in H5VM_memcpyvv; found by fuzzing). Keys out of order, in a node or
// against its parent's, must be refused before libhdf5 reads a chunk.
TEST(BertHdf5, ChunkIndexKeysOutOfOrderAreAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/chunk-index-keys-out-of-order.hdf5";
  expect_read_error(found, {found, "byte 2936", "dataset 'input_ids' has a chunk index (v1 B-tree) node at address 2936, "
                            "its root, whose entry 2 is chunk (0, 0, 0), not after entry 1's (1, 0, 0)"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  auto records = write_random(good, 200, 16, 4, 1);  // 200 one-record chunks: a root over leaves
  expect_reads_back(good, records, 16, 4);
  const std::string bytes = read_file(good);
  auto u64 = [&](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  // A leaf of a rank-2 dataset: 24-byte header, then keys of 32 bytes (size, filter mask, three
  // offsets) between 8-byte child addresses. Key i's row offset is at 24 + 40 i + 8; with one row
  // per chunk, consecutive keys hold consecutive rows.
  auto row_at = [](size_t leaf, uint64_t i) { return leaf + 24 + 40 * i + 8; };
  size_t first = std::string::npos, later = std::string::npos;  // leaves whose first row is 0, and not 0
  for (size_t at = bytes.find(std::string("TREE\1\0", 6)); at != std::string::npos; at = bytes.find(std::string("TREE\1\0", 6), at + 1)) {
    uint64_t row = u64(row_at(at, 0));
    if (u64(row_at(at, 1)) != row + 1 || u64(row_at(at, 2)) != row + 2 || u64(row_at(at, 1) + 8) != 0) continue;
    (row == 0 ? first : later) = at;
  }
  ASSERT_NE(first, std::string::npos) << "expected a rank-2 leaf starting at row 0";
  ASSERT_NE(later, std::string::npos) << "expected a rank-2 leaf starting past row 0";
  const uint64_t last = u64(first + 6) & 0xffff, later_row = u64(row_at(later, 0));
  ASSERT_GE(last, 3u);
  struct Damage {
    size_t at;
    uint64_t row;
    std::string expected;
  };
  const Damage damages[] = {
      {row_at(first, 1), 0, "whose entry 1 is chunk (0, 0, 0), not after entry 0's (0, 0, 0)"},  // a duplicate
      {row_at(first, 1), 2, "whose entry 2 is chunk (2, 0, 0), not after entry 1's (2, 0, 0)"},
      {row_at(first, 2), 1, "whose entry 2 is chunk (1, 0, 0), not after entry 1's (1, 0, 0)"},
      {row_at(first, last - 1), 199, cat("whose entry ", last - 1, " is chunk (199, 0, 0), not before its parent's next key")},
      {row_at(later, 0), 0, cat("whose first entry is chunk (0, 0, 0), before its parent's key (", later_row, ", 0, 0)")},
  };
  for (const Damage& d : damages) {
    std::string path = damaged_copy(dir, bytes, d.at, le64(d.row), cat("keys-", d.at, "-", d.row));
    expect_read_error(path, {path, "has a chunk index (v1 B-tree) node at address", d.expected, "the file is damaged"});
  }
}

// A header message flagged shared (flags bit 1) whose encoding (version 2 or 3, then 1) says it
// lives in the file's shared-message heap made libhdf5 1.10 look it up through a shared-message
// table the file does not have (SIGSEGV: a null read in H5F__accum_read under
// H5SM_get_fheap_addr, inside H5Dopen2; found by fuzzing). The reader must refuse it first.
TEST(BertHdf5, SharedMessageInAHeapTheFileLacksIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/fill-value-in-a-shared-message-heap-the-file-lacks.hdf5";
  expect_read_error(found, {found, "byte 1768: dataset 'segment_ids' has a header message (type 5) kept in the shared-message "
                            "heap of a file that has none: the file is damaged"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  const std::string bytes = read_file(good);
  // input_ids' fill value message: type 5, 8 bytes, flags 1 (constant), then version 2, ...
  const size_t fill = bytes.find(std::string("\5\0\10\0\1\0\0\0\2\3\2\1", 12));
  ASSERT_NE(fill, std::string::npos);
  for (const char* version : {"\2", "\3"}) {
    // flags: shared (then 3 reserved bytes); the message: this version, in the shared-message heap
    std::string path = damaged_copy(dir, bytes, fill + 4, std::string("\2\0\0\0", 4) + version + "\1",
                                    cat("shared-v", static_cast<int>(version[0])));
    expect_read_error(path, {path, cat("byte ", fill + 8, ": dataset 'input_ids' has a header message (type 5) kept in the "
                                       "shared-message heap of a file that has none")});
  }
}

// ---------------------------------------------------------------------------------------------
// NVIDIA's files (create_pretraining_data.py + h5py), checked against its own instance dump.

struct Instance {
  std::vector<std::string> tokens, masked_lm_labels;
  std::vector<int32_t> segment_ids, masked_lm_positions;
  bool is_random_next = false;
};

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<Instance> read_instances(const std::string& path) {
  std::ifstream in(path);
  std::vector<Instance> out;
  Instance cur;
  auto field = [](const std::string& line, const std::string& key, std::string* value) {
    if (line.rfind(key + ": ", 0) != 0 && line != key + ":") return false;
    *value = line.size() > key.size() + 2 ? line.substr(key.size() + 2) : "";
    return true;
  };
  for (std::string line, v; std::getline(in, line);) {
    if (field(line, "tokens", &v)) cur.tokens = split(v);
    else if (field(line, "segment_ids", &v)) for (auto& w : split(v)) cur.segment_ids.push_back(std::stoi(w));
    else if (field(line, "is_random_next", &v)) cur.is_random_next = v == "True";
    else if (field(line, "masked_lm_positions", &v)) for (auto& w : split(v)) cur.masked_lm_positions.push_back(std::stoi(w));
    else if (field(line, "masked_lm_labels", &v)) cur.masked_lm_labels = split(v), out.push_back(std::move(cur)), cur = {};
  }
  return out;
}

void check_against_dump(const std::string& hdf5, int64_t expected_records, int64_t expected_random) {
  std::string dump = hdf5.substr(0, hdf5.size() - 5) + ".instances.txt";
  std::vector<Instance> instances = read_instances(dump);
  ASSERT_EQ(static_cast<int64_t>(instances.size()), expected_records) << dump;
  std::unordered_map<std::string, int32_t> vocab;  // token -> line number
  if (std::string v = testing::shared_file("vocab/bert-base-uncased-vocab.txt"); !v.empty()) {
    std::ifstream in(v);
    int32_t id = 0;
    for (std::string line; std::getline(in, line);) vocab.emplace(line, id++);
  }
  BertShardReader fast(hdf5), slow(hdf5, BertReadPath::hyperslab);
  EXPECT_TRUE(fast.raw_chunk_path()) << "NVIDIA's gzip chunks should take the raw path";
  ASSERT_EQ(fast.size(), expected_records);
  ASSERT_EQ(fast.seq_len(), 128);
  ASSERT_EQ(fast.max_predictions(), 20);
  BertBatch a, b;
  fast.read_range(0, fast.size(), a);
  slow.read_range(0, slow.size(), b);
  EXPECT_TRUE(same_batch(a, b)) << "raw-chunk and hyperslab reads differ";
  int64_t random_next = 0;
  for (int64_t i = 0; i < fast.size(); ++i) {
    const Instance& x = instances[static_cast<size_t>(i)];
    BertRecord r = fast.read(i);
    testing::expect_same_record(r, a.record(i), i);
    auto tokens = static_cast<int64_t>(x.tokens.size());
    EXPECT_EQ(std::count(r.input_mask.begin(), r.input_mask.end(), 1), tokens) << "record " << i;
    for (int64_t j = 0; j < 128; ++j) {
      EXPECT_EQ(r.input_mask[static_cast<size_t>(j)], j < tokens ? 1 : 0) << "record " << i << " col " << j;
      EXPECT_EQ(r.segment_ids[static_cast<size_t>(j)], j < tokens ? x.segment_ids[static_cast<size_t>(j)] : 0)
          << "record " << i << " col " << j;
      if (!vocab.empty()) {
        EXPECT_EQ(r.input_ids[static_cast<size_t>(j)], j < tokens ? vocab.at(x.tokens[static_cast<size_t>(j)]) : 0)
            << "record " << i << " col " << j;
      }
    }
    for (size_t k = 0; k < 20; ++k) {
      bool used = k < x.masked_lm_positions.size();
      EXPECT_EQ(r.masked_lm_positions[k], used ? x.masked_lm_positions[k] : 0) << "record " << i;
      if (!vocab.empty()) {
        EXPECT_EQ(r.masked_lm_ids[k], used ? vocab.at(x.masked_lm_labels[k]) : 0) << "record " << i;
      }
    }
    EXPECT_EQ(r.next_sentence_label, x.is_random_next ? 1 : 0) << "record " << i;
    random_next += r.next_sentence_label;
  }
  EXPECT_EQ(random_next, expected_random);
  // Random access order and odd ranges give the same values as the one big read.
  std::mt19937 rng(9);
  for (int k = 0; k < 200; ++k) {
    int64_t begin = static_cast<int64_t>(rng() % static_cast<uint32_t>(fast.size()));
    int64_t count = std::min<int64_t>(1 + rng() % 400, fast.size() - begin);
    fast.read_range(begin, count, b);
    for (int64_t i = 0; i < count; i += 7)
      testing::expect_same_record(b.record(i), a.record(begin + i), begin + i);
  }
}

TEST(BertHdf5Golden, NvidiaBertSample) {
  PRETRAIN_REQUIRE_SHARED(path, "golden/nvidia-bert-sample-s128.hdf5");
  check_against_dump(path, 23, 12);
}

TEST(BertHdf5Golden, NvidiaBotchan) {
  PRETRAIN_REQUIRE_SHARED(path, "golden/nvidia-botchan-s128.hdf5");
  check_against_dump(path, 1330, 648);
}

TEST(BertHdf5Golden, InspectDescribesNvidiaLayout) {
  PRETRAIN_REQUIRE_SHARED(path, "golden/nvidia-botchan-s128.hdf5");
  std::ostringstream out;
  inspect_bert_shard(path, out, 2);
  std::string text = out.str();
  for (const char* part : {"records 1330", "seq_len 128", "max_predictions 20", "input_ids: dtype=<i4 shape=(1330, 128) chunks=(167, 32)",
                           "input_mask: dtype=|i1", "masked_lm_ids: dtype=<i4 shape=(1330, 20) chunks=(333, 5)",
                           "next_sentence_labels: dtype=|i1 shape=(1330,)", "compression=gzip level 4", "record 1:"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  EXPECT_EQ(text.find("record 2:"), std::string::npos);
}

}  // namespace
}  // namespace pretrain::bert_hdf5_test
