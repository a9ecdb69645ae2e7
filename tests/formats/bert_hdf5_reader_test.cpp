// BertShardReader (formats/bert_hdf5_reader.cpp) on files our writer did not make: other integer
// widths, layouts and chunk shapes written through HDF5 as h5py would, a user block, chunks never
// written, packed datasets all or none; what is missing, inconsistent, truncated or damaged named
// with the file (and record); ranges outside the shard; NVIDIA's own files against their instance
// dumps. Round trips of our own shards are in bert_hdf5_writer_test.cpp, the checks made before
// libhdf5 sees a file in hdf5_guards_test.cpp.
#include "formats/bert_hdf5.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "bert_hdf5_fixture.h"
#include "bert_record_expect.h"
#include "common/error.h"
#include "common/file.h"
#include "test_util.h"

namespace pretrain::bert_hdf5_reader_test {
namespace {

using bert_hdf5_fixture::damaged_copy;
using bert_hdf5_fixture::expect_error;
using bert_hdf5_fixture::expect_read_error;
using bert_hdf5_fixture::files_with_chunk_rows;
using bert_hdf5_fixture::foreign_layout;
using bert_hdf5_fixture::raw_layout;
using bert_hdf5_fixture::write_foreign;
using bert_hdf5_fixture::write_random;
using testing::TempDir;

bool same_batch(const BertBatch& a, const BertBatch& b) {
  return a.size == b.size && a.input_ids == b.input_ids && a.input_mask == b.input_mask &&
         a.segment_ids == b.segment_ids && a.masked_lm_positions == b.masked_lm_positions &&
         a.masked_lm_ids == b.masked_lm_ids && a.next_sentence_labels == b.next_sentence_labels;
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

// A file in our own types and layout that another program wrote, after a 512-byte user block:
// read through raw chunks (whose addresses count from the superblock) as the hyperslab path reads it.
TEST(BertShardReader, RawChunksAfterAUserBlockReadAsHdf5ReadsThem) {
  TempDir dir;
  const std::string path = dir.file("userblock.hdf5");
  write_foreign(path, raw_layout(10, 6, 3), 512);
  BertShardReader raw(path), slab(path, BertReadPath::hyperslab);
  EXPECT_TRUE(raw.raw_chunk_path());
  EXPECT_FALSE(slab.raw_chunk_path());
  ASSERT_EQ(raw.size(), 10);
  BertBatch a, b;
  raw.read_range(0, 10, a);
  slab.read_range(0, 10, b);
  EXPECT_TRUE(same_batch(a, b));
  for (int64_t i = 0; i < 60; ++i) EXPECT_EQ(a.input_ids[size_t(i)], i % 30000) << i;
  for (int64_t i = 0; i < 30; ++i) EXPECT_EQ(a.masked_lm_ids[size_t(i)], i % 999 + 5) << i;
  EXPECT_EQ(a.next_sentence_labels[7], 1);
}

// A chunked dataset whose chunks were never written holds HDF5's fill value (0) on both paths.
TEST(BertShardReader, ChunksNeverWrittenReadAsZeros) {
  TempDir dir;
  for (auto sets : {foreign_layout(7, 6, 3), raw_layout(7, 6, 3)}) {
    const std::string path = dir.file("unwritten.hdf5");
    sets[1].values.clear();  // input_mask
    sets[3].values.clear();  // masked_lm_positions (0 is padding, so in range)
    write_foreign(path, sets);
    for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab}) {
      BertBatch batch;
      BertShardReader(path, read_path).read_range(0, 7, batch);
      EXPECT_EQ(batch.input_mask, std::vector<int8_t>(42, 0));
      EXPECT_EQ(batch.masked_lm_positions, std::vector<int32_t>(21, 0));
      EXPECT_EQ(batch.input_ids[41], 41);  // the written datasets read as written
    }
  }
}

// Records outside [0, size()) are an Error naming the file and the range or record; a moved
// reader reads as the original did.
TEST(BertShardReader, RangesOutsideTheShardAreErrorsNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("shard.hdf5");
  const auto records = write_random(path, 12, 8, 2, 5);
  BertShardReader reader(path);
  EXPECT_EQ(reader.path(), path);
  BertBatch batch;
  expect_error([&] { reader.read_range(10, 3, batch); }, {path, "records [10, 10+3) outside [0, 12)"});
  expect_error([&] { reader.read_range(-1, 1, batch); }, {path, "records [-1, -1+1) outside [0, 12)"});
  expect_error([&] { reader.read_range(0, -1, batch); }, {path, "outside [0, 12)"});
  expect_error([&] { reader.read(12); }, {path, "record 12", "record index outside [0, 12)"});
  expect_error([&] { reader.read(-1); }, {path, "outside [0, 12)"});
  reader.read_range(12, 0, batch);  // an empty range at the end is no error
  EXPECT_EQ(batch.size, 0);
  BertShardReader moved(std::move(reader));
  testing::expect_same_record(moved.read(11), records[11], 11);
  BertShardReader assigned(path, BertReadPath::hyperslab);
  assigned = std::move(moved);
  EXPECT_TRUE(assigned.raw_chunk_path());
  testing::expect_same_record(assigned.read(3), records[3], 3);
}

// read_only: only the datasets named are read (on both paths; the others stay as resize() leaves
// them), a packed one named for an unpacked shard is ignored, and an unknown name is refused.
TEST(BertShardReader, ReadOnlyFillsTheDatasetsNamed) {
  TempDir dir;
  const std::string plain = dir.file("plain.hdf5"), packed = dir.file("packed.hdf5");
  const auto records = write_random(plain, 9, 8, 2, 4);
  const auto rows = write_random(packed, 9, 8, 2, 4, 3, /*max_pack=*/2);
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab}) {
    BertShardReader reader(plain, read_path);
    const std::string_view wanted[] = {"input_mask", "sequence_ids"};
    reader.read_only(wanted);
    BertBatch batch;
    reader.read_range(0, 9, batch);
    for (int64_t i = 0; i < 9; ++i)
      EXPECT_EQ(batch.record(i).input_mask, records[size_t(i)].input_mask) << i;
    EXPECT_EQ(batch.input_ids, std::vector<int32_t>(72, 0));
    EXPECT_EQ(batch.masked_lm_positions, std::vector<int32_t>(18, 0));
    BertShardReader packed_reader(packed, read_path);
    const std::string_view sequence[] = {"sequence_ids"};
    packed_reader.read_only(sequence);
    packed_reader.read_range(0, 9, batch);
    for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(batch.record(i).sequence_ids, rows[size_t(i)].sequence_ids) << i;
    EXPECT_EQ(batch.packed_next_sentence_labels, std::vector<int8_t>(18, -1));
  }
  BertShardReader reader(plain);
  const std::string_view unknown[] = {"input_ids", "attention_mask"};
  expect_error([&] { reader.read_only(unknown); }, {"attention_mask"});
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

}  // namespace
}  // namespace pretrain::bert_hdf5_reader_test
