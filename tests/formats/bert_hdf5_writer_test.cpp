// BertShardWriter (formats/bert_hdf5_writer.cpp): what it writes reads back on both read paths,
// records one by one and in batches, across chunks, packed or not; the same bytes at any thread
// count; the chunk shape and gzip level asked for; the shard appears only on commit; values that do
// not fit are refused naming the file and record; a full disk is an error, not a crash.
#include "formats/bert_hdf5.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bert_hdf5_fixture.h"
#include "common/error.h"
#include "common/file.h"
#include "test_util.h"

namespace pretrain::bert_hdf5_writer_test {
namespace {

using bert_hdf5_fixture::expect_error;
using bert_hdf5_fixture::expect_reads_back;
using bert_hdf5_fixture::padded;
using bert_hdf5_fixture::padded_packed;
using bert_hdf5_fixture::random_record;
using bert_hdf5_fixture::two_instance_row;
using bert_hdf5_fixture::write_random;
using testing::TempDir;

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
}  // namespace pretrain::bert_hdf5_writer_test

// LeakSanitizer asks this at exit (sanitizer/lsan_interface.h); other builds never call it.
extern "C" int __lsan_is_turned_off() { return pretrain::bert_hdf5_writer_test::in_forked_child ? 1 : 0; }

namespace pretrain::bert_hdf5_writer_test {
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

// A call that appends `record`, changed by `change`, to `writer`.
template <typename Change>
std::function<void()> appending(BertShardWriter& writer, BertRecord record, Change change) {
  change(record);
  return [&writer, record] { writer.append(record); };
}

TEST(BertHdf5, WriterRejectsValuesThatDoNotFit) {
  TempDir dir;
  std::string path = dir.file("shard.hdf5");
  BertShardWriter writer(path, 8, 2);
  BertRecord good{{101, 5, 102}, {1, 1, 1}, {0, 0, 1}, {1}, {7}, 0};
  writer.append(good);
  auto with = [&](auto change) { return appending(writer, good, change); };
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

// Packed rows, one by one and in batches, across chunks: every field back on both read paths,
// and every row as shard-tool verify wants it.
TEST(BertHdf5, PackedRoundTripOnBothReadPaths) {
  TempDir dir;
  const std::string path = dir.file("packed.hdf5");
  const int64_t seq = 24, max_pred = 6, max_pack = 3;
  auto records = write_random(path, 37, seq, max_pred, 4, 11, max_pack);
  expect_reads_back(path, records, seq, max_pred, max_pack);
  BertBatch all;
  BertShardReader(path).read_range(0, static_cast<int64_t>(records.size()), all);
  for (int64_t i = 0; i < all.size; ++i) EXPECT_EQ(packed_row_problem(all, i), "") << "record " << i;
  EXPECT_EQ(count_bert_records(path), records.size());
}

TEST(BertHdf5, PackedWriterRejectsValuesOutOfRange) {
  TempDir dir;
  const std::string path = dir.file("packed.hdf5");
  BertShardWriter writer(path, 8, 2, {.max_pack = 2});
  const BertRecord good = two_instance_row();
  writer.append(good);
  auto with = [&](auto change) { return appending(writer, good, change); };
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

// Each dataset's chunk shape and gzip level in the file, read back through HDF5.
struct Layout {
  std::vector<hsize_t> chunk;
  unsigned gzip_level = 99;  // 99: no gzip filter
};

Layout layout_of(const std::string& path, const char* dataset) {
  Layout l;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(file, dataset, H5P_DEFAULT);
  hid_t dcpl = H5Dget_create_plist(d);
  hsize_t chunk[2] = {};
  l.chunk.assign(chunk, chunk + std::max(H5Pget_chunk(dcpl, 2, chunk), 0));
  for (int i = 0; i < H5Pget_nfilters(dcpl); ++i) {
    unsigned flags = 0, values[8] = {};
    size_t n = 8;
    if (H5Pget_filter2(dcpl, unsigned(i), &flags, &n, values, 0, nullptr, nullptr) == H5Z_FILTER_DEFLATE) l.gzip_level = values[0];
  }
  H5Pclose(dcpl), H5Dclose(d), H5Fclose(file);
  return l;
}

// Every chunk holds whole records: records_per_chunk rows by the dataset's full width. Left at 0,
// an input_ids chunk is about 256 KiB (512 records at seq_len 128); the gzip level is the one asked.
TEST(BertShardWriter, ChunksHoldWholeRecordsAtTheGzipLevelAsked) {
  TempDir dir;
  const std::string chosen = dir.file("chosen.hdf5"), fallback = dir.file("default.hdf5");
  {
    BertShardWriter writer(chosen, 16, 3, {.records_per_chunk = 7, .gzip_level = 9});
    writer.append(BertRecord{{101, 102}, {1, 1}, {0, 0}, {}, {}, 0});
    writer.commit();
  }
  BertShardWriter(fallback, 128, 20).commit();
  struct Expected {
    const std::string& path;
    const char* dataset;
    std::vector<hsize_t> chunk;
    unsigned level;
  };
  const Expected expected[] = {
      {chosen, "input_ids", {7, 16}, 9},       {chosen, "segment_ids", {7, 16}, 9},
      {chosen, "masked_lm_ids", {7, 3}, 9},    {chosen, "next_sentence_labels", {7}, 9},
      {fallback, "input_ids", {512, 128}, 1},  {fallback, "masked_lm_positions", {512, 20}, 1},
      {fallback, "next_sentence_labels", {512}, unsigned(kDefaultGzipLevel)},
  };
  for (const Expected& e : expected) {
    const Layout got = layout_of(e.path, e.dataset);
    EXPECT_EQ(got.chunk, e.chunk) << e.path << " " << e.dataset;
    EXPECT_EQ(got.gzip_level, e.level) << e.path << " " << e.dataset;
  }
}

// Calls out of order and options out of range: an Error naming the file, never a damaged shard.
TEST(BertShardWriter, MisuseIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("shard.hdf5");
  BertShardWriter writer(path, 8, 2);
  EXPECT_EQ(writer.path(), path);
  BertBatch short_arrays(2, 8, 2);
  short_arrays.input_mask.pop_back();
  expect_error([&] { writer.append(short_arrays); }, {path, "batch of 2 records has arrays of the wrong size"});
  writer.append(BertRecord{{101, 102}, {1, 1}, {0, 0}, {}, {}, 1});
  writer.commit();
  expect_error([&] { writer.commit(); }, {path, "already committed"});
  expect_error([&] { writer.append(BertBatch(1, 8, 2)); }, {path, "append after commit"});
  EXPECT_EQ(count_bert_records(path), 1u);
  expect_error([&] { BertShardWriter(dir.file("p.hdf5"), 8, -1); }, {"p.hdf5", "max_predictions -1"});
  // No masked-LM columns: refused, not a shard of [N, 0] masked-LM datasets (libhdf5 faults
  // writing their chunks).
  const std::string none = dir.file("none.hdf5");
  expect_error(
      [&] {
        BertShardWriter no_predictions(none, 8, 0);
        no_predictions.append(BertRecord{{101, 102}, {1, 1}, {0, 0}, {}, {}, 0});
        no_predictions.commit();
      },
      {none, "max_predictions 0", "[1, 2^24]", "masked-LM"});
  EXPECT_FALSE(file_exists(none));
  expect_error([&] { BertShardWriter(dir.file("c.hdf5"), 128, 20, {.records_per_chunk = int64_t{1} << 30}); },
               {"c.hdf5", "over 1 GiB"});
  expect_error([&] { BertShardWriter(dir.file("missing/dir/s.hdf5"), 8, 2); }, {"missing/dir/s.hdf5"});
}

}  // namespace
}  // namespace pretrain::bert_hdf5_writer_test
