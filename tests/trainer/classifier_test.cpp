// trainer/ops/classifier.h's CPU path (the CUDA kernel's reference) against the unfused ops in
// double (logits → softmax → cross-entropy → gradient, trainer/reference.h): the loss and the
// gradient written in place, rows with ignored targets (loss 0, gradient 0), padding columns past
// the vocabulary (gradient 0, out of the softmax); and the vocabulary-parallel form — three uneven
// shards' statistics merged in rank order — giving the fused op's losses and gradients.
#include <gtest/gtest.h>

#include "ops_fixtures.h"
#include "trainer/ops/classifier.h"
#include "trainer/reference.h"

namespace pretrain::classifier_test {
namespace {

using namespace ops_testing;
const Device kCpu{};

template <typename T>
class Classifier : public ::testing::Test {};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(Classifier, Storage);

constexpr int64_t kN = 12, kV = 1001, kLd = 1008;  // 7 padding columns
constexpr float kDloss = 1.0f / 10;

std::vector<int32_t> targets() {
  std::vector<int32_t> t;
  for (int64_t r = 0; r < kN; ++r) t.push_back(r == 3 || r == 8 ? -1 : int32_t((r * 389) % kV));
  return t;
}

template <typename T>
std::vector<T> logits(uint32_t seed) {
  auto x = random_tensor<T>(static_cast<size_t>(kN * kLd), seed, 3.0f);
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t v = kV; v < kLd; ++v) x[size_t(r * kLd + v)] = ops::from_float<T>(1e4f);  // must not count
  return x;
}

TYPED_TEST(Classifier, FusedMatchesTheUnfusedOpsInDouble) {
  using T = TypeParam;
  const auto x0 = logits<T>(41);
  const auto t = targets();
  std::vector<T> x = x0;
  std::vector<float> losses(static_cast<size_t>(kN), NAN);
  ops::classifier_forward_backward(kCpu, ops::FusedClassifier<T>{x.data(), losses.data(), t.data(), kN, kV, kLd, kDloss});
  const auto xd = to_double(x0);
  std::vector<double> want_grad;
  for (int64_t r = 0; r < kN; ++r) {
    const reference::Vec row(xd.begin() + r * kLd, xd.begin() + r * kLd + kV);
    reference::Vec grad(static_cast<size_t>(kLd), 0.0);
    if (t[size_t(r)] < 0) {
      EXPECT_EQ(losses[size_t(r)], 0.0f);
    } else {
      const double loss = reference::cross_entropy(row, t[size_t(r)], kDloss, grad);
      grad.resize(static_cast<size_t>(kLd), 0.0);
      EXPECT_NEAR(losses[size_t(r)], loss, 1e-5 * (1 + loss)) << "row " << r;
    }
    want_grad.insert(want_grad.end(), grad.begin(), grad.end());
  }
  // Each gradient element: exp and a division in float, one rounding to T.
  const Errors e = errors(x, want_grad, 1e-6);
  PRETRAIN_EXPECT_ERRORS(e, kUnitRoundoff<T> + 1e-5, kUnitRoundoff<T> + 1e-5, "dlogits");
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t v = kV; v < kLd; ++v) EXPECT_EQ(ops::to_float(x[size_t(r * kLd + v)]), 0.0f);
}

TYPED_TEST(Classifier, VocabularyShardsGiveTheFusedResult) {
  using T = TypeParam;
  const auto x0 = logits<T>(42);
  const auto t = targets();
  std::vector<T> fused = x0;
  std::vector<float> fused_losses(static_cast<size_t>(kN));
  ops::classifier_forward_backward(kCpu,
                                   ops::FusedClassifier<T>{fused.data(), fused_losses.data(), t.data(), kN, kV, kLd, kDloss});
  // Shards of ids [0, 400), [400, 640), [640, 1001) (+ the padding), each a row-major [kN, width].
  const std::vector<int64_t> begin = {0, 400, 640}, end = {400, 640, kV};
  const std::vector<int64_t> width = {400, 240, 368};
  const int64_t ranks = 3;
  std::vector<std::vector<T>> shard(3);
  std::vector<ops::ClassifierRowStats> gathered(static_cast<size_t>(ranks * kN)), merged(static_cast<size_t>(kN));
  for (int64_t k = 0; k < ranks; ++k) {
    for (int64_t r = 0; r < kN; ++r)
      for (int64_t v = 0; v < width[size_t(k)]; ++v)
        shard[size_t(k)].push_back(x0[size_t(r * kLd + begin[size_t(k)] + v)]);
    ops::FusedClassifier<T> a{shard[size_t(k)].data(), nullptr, t.data(), kN, end[size_t(k)] - begin[size_t(k)],
                              width[size_t(k)], kDloss, begin[size_t(k)]};
    ops::classifier_shard_stats(kCpu, a, gathered.data() + k * kN);
  }
  ops::classifier_combine_stats(kCpu, merged.data(), gathered.data(), ranks, kN);
  for (int64_t k = 0; k < ranks; ++k) {
    std::vector<float> losses(static_cast<size_t>(kN), NAN);
    ops::FusedClassifier<T> a{shard[size_t(k)].data(), losses.data(), t.data(), kN, end[size_t(k)] - begin[size_t(k)],
                              width[size_t(k)], kDloss, begin[size_t(k)]};
    ops::classifier_shard_backward(kCpu, a, merged.data());
    for (int64_t r = 0; r < kN; ++r) {
      EXPECT_NEAR(losses[size_t(r)], fused_losses[size_t(r)], 1e-5 * (1 + fused_losses[size_t(r)]));
      for (int64_t v = 0; v < width[size_t(k)]; ++v) {
        const float got = ops::to_float(shard[size_t(k)][size_t(r * width[size_t(k)] + v)]);
        const float want = ops::to_float(fused[size_t(r * kLd + begin[size_t(k)] + v)]);
        // The merged Σ exp differs from the one-pass sum by rounding: a unit of T at most.
        EXPECT_NEAR(got, want, 2 * kUnitRoundoff<T> * std::fabs(want) + 1e-7) << "rank " << k << " row " << r << " v " << v;
      }
    }
  }
}

}  // namespace
}  // namespace pretrain::classifier_test
