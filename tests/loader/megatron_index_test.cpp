// Megatron's GPT indices: the sample index on hand-checked cases and against a flat reading of the
// documents, the epoch index, and the blending indices against Megatron's own helpers
// (megatron-core 0.16.1 helpers_cpp). The numpy RandomState they draw from is numpy_random_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"
#include "loader/megatron_index.h"
#include "loader/numpy_random.h"

namespace pretrain {
// Beside SamplePoint, where GoogleTest's printer finds it.
void PrintTo(const SamplePoint& p, std::ostream* out) { *out << "(" << p.document << ", " << p.offset << ")"; }
}  // namespace pretrain

namespace pretrain::megatron_index_test {
namespace {

std::vector<SamplePoint> points(std::vector<int32_t> sizes, int64_t seq_len, bool extra) {
  std::vector<int32_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  const int64_t tokens = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  return build_sample_index(sizes, order, seq_len, tokens, extra);
}

TEST(SampleIndex, HandCheckedCases) {
  // Documents of 3, 5, 2 tokens, seq_len 4 + 1: samples = (10 - 1) / 4 = 2; sample 0 is flat
  // tokens 0…4 (ends at document 1, offset 1, where sample 1 begins), sample 1 is 4…8.
  EXPECT_EQ(points({3, 5, 2}, 4, true), (std::vector<SamplePoint>{{0, 0}, {1, 1}, {2, 0}}));
  // Documents of exactly seq_len: with the extra token a sample reaches one token into the next.
  EXPECT_EQ(points({4, 4}, 4, true), (std::vector<SamplePoint>{{0, 0}, {1, 0}}));
  // Without it, samples end at document ends (offset = the document's length).
  EXPECT_EQ(points({4, 4}, 4, false), (std::vector<SamplePoint>{{0, 0}, {0, 4}, {1, 4}}));
  // Documents shorter than seq_len, one of them empty: 10 tokens, (10 - 1) / 3 = 3 samples.
  EXPECT_EQ(points({1, 0, 2, 1, 6}, 3, true), (std::vector<SamplePoint>{{0, 0}, {3, 0}, {4, 2}, {4, 5}}));
  // One long document: (9 - 1) / 4 = 2 samples, the second ending on the last token.
  EXPECT_EQ(points({9}, 4, true), (std::vector<SamplePoint>{{0, 0}, {0, 4}, {0, 8}}));
  EXPECT_EQ(points({8}, 4, true), (std::vector<SamplePoint>{{0, 0}, {0, 4}}));
  EXPECT_EQ(points({9}, 2, true), (std::vector<SamplePoint>{{0, 0}, {0, 2}, {0, 4}, {0, 6}, {0, 8}}));
}

TEST(SampleIndex, TooFewTokens) {
  EXPECT_EQ(gpt_samples_per_epoch(4, 4, true), 0);
  EXPECT_EQ(gpt_samples_per_epoch(5, 4, true), 1);
  EXPECT_EQ(gpt_samples_per_epoch(4, 4, false), 1);
  EXPECT_THROW(points({2, 2}, 4, true), Error);
  // Sizes that disagree with the token count are caught, not read past.
  std::vector<int32_t> sizes{3, 3}, order{0, 1};
  EXPECT_THROW(build_sample_index(sizes, order, 4, 20, true), Error);
}

// Property: in document_index order, sample i covers flat tokens [i·S, i·S + S + extra).
TEST(SampleIndex, SamplesTileTheShuffledDocuments) {
  std::mt19937 gen(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> sizes(1 + gen() % 40);
    for (auto& s : sizes) s = int32_t(gen() % 4 == 0 ? 0 : gen() % 50);
    const int64_t tokens = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    const int64_t seq_len = 1 + gen() % 20;
    const bool extra = gen() % 2;
    if (gpt_samples_per_epoch(tokens, seq_len, extra) == 0) continue;
    NumpyRandomState rng{uint32_t(trial)};
    const auto order = build_document_index(int64_t(sizes.size()), &rng);
    const auto index = build_sample_index(sizes, order, seq_len, tokens, extra);
    ASSERT_EQ(int64_t(index.size()) - 1, gpt_samples_per_epoch(tokens, seq_len, extra));
    // Flat position of each (document position, offset).
    std::vector<int64_t> start(order.size() + 1, 0);
    for (size_t d = 0; d < order.size(); ++d) start[d + 1] = start[d] + sizes[size_t(order[d])];
    for (size_t i = 0; i < index.size(); ++i) {
      const int64_t flat = start[size_t(index[i].document)] + index[i].offset;
      const int64_t want = int64_t(i) * seq_len;
      EXPECT_EQ(flat, want) << "trial " << trial << " point " << i;
      EXPECT_LE(index[i].offset, sizes[size_t(order[size_t(index[i].document)])]);
    }
  }
}

TEST(EpochIndex, EverySampleOnceAndSeedDecidesTheOrder) {
  std::vector<int32_t> sizes(1000);
  std::mt19937 gen(1);
  for (auto& s : sizes) s = int32_t(gen() % 300);
  const auto a = build_gpt_epoch_index(sizes, 64, true, 1234, true);
  const auto b = build_gpt_epoch_index(sizes, 64, true, 1234, true);
  const auto c = build_gpt_epoch_index(sizes, 64, true, 1235, true);
  EXPECT_EQ(a.shuffle_index, b.shuffle_index);
  EXPECT_EQ(a.document_index, b.document_index);
  EXPECT_NE(a.shuffle_index, c.shuffle_index);
  EXPECT_NE(a.document_index, c.document_index);
  std::vector<uint32_t> sorted = a.shuffle_index;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  std::vector<int32_t> docs = a.document_index;
  std::sort(docs.begin(), docs.end());
  for (size_t i = 0; i < docs.size(); ++i) ASSERT_EQ(docs[i], int32_t(i));
  // Document order, then shuffle order, from one RandomState: the shuffle index continues the
  // stream after the documents' shuffle.
  NumpyRandomState rng(1234);
  EXPECT_EQ(a.document_index, build_document_index(1000, &rng));
  EXPECT_EQ(a.shuffle_index, build_shuffle_index(a.samples(), &rng));
  // No shuffle: the identity.
  const auto plain = build_gpt_epoch_index(sizes, 64, true, 1234, false);
  for (size_t i = 0; i < plain.shuffle_index.size(); ++i) ASSERT_EQ(plain.shuffle_index[i], i);
  for (size_t i = 0; i < plain.document_index.size(); ++i) ASSERT_EQ(plain.document_index[i], int32_t(i));
}

TEST(Blending, NumpySumIsPairwise) {
  // np.sum(np.array([0.1, 0.2, 0.3])) == 0.6000000000000001 (left to right below 8 values)
  const std::vector<double> three{0.1, 0.2, 0.3};
  EXPECT_EQ(numpy_sum(three), 0.6000000000000001);
  // From 8 values on numpy keeps eight running sums: by hand for 9 values.
  std::vector<double> nine{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  const double by_hand = ((0.1 + 0.2) + (0.3 + 0.4)) + ((0.5 + 0.6) + (0.7 + 0.8)) + 0.9;
  EXPECT_EQ(numpy_sum(nine), by_hand);
}

struct BlendCase {
  std::vector<double> weights;
  int64_t size;
  std::vector<double> normalised;
  std::vector<int16_t> dataset;
  std::vector<int64_t> sample;
};

TEST(Blending, MatchesMegatronHelpers) {
  // nw = normalize(normalize(w)); helpers_cpp.build_blending_indices(di, dsi, np.array(nw),
  // len(w), size, False) with megatron-core 0.16.1 (normalize from megatron.core.datasets.utils).
  const std::vector<BlendCase> cases{
      {{0.3, 0.7}, 10, {0.3, 0.7}, {1, 0, 1, 1, 0, 1, 1, 0, 1, 1}, {0, 0, 1, 2, 1, 3, 4, 2, 5, 6}},
      {{1, 2, 3}, 12, {0.16666666666666666, 0.3333333333333333, 0.5},
       {2, 1, 0, 2, 1, 2, 0, 2, 1, 2, 1, 2}, {0, 0, 0, 1, 1, 2, 1, 3, 2, 4, 3, 5}},
      {{0.1, 0.2, 0.3}, 9, {0.16666666666666669, 0.33333333333333337, 0.49999999999999994},
       {2, 1, 0, 2, 1, 2, 0, 2, 1}, {0, 0, 0, 1, 1, 2, 1, 3, 2}},
      {{5, 0, 1}, 7, {0.8333333333333334, 0.0, 0.16666666666666666}, {0, 2, 0, 0, 0, 0, 0},
       {0, 0, 1, 2, 3, 4, 5}},
  };
  for (const BlendCase& c : cases) {
    const auto w = megatron_normalize(megatron_normalize(c.weights));
    EXPECT_EQ(w, c.normalised);
    const auto blend = build_blending_indices(w, c.size);
    EXPECT_EQ(blend.dataset, c.dataset);
    EXPECT_EQ(blend.sample, c.sample);
    std::vector<int64_t> counts(c.weights.size(), 0);
    for (int16_t d : c.dataset) ++counts[size_t(d)];
    EXPECT_EQ(blend.counts, counts);
  }
  EXPECT_THROW(build_blending_indices(std::vector<double>{}, 3), UsageError);
}

}  // namespace
}  // namespace pretrain::megatron_index_test
