// The BERT sample source (loader/bert_source.cpp) on its own: every record read equals what the
// format reader (BertShardReader) gives, across shard boundaries; the two-level order (shards into
// windows, records shuffled inside a window) is a permutation that covers each record once per
// epoch, seeded, and different per epoch; the background decode changes nothing; a damaged shard
// gives an error naming the file and record; bad options are refused.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/bert_hdf5.h"
#include "bert_shards_fixture.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::bert_source_test {
namespace {

using testing::TempDir;

constexpr int64_t kSeq = 16, kPred = 3, kVocab = 30522;

// Record g: random words, a random length, static masks; input_ids[1] = 1000 + g says which it is.
BertRecord make_record(int64_t g) {
  std::mt19937 gen(uint32_t(g) * 2654435761u + 1);
  BertRecord r;
  const int64_t n = 6 + int64_t(gen() % uint32_t(kSeq - 5));
  for (int64_t j = 0; j < n; ++j) {
    int32_t id = j == 0 ? 101 : j == 1 ? int32_t(1000 + g) : int32_t(2000 + gen() % 20000);
    if (j == n - 1) id = 102;
    r.input_ids.push_back(id);
    r.input_mask.push_back(1);
    r.segment_ids.push_back(j >= n / 2);
  }
  const int32_t masks = int32_t(gen() % uint32_t(kPred + 1));
  for (int32_t k = 0; k < masks; ++k) {
    r.masked_lm_positions.push_back(2 + k);
    r.masked_lm_ids.push_back(int32_t(3000 + gen() % 1000));
  }
  r.next_sentence_label = int32_t(gen() % 2);
  return r;
}

// Shards of `sizes` records (numbered across them) in chunks of 8 records, and a manifest.
ShardSet write_shards(const std::string& dir, const std::vector<int64_t>& sizes, bool manifest = true) {
  auto written = testing::write_bert_shards(dir, sizes, kSeq, kPred, {{"[CLS]", 101}, {"[SEP]", 102}}, make_record);
  ShardSet set;
  set.origin = dir;
  set.format = kFormatBertHdf5;
  set.files = written.files;
  if (manifest) set.manifest = written.manifest;
  return set;
}

// Every record of the files, as the format reader reads them, in concatenation order.
std::vector<BertRecord> reference(const ShardSet& set) {
  std::vector<BertRecord> all;
  for (const auto& f : set.files) {
    BertShardReader reader(f, BertReadPath::hyperslab);
    for (int64_t i = 0; i < reader.size(); ++i) all.push_back(reader.read(i));
  }
  return all;
}

// One BERT row of a host slot, widened back to a BertRecord (padding trimmed as the writer pads).
struct Slot {
  explicit Slot(int64_t predictions = kPred)
      : layout(SlotLayout::make(ModelKind::bert, 1, kSeq, predictions, kVocab, false)), bytes(layout.bytes) {}
  HostRows rows() { return HostRows(layout, bytes.data()); }
  BertRecord record() const {
    BertRecord r;
    const auto* ids = reinterpret_cast<const int32_t*>(bytes.data() + layout.input_ids);
    const uint8_t* mask = bytes.data() + layout.input_mask;
    const uint8_t* seg = bytes.data() + layout.segment_ids;
    for (int64_t j = 0; j < kSeq; ++j)
      r.input_ids.push_back(ids[j]), r.input_mask.push_back(mask[j]), r.segment_ids.push_back(seg[j]);
    const auto* pos = reinterpret_cast<const uint16_t*>(bytes.data() + layout.masked_lm_positions);
    const auto* lab = reinterpret_cast<const int32_t*>(bytes.data() + layout.masked_lm_ids);
    for (int64_t k = 0; k < layout.max_predictions; ++k) r.masked_lm_positions.push_back(pos[k]), r.masked_lm_ids.push_back(lab[k]);
    r.next_sentence_label = bytes[layout.next_sentence_labels];
    return r;
  }
  SlotLayout layout;
  std::vector<uint8_t> bytes;
};

// `r` padded as a shard stores it.
BertRecord padded(BertRecord r, int64_t predictions = kPred) {
  r.input_ids.resize(kSeq), r.input_mask.resize(kSeq), r.segment_ids.resize(kSeq);
  r.masked_lm_positions.resize(size_t(predictions)), r.masked_lm_ids.resize(size_t(predictions));
  return r;
}

void expect_same(const BertRecord& got, const BertRecord& want, const std::string& what) {
  EXPECT_EQ(got.input_ids, want.input_ids) << what;
  EXPECT_EQ(got.input_mask, want.input_mask) << what;
  EXPECT_EQ(got.segment_ids, want.segment_ids) << what;
  EXPECT_EQ(got.masked_lm_positions, want.masked_lm_positions) << what;
  EXPECT_EQ(got.masked_lm_ids, want.masked_lm_ids) << what;
  EXPECT_EQ(got.next_sentence_label, want.next_sentence_label) << what;
}

BertRecord read_sample(const SampleSource& source, uint64_t epoch, uint64_t position, int64_t predictions = kPred) {
  Slot slot(predictions);
  source.read(epoch, position, slot.rows(), 0);
  return slot.record();
}

const std::vector<int64_t> kSizes = {37, 50, 13, 29, 1};
constexpr int64_t kTotal = 37 + 50 + 13 + 29 + 1;

TEST(BertSource, UnshuffledRecordsAreTheFormatReadersAcrossShardBoundaries) {
  TempDir dir;
  for (bool with_manifest : {true, false}) {
    const ShardSet set = write_shards(dir.path(), kSizes, with_manifest);
    const auto want = reference(set);
    ASSERT_EQ(int64_t(want.size()), kTotal);
    BertSourceOptions o;
    o.sets = {set};
    o.shuffle = false;
    o.shuffle_window = 20;  // windows of whole shards: 37 | 50 | 13+29 | 1
    auto source = make_bert_source(o);
    ASSERT_EQ(source->samples_per_epoch(), uint64_t(kTotal));
    EXPECT_EQ(source->seq_len(), kSeq);
    EXPECT_EQ(source->max_predictions(), kPred);
    EXPECT_EQ(source->vocab_size(), with_manifest ? kVocab : 0);
    for (uint64_t epoch : {0, 1})
      for (int64_t p = 0; p < kTotal; ++p) {
        expect_same(read_sample(*source, epoch, uint64_t(p)), padded(want[size_t(p)]), "position " + std::to_string(p));
        EXPECT_EQ(source->sample_id(epoch, uint64_t(p)), uint64_t(p));
      }
    // A slot with room for more predictions (dynamic masking's) gets the stored ones, 0-padded.
    expect_same(read_sample(*source, 0, 40, 6), padded(want[40], 6), "wider slot");
  }
}

TEST(BertSource, TheShuffledOrderIsAPermutationOfWholeWindows) {
  TempDir dir;
  const ShardSet set = write_shards(dir.path(), kSizes);
  const auto want = reference(set);
  std::vector<int64_t> shard_of;
  for (size_t s = 0; s < kSizes.size(); ++s) shard_of.insert(shard_of.end(), size_t(kSizes[s]), int64_t(s));
  for (int64_t window : {1, 40, 1000}) {
    BertSourceOptions o;
    o.sets = {set};
    o.seed = 7;
    o.shuffle_window = window;
    auto source = make_bert_source(o);
    std::vector<std::vector<uint64_t>> orders;
    for (uint64_t epoch : {0, 1, 2}) {
      std::vector<uint64_t> ids;
      for (uint64_t p = 0; p < uint64_t(kTotal); ++p) {
        const uint64_t id = source->sample_id(epoch, p);
        ASSERT_LT(id, uint64_t(kTotal));
        ids.push_back(id);
        // The record at a position is the one its id names, every field.
        const BertRecord got = read_sample(*source, epoch, p);
        ASSERT_EQ(got.input_ids[1], 1000 + int32_t(id));
        expect_same(got, padded(want[id]), "window " + std::to_string(window) + " position " + std::to_string(p));
      }
      std::vector<uint64_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      std::vector<uint64_t> all(static_cast<size_t>(kTotal));
      std::iota(all.begin(), all.end(), 0u);
      EXPECT_EQ(sorted, all) << "each record once per epoch (window " << window << ")";
      if (window == 1) {
        // Every window is one shard: a shard's records fill one contiguous run of positions.
        std::vector<int64_t> runs;
        for (uint64_t id : ids)
          if (runs.empty() || runs.back() != shard_of[id]) runs.push_back(shard_of[id]);
        EXPECT_EQ(runs.size(), kSizes.size()) << "a shard split over windows";
      }
      orders.push_back(ids);
    }
    EXPECT_NE(orders[0], orders[1]) << "window " << window;
    EXPECT_NE(orders[1], orders[2]) << "window " << window;
    if (window >= 1000) {
      // One window holds all: records from every shard are interleaved in the first 20 positions.
      std::set<int64_t> shards;
      for (size_t p = 0; p < 20; ++p) shards.insert(shard_of[orders[0][p]]);
      EXPECT_GE(shards.size(), 3u);
    }
    // The same seed gives the same order in another source; another seed another order.
    auto again = make_bert_source(o);
    o.seed = 8;
    auto other = make_bert_source(o);
    std::vector<uint64_t> same, different;
    for (uint64_t p = 0; p < uint64_t(kTotal); ++p)
      same.push_back(again->sample_id(1, p)), different.push_back(other->sample_id(1, p));
    EXPECT_EQ(same, orders[1]);
    EXPECT_NE(different, orders[1]);
  }
}

TEST(BertSource, BackgroundDecodeAndConcurrentReadsGiveTheSameSamples) {
  TempDir dir;
  const ShardSet set = write_shards(dir.path(), kSizes);
  BertSourceOptions o;
  o.sets = {set};
  o.seed = 3;
  o.shuffle_window = 30;
  auto plain = make_bert_source(o);
  std::vector<std::thread> threads;
  std::mutex mutex;
  o.background = [&](std::function<void()> task) {
    std::lock_guard lock(mutex);
    threads.emplace_back(std::move(task));
  };
  {
    auto ahead = make_bert_source(o);
    for (uint64_t epoch : {0, 1}) {
      for (uint64_t p = 0; p < uint64_t(kTotal); ++p) {
        ahead->will_read(epoch, p);  // as the planner calls it: decodes the next window in the background
        expect_same(read_sample(*ahead, epoch, p), read_sample(*plain, epoch, p), "position " + std::to_string(p));
      }
    }
    // Reads of one epoch from many threads at once, in no order.
    std::vector<int32_t> first(static_cast<size_t>(kTotal));
    tbb::parallel_for(int64_t(0), kTotal, [&](int64_t p) { first[size_t(p)] = read_sample(*ahead, 2, uint64_t(kTotal - 1 - p)).input_ids[1]; });
    for (int64_t p = 0; p < kTotal; ++p)
      EXPECT_EQ(first[size_t(p)], 1000 + int32_t(plain->sample_id(2, uint64_t(kTotal - 1 - p))));
  }  // the source waits for its background tasks
  EXPECT_FALSE(threads.empty()) << "will_read started no background decode";
  for (auto& t : threads) t.join();
}

// The file offset of a chunk of `dataset` (the one holding `record`) and its stored size.
std::pair<haddr_t, hsize_t> chunk_of(const std::string& path, const char* dataset, hsize_t record) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t set = H5Dopen2(file, dataset, H5P_DEFAULT);
  hsize_t offset[2] = {record, 0};
  unsigned filters = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  const herr_t rc = H5Dget_chunk_info_by_coord(set, offset, &filters, &addr, &size);
  H5Dclose(set);
  H5Fclose(file);
  EXPECT_GE(rc, 0);
  return {addr, size};
}

