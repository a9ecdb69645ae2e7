// MinHash: the vectorised signature equals the definition (one function at a time) for any number of
// functions and shingles; the estimate from the signatures tracks the true Jaccard similarity within
// the estimator's spread; band keys and LSH probabilities; option checks.
#include "datagen/dedup/minhash.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"

namespace pretrain::minhash_test {
namespace {

MinhashOptions options(int bands, int rows, uint64_t seed = 1) {
  MinhashOptions o;
  o.bands = bands;
  o.rows = rows;
  o.seed = seed;
  return o;
}

TEST(Minhash, FastSignatureEqualsTheDefinition) {
  std::mt19937_64 rng(7);
  for (auto [bands, rows] : {std::pair{14, 8}, {1, 1}, {3, 5}, {20, 20}, {33, 9}}) {
    MinhashFunctions f(options(bands, rows, rng()));
    for (size_t n : {1u, 2u, 7u, 100u, 3001u}) {
      std::vector<uint64_t> shingles(n);
      for (auto& x : shingles) x = rng();
      std::vector<uint32_t> fast(f.size()), reference(f.size());
      f.signature(shingles, fast.data());
      f.signature_reference(shingles, reference.data());
      EXPECT_EQ(fast, reference) << bands << "x" << rows << " n=" << n << " kernel " << MinhashFunctions::kernel_name();
    }
  }
}

TEST(Minhash, SameSeedSameFunctionsOtherSeedOthers) {
  MinhashFunctions a(options(14, 8, 1)), b(options(14, 8, 1)), c(options(14, 8, 2));
  EXPECT_EQ(a.a(5), b.a(5));
  EXPECT_EQ(a.b(111), b.b(111));
  EXPECT_NE(a.a(5), c.a(5));
  for (int i = 0; i < a.size(); ++i) EXPECT_EQ(a.a(i) & 1, 1u);  // odd multipliers
}

// Two sets sharing `common` of `total` distinct elements: Jaccard common / total.
double mean_abs_error(double jaccard, int trials, const MinhashFunctions& f, std::mt19937_64& rng) {
  const int total = 400, common = static_cast<int>(jaccard * total);
  double error = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<uint64_t> a, b;
    for (int i = 0; i < total; ++i) {
      uint64_t x = rng();
      if (i < common) a.push_back(x), b.push_back(x);
      else if (i % 2) a.push_back(x);
      else b.push_back(x);
    }
    std::vector<uint32_t> sa(f.size()), sb(f.size());
    f.signature(a, sa.data());
    f.signature(b, sb.data());
    error += std::abs(estimated_jaccard(sa.data(), sb.data(), f.size()) - static_cast<double>(common) / total);
  }
  return error / trials;
}

TEST(Minhash, EstimateTracksJaccard) {
  std::mt19937_64 rng(11);
  MinhashFunctions f(options(14, 8));
  for (double j : {0.2, 0.5, 0.8, 0.95}) {
    // The mean absolute error of an unbiased estimate from K independent functions is about
    // sqrt(2/pi) * sqrt(J(1-J)/K); correlated functions would spread it wider.
    double expected = std::sqrt(2 / M_PI) * std::sqrt(j * (1 - j) / f.size());
    double error = mean_abs_error(j, 200, f, rng);
    EXPECT_LT(error, 1.3 * expected + 0.002) << "J=" << j;
  }
}

TEST(Minhash, IdenticalSetsHaveEqualSignaturesDisjointAlmostNoEqualValues) {
  std::mt19937_64 rng(3);
  MinhashFunctions f(options(14, 8));
  std::vector<uint64_t> a(500), b(500);
  for (auto& x : a) x = rng();
  for (auto& x : b) x = rng();
  std::vector<uint64_t> a_shuffled = a;
  std::shuffle(a_shuffled.begin(), a_shuffled.end(), rng);
  std::vector<uint32_t> sa(f.size()), sa2(f.size()), sb(f.size());
  f.signature(a, sa.data());
  f.signature(a_shuffled, sa2.data());
  f.signature(b, sb.data());
  EXPECT_EQ(sa, sa2);
  EXPECT_EQ(estimated_jaccard(sa.data(), sa2.data(), f.size()), 1.0);
  EXPECT_LT(estimated_jaccard(sa.data(), sb.data(), f.size()), 0.05);
  for (int band = 0; band < 14; ++band) EXPECT_EQ(band_key(sa.data(), band, 8), band_key(sa2.data(), band, 8));
}

TEST(Minhash, BandKeyDependsOnItsRowsOnly) {
  std::vector<uint32_t> s(16, 0), t(16, 0);
  t[12] = 1;  // band 1 of 2 × 8
  EXPECT_EQ(band_key(s.data(), 0, 8), band_key(t.data(), 0, 8));
  EXPECT_NE(band_key(s.data(), 1, 8), band_key(t.data(), 1, 8));
}

TEST(Minhash, CandidateProbabilityIsDatatroves) {
  EXPECT_NEAR(lsh_candidate_probability(0.8, 14, 8), 0.924, 0.001);  // datatrove's comment
  EXPECT_NEAR(lsh_candidate_probability(std::pow(1.0 / 14, 1.0 / 8), 14, 8), 1 - std::pow(1 - 1.0 / 14, 14), 1e-12);
}

TEST(Minhash, OptionsOutOfRangeAreUsageErrors) {
  MinhashOptions o;
  o.bands = 0;
  EXPECT_THROW(o.check(), UsageError);
  o = {};
  o.ngram = 0;
  EXPECT_THROW(o.check(), UsageError);
  o = {};
  o.rows = 100;
  o.bands = 100;
  EXPECT_THROW(o.check(), UsageError);
  EXPECT_NO_THROW(MinhashOptions{}.check());
}

}  // namespace
}  // namespace pretrain::minhash_test
