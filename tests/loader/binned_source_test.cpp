// LDDL's binned loading (loader/binned_source.cpp through the Loader): every global batch from one
// bin and at its length, the same bin on every rank and for every micro-batch of a step, every
// sample once per epoch (or each bin's short last draw left out with drop_last), the draws weighted
// by what each bin has left, resume and a world-size change giving the same batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "bert_shards_fixture.h"
#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "loader/loader.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::binned_source_test {
namespace {

using testing::TempDir;

constexpr int64_t kPred = 10, kCls = 101, kSep = 102;  // more predictions than the shortest bin has tokens, as NVIDIA's layout keeps
const std::vector<int64_t> kLengths = {8, 16, 24};
const std::vector<int64_t> kCounts = {21, 60, 35};  // records per bin

// Record g of a bin of `length`: [CLS] (1000 + g) … [SEP], length − g % 3 tokens.
BertRecord make_record(int64_t g, int64_t length) {
  BertRecord r;
  const int64_t n = length - g % 3;
  for (int64_t j = 0; j < n; ++j) {
    r.input_ids.push_back(int32_t(j == 0 ? kCls : j == 1 ? 1000 + g : j == n - 1 ? kSep : 2000 + j));
    r.input_mask.push_back(1);
    r.segment_ids.push_back(0);
  }
  r.masked_lm_positions = {2, 3};
  r.masked_lm_ids = {r.input_ids[2], r.input_ids[3]};
  return r;
}

// A make-pretraining-shards --bin-size output in `dir`: bin i of length kLengths[i] holds
// kCounts[i] records (numbered across the bins) in two shards; the split's manifest lists them.
void write_binned(const std::string& dir) {
  testing::write_binned_bert_shards(dir, kLengths, kCounts, kPred, {{"[PAD]", 0}, {"[CLS]", kCls}, {"[SEP]", kSep}, {"[MASK]", 103}},
                                    make_record);
}

LoaderConfig config(const std::string& dir, int64_t batch = 8, int rank = 0, int world = 1) {
  LoaderConfig c;
  c.sources = {dir};
  c.kind = ModelKind::bert;
  c.batch_size = batch;
  c.rank = rank;
  c.world_size = world;
  c.seed = 7;
  c.workers = 2;
  c.prefetch = 3;
  c.shuffle_window = 16;
  return c;
}

struct Seen {
  int64_t seq_len;
  std::vector<int64_t> records;
};

// One epoch's batches: each batch's length and the records in it, after checking that every row
// belongs to the batch's bin (its tokens fit the length, and not the bin below).
std::vector<Seen> epoch(Loader& loader) {
  std::vector<Seen> out;
  while (auto b = loader.next()) {
    const int64_t s = b->input_ids.shape[1];
    EXPECT_EQ(b->input_mask.shape[1], s);
    EXPECT_TRUE(std::count(kLengths.begin(), kLengths.end(), s)) << "a batch of length " << s;
    Seen seen{s, {}};
    for (int64_t r = 0; r < b->size; ++r) {
      int64_t n = 0;
      for (int64_t j = 0; j < s; ++j) n += b->input_mask.as<int32_t>()[r * s + j];
      EXPECT_GT(n, s - 8) << "a shorter bin's record in a batch of length " << s;
      seen.records.push_back(b->input_ids.as<int32_t>()[r * s + 1] - 1000);
    }
    out.push_back(seen);
  }
  return out;
}

class BinnedLoader : public ::testing::Test {
 protected:
  void SetUp() override { write_binned(dir.path()); }
  TempDir dir;
};

TEST_F(BinnedLoader, EveryBatchIsOneBinAndEverySampleComesOnce) {
  LoaderConfig c = config(dir.path());
  c.drop_last = false;
  Loader loader(c);
  EXPECT_EQ(loader.seq_len(), 24);
  EXPECT_EQ(loader.samples_per_epoch(), 21u + 60u + 35u);
  std::multiset<int64_t> records;
  std::set<int64_t> lengths;
  const auto batches = epoch(loader);
  for (const Seen& s : batches) {
    records.insert(s.records.begin(), s.records.end());
    lengths.insert(s.seq_len);
  }
  EXPECT_EQ(records.size(), 116u);
  EXPECT_EQ(std::set<int64_t>(records.begin(), records.end()).size(), 116u) << "a sample twice";
  EXPECT_EQ(lengths, std::set<int64_t>(kLengths.begin(), kLengths.end()));
  // Records 0–20 are bin 0's, 21–80 bin 1's, the rest bin 2's.
  for (const Seen& s : batches)
    for (int64_t g : s.records) EXPECT_EQ(s.seq_len, g < 21 ? 8 : g < 81 ? 16 : 24) << "record " << g;
  EXPECT_EQ(loader.batches_per_epoch(), batches.size());
  // Bins interleave: the draws are not one bin after another.
  size_t changes = 0;
  for (size_t i = 1; i < batches.size(); ++i) changes += batches[i].seq_len != batches[i - 1].seq_len;
  EXPECT_GT(changes, 2u);
}

TEST_F(BinnedLoader, DropLastLeavesOutEachBinsShortDraw) {
  Loader loader(config(dir.path()));  // drop_last: full batches of 8 only
  const auto batches = epoch(loader);
  std::map<int64_t, size_t> per_length;
  for (const Seen& s : batches) {
    EXPECT_EQ(s.records.size(), 8u);
    per_length[s.seq_len] += s.records.size();
  }
  EXPECT_EQ(per_length, (std::map<int64_t, size_t>{{8, 16}, {16, 56}, {24, 32}}));
  EXPECT_EQ(loader.samples_per_epoch(), 16u + 56u + 32u);
}

TEST_F(BinnedLoader, RanksShareEachBatchsBinAndSplitItAsOneRankWould) {
  Loader whole(config(dir.path(), 8));
  Loader rank0(config(dir.path(), 4, 0, 2)), rank1(config(dir.path(), 4, 1, 2));
  const auto w = epoch(whole), a = epoch(rank0), b = epoch(rank1);
  ASSERT_EQ(a.size(), w.size());
  ASSERT_EQ(b.size(), w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    EXPECT_EQ(a[k].seq_len, w[k].seq_len);
    EXPECT_EQ(b[k].seq_len, w[k].seq_len);
    std::vector<int64_t> joined = a[k].records;
    joined.insert(joined.end(), b[k].records.begin(), b[k].records.end());
    EXPECT_EQ(joined, w[k].records) << "global batch " << k;
  }
}

TEST_F(BinnedLoader, AStepsMicroBatchesShareOneBin) {
  LoaderConfig c = config(dir.path(), 4);
  c.bin_batches = 2;  // a trainer's --grad-accum 2
  Loader loader(c);
  const auto batches = epoch(loader);
  ASSERT_EQ(batches.size() % 2, 0u);
  for (size_t k = 0; k < batches.size(); k += 2) EXPECT_EQ(batches[k].seq_len, batches[k + 1].seq_len) << "step " << k / 2;
}

TEST_F(BinnedLoader, ARestoredStateGivesTheUninterruptedBatches) {
  Loader reference(config(dir.path()));
  std::vector<Seen> all = epoch(reference), second = epoch(reference);
  all.insert(all.end(), second.begin(), second.end());
  Loader cut(config(dir.path()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cut.next());
  const LoaderState state = cut.state();
  Loader resumed(config(dir.path()));
  resumed.restore(state);
  std::vector<Seen> rest = epoch(resumed), next = epoch(resumed);
  rest.insert(rest.end(), next.begin(), next.end());
  ASSERT_EQ(rest.size() + 5, all.size());
  for (size_t k = 0; k < rest.size(); ++k) {
    EXPECT_EQ(rest[k].seq_len, all[k + 5].seq_len);
    EXPECT_EQ(rest[k].records, all[k + 5].records);
  }
  // Another epoch draws the bins in another order.
  std::vector<int64_t> first_lengths, second_lengths;
  for (size_t k = 0; k < second.size(); ++k) first_lengths.push_back(all[k].seq_len), second_lengths.push_back(second[k].seq_len);
  EXPECT_NE(first_lengths, second_lengths);
}

TEST_F(BinnedLoader, DrawsAreWeightedBySamplesLeft) {
  // The first draw of an epoch picks a bin with probability (its samples) / (all samples).
  BinnedSourceOptions o;
  o.bert.sets = resolve_sources(config(dir.path()));
  o.bert.seed = 3;
  o.bert.shuffle_window = 16;
  o.group = 8;
  o.drop_short = false;
  auto source = make_binned_bert_source(o);
  std::map<int64_t, int> first;
  const int epochs = 3000;
  for (int e = 0; e < epochs; ++e) ++first[source->runs(uint64_t(e)).front().seq_len];
  for (size_t i = 0; i < kLengths.size(); ++i) {
    const double p = double(kCounts[i]) / 116.0, sd = std::sqrt(p * (1 - p) / epochs);
    EXPECT_NEAR(double(first[kLengths[i]]) / epochs, p, 5 * sd) << "bin of length " << kLengths[i];
  }
}

TEST_F(BinnedLoader, RefusesAFixedLengthAndMixedSources) {
  LoaderConfig fixed = config(dir.path());
  fixed.seq_len = 24;
  EXPECT_THROW(Loader{fixed}, UsageError);
  TempDir plain;
  testing::write_bert_shards(plain.path(), {10}, 16, kPred, {}, [](int64_t g) { return make_record(g, 16); })
      .manifest.write(path_join(plain.path(), kManifestName));
  LoaderConfig mixed = config(dir.path());
  mixed.sources.push_back(plain.path());
  try {
    Loader loader(mixed);
    ADD_FAILURE() << "binned and plain sources mixed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not a length bin"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::binned_source_test
