// Megatron's GPT indices: numpy's legacy RandomState and shuffle against values numpy printed,
// the sample index on hand-checked cases and against a flat reading of the documents, and the
// blending indices against Megatron's own helpers (megatron-core 0.16.1 helpers_cpp).
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

std::vector<uint32_t> draws(uint32_t seed, int n) {
  NumpyRandomState rng(seed);
  std::vector<uint32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng.next_uint32());
  return out;
}

template <typename T>
std::vector<T> shuffled_arange(uint32_t seed, size_t n) {
  std::vector<T> x(n);
  std::iota(x.begin(), x.end(), T(0));
  NumpyRandomState rng(seed);
  rng.shuffle(std::span<T>(x));
  return x;
}

TEST(NumpyRandomState, RawOutputsMatchNumpy) {
  // [list(np.random.RandomState(s).randint(0, 2**32, size=4, dtype=np.uint32)) for s in (...)]
  EXPECT_EQ(draws(0, 4), (std::vector<uint32_t>{2357136044u, 2546248239u, 3071714933u, 3626093760u}));
  EXPECT_EQ(draws(7, 4), (std::vector<uint32_t>{327741615u, 976413892u, 3349725721u, 1369975286u}));
  EXPECT_EQ(draws(1234, 4), (std::vector<uint32_t>{822569775u, 2137449171u, 2671936806u, 3512589365u}));
  EXPECT_EQ(draws(5489, 4), (std::vector<uint32_t>{3499211612u, 581869302u, 3890346734u, 3586334585u}));
  EXPECT_EQ(draws(4294967295u, 4), (std::vector<uint32_t>{419326371u, 479346978u, 3918654476u, 2416749639u}));
}

TEST(NumpyRandomState, WideIntervalTakesTwoWordsHighFirst) {
  // list(np.random.RandomState(s).randint(0, 2**40, size=3, dtype=np.int64)): the legacy masked
  // path draws next_uint64 & (2^40 - 1), as random_interval does for max >= 2^32.
  for (auto [seed, expected] : {std::pair<uint32_t, std::vector<uint64_t>>{7, {752595690692ULL, 108744157686ULL, 291964244179ULL}},
                                {1234, {204000912083ULL, 166721346613ULL, 878802328948ULL}}}) {
    NumpyRandomState rng(seed);
    std::vector<uint64_t> got;
    for (int i = 0; i < 3; ++i) got.push_back(rng.random_interval((uint64_t(1) << 40) - 1));
    EXPECT_EQ(got, expected) << "seed " << seed;
  }
}

TEST(NumpyRandomState, ShuffleMatchesNumpy) {
  // a = np.arange(n, dtype=np.int32); np.random.RandomState(s).shuffle(a)
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 1), (std::vector<int32_t>{0}));
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 5), (std::vector<int32_t>{4, 0, 1, 2, 3}));
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 10), (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(shuffled_arange<int32_t>(7, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(shuffled_arange<int32_t>(7, 5), (std::vector<int32_t>{0, 3, 2, 1, 4}));
  EXPECT_EQ(shuffled_arange<int32_t>(7, 10), (std::vector<int32_t>{8, 5, 0, 2, 1, 9, 7, 3, 6, 4}));
  // a = np.arange(100000, dtype=np.uint32); RandomState(s).shuffle(a);
  // list(a[:6]), int((a.astype(np.int64) * np.arange(100000)).sum())
  for (auto [seed, head, dot] : {std::tuple<uint32_t, std::vector<uint32_t>, int64_t>{
                                     1234, {13504, 72599, 42217, 97650, 99120, 13165}, 249809377481287},
                                 {7, {33909, 92307, 89107, 9538, 31008, 71305}, 250316905599413}}) {
    const auto a = shuffled_arange<uint32_t>(seed, 100000);
    EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.begin() + 6), head);
    int64_t sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += int64_t(a[i]) * int64_t(i);
    EXPECT_EQ(sum, dot) << "seed " << seed;
  }
}

TEST(NumpyRandomState, ShufflesContinueOneStream) {
  // r = np.random.RandomState(1234); a = np.arange(10, dtype=np.int32); r.shuffle(a);
  // b = np.arange(6, dtype=np.uint32); r.shuffle(b)  →  b = [5, 0, 3, 4, 2, 1]
  NumpyRandomState rng(1234);
  std::vector<int32_t> a(10);
  std::iota(a.begin(), a.end(), 0);
  rng.shuffle(std::span<int32_t>(a));
  std::vector<uint32_t> b(6);
  std::iota(b.begin(), b.end(), 0u);
  rng.shuffle(std::span<uint32_t>(b));
  EXPECT_EQ(a, (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(b, (std::vector<uint32_t>{5, 0, 3, 4, 2, 1}));
}

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