TEST(BertSource, ADamagedShardGivesAnErrorNamingTheFileAndRecord) {
  TempDir dir;
  const ShardSet set = write_shards(dir.path(), kSizes);
  const std::string damaged = set.files[1];
  // Overwrite the middle of shard 1's input_ids chunk holding records 16–23 (gzip data).
  const auto [addr, size] = chunk_of(damaged, "input_ids", 16);
  ASSERT_GT(size, 16u);
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(addr + size / 4));
    const std::string junk(size_t(size / 2), '\x5a');
    f.write(junk.data(), std::streamsize(junk.size()));
  }
  BertSourceOptions o;
  o.sets = {set};
  o.shuffle = false;
  o.shuffle_window = 1;
  auto source = make_bert_source(o);
  // Shard 0 is intact and reads.
  EXPECT_EQ(read_sample(*source, 0, 0).input_ids[1], 1000);
  try {
    read_sample(*source, 0, uint64_t(37 + 20));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(damaged), std::string::npos) << what;
    EXPECT_NE(what.find("record 16"), std::string::npos) << what;
    EXPECT_NE(what.find("input_ids"), std::string::npos) << what;
  }

  // A value the slot cannot hold (an id past the vocabulary) names the file and the record.
  TempDir other;
  ShardSet bad = write_shards(other.path(), {10, 10});
  {
    BertShardWriter w(bad.files[1], kSeq, kPred);
    for (int64_t g = 10; g < 20; ++g) {
      BertRecord r = make_record(g);
      if (g == 16) r.input_ids[4] = int32_t(kVocab + 5);
      w.append(r);
    }
    w.commit();
  }
  bad.manifest->shards[1] = Manifest::describe(other.path(), "shard-1.hdf5", 10);
  o.sets = {bad};
  source = make_bert_source(o);
  try {
    read_sample(*source, 0, 16);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad.files[1] + ": record 6"), std::string::npos) << e.what();
  }

  // A shard holding fewer records than its manifest says: the file is named when it is decoded.
  bad.manifest->shards[0].records = 11;
  o.sets = {bad};
  source = make_bert_source(o);
  try {
    read_sample(*source, 0, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(bad.files[0]), std::string::npos) << what;
    EXPECT_NE(what.find("holds 10 records, but its manifest says 11"), std::string::npos) << what;
  }
}

TEST(BertSource, BadOptionsAreRefused) {
  TempDir dir;
  const ShardSet set = write_shards(dir.path(), {5, 5});
  BertSourceOptions o;
  o.sets = {set};
  o.shuffle_window = 0;
  EXPECT_THROW(make_bert_source(o), UsageError);
  o.shuffle_window = 10;
  o.seq_len = kSeq * 2;
  try {
    make_bert_source(o);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not the 32 asked for"), std::string::npos) << e.what();
  }
  o.seq_len = 0;
  ShardSet gpt = set;
  gpt.format = kFormatMegatron;
  o.sets = {gpt};
  EXPECT_THROW(make_bert_source(o), UsageError);
  // A shard of another seq_len among the others.
  TempDir other;
  {
    BertShardWriter w(other.file("long.hdf5"), kSeq * 2, kPred);
    w.append(make_record(0));
    w.commit();
  }
  ShardSet mixed = set;
  mixed.manifest.reset();
  mixed.files.push_back(other.file("long.hdf5"));
  o.sets = {mixed};
  try {
    make_bert_source(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(other.file("long.hdf5")), std::string::npos) << what;
    EXPECT_NE(what.find("differ from the first shard's"), std::string::npos) << what;
  }
  // No records at all.
  {
    BertShardWriter w(other.file("empty.hdf5"), kSeq, kPred);
    w.commit();
  }
  ShardSet empty;
  empty.origin = other.file("empty.hdf5");
  empty.format = kFormatBertHdf5;
  empty.files = {other.file("empty.hdf5")};
  o.sets = {empty};
  EXPECT_THROW(make_bert_source(o), Error);
}

}  // namespace
}  // namespace pretrain::bert_source_test
