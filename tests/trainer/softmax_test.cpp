// trainer/ops/softmax.h's CPU op (the CUDA kernel's reference) against trainer/reference.h's
// softmax in double: BERT's padding mask (additive −10000), a packed row's block-diagonal mask
// (sequence ids), GPT's causal mask (exact zeros past the diagonal), with the scale applied; and the
// backward against the softmax's Jacobian written out, with dscores aliasing dprobs.
#include <gtest/gtest.h>

#include "ops_fixtures.h"
#include "trainer/ops/softmax.h"
#include "trainer/reference.h"

namespace pretrain::softmax_test {
namespace {

using namespace ops_testing;
const Device kCpu{};

template <typename T>
class Softmax : public ::testing::Test {};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(Softmax, Storage);

// The additive mask of query i and key j in a row with key mask km, from the definition: padding
// keys, and keys of another instance for a query of an instance.
double mask(const std::vector<int32_t>& km, int64_t b, int64_t T, int64_t i, int64_t j) {
  if (km.empty()) return 0;
  const int32_t qi = km[size_t(b * T + i)], kj = km[size_t(b * T + j)];
  return kj == 0 || (qi != 0 && kj != qi) ? -10000.0 : 0.0;
}

template <typename T>
void check_forward(const std::vector<int32_t>& km, bool causal) {
  const int64_t B = 2, NH = 3, T_ = 16;
  const float scale = 0.125f;
  const auto scores = random_tensor<T>(static_cast<size_t>(B * NH * T_ * T_), 21, 4.0f);
  std::vector<T> probs(scores.size(), poison<T>());
  ops::softmax_forward(kCpu, ops::SoftmaxForward<T>{probs.data(), scores.data(), km.empty() ? nullptr : km.data(),
                                                    causal, scale, B, NH, T_});
  std::vector<double> want;
  const auto sd = to_double(scores);
  for (int64_t r = 0; r < B * NH * T_; ++r) {
    const int64_t b = r / (NH * T_), i = r % T_;
    reference::Vec s(static_cast<size_t>(T_)), add(static_cast<size_t>(T_));
    for (int64_t j = 0; j < T_; ++j) s[size_t(j)] = scale * sd[size_t(r * T_ + j)], add[size_t(j)] = mask(km, b, T_, i, j);
    const reference::Vec p = reference::softmax(s, size_t(causal ? i + 1 : T_), add);
    want.insert(want.end(), p.begin(), p.end());
  }
  const Errors e = errors(probs, want, 1e-3);
  PRETRAIN_EXPECT_ERRORS(e, 2 * kUnitRoundoff<T> + 1e-6, 2 * kUnitRoundoff<T> + 1e-5, "probs");
  if (causal) {
    for (int64_t r = 0; r < B * NH * T_; ++r)
      for (int64_t j = r % T_ + 1; j < T_; ++j) EXPECT_EQ(ops::to_float(probs[size_t(r * T_ + j)]), 0.0f);
  }
}

TYPED_TEST(Softmax, PaddingMask) {
  std::vector<int32_t> km(32, 1);
  for (int t = 11; t < 16; ++t) km[size_t(t)] = 0;  // row 0: 11 real tokens; row 1: 16
  check_forward<TypeParam>(km, false);
}
TYPED_TEST(Softmax, PackedRowsAttendWithinTheirInstance) {
  std::vector<int32_t> km = {1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2};
  check_forward<TypeParam>(km, false);
}
TYPED_TEST(Softmax, CausalMaskGivesExactZeros) { check_forward<TypeParam>({}, true); }

TYPED_TEST(Softmax, BackwardIsTheJacobianProduct) {
  using T = TypeParam;
  const int64_t T_ = 24, rows = T_;  // one sequence, one head: T_ rows of T_ probabilities
  const float scale = 0.25f;
  const auto scores = random_tensor<T>(static_cast<size_t>(rows * T_), 22, 2.0f);
  std::vector<T> probs(scores.size());
  ops::softmax_forward(kCpu, ops::SoftmaxForward<T>{probs.data(), scores.data(), nullptr, false, 1.0f, 1, 1, T_});
  const auto dprobs = random_tensor<T>(static_cast<size_t>(rows * T_), 23);
  std::vector<T> d = dprobs;  // dscores written over dprobs
  ops::softmax_backward(kCpu, ops::SoftmaxBackward<T>{d.data(), d.data(), probs.data(), scale, rows, T_});
  std::vector<double> want;
  const auto p = to_double(probs), dp = to_double(dprobs);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < T_; ++j) {
      double g = 0;  // Σ_i dp_i · ∂p_i/∂s_j, ∂p_i/∂s_j = p_i (δij − p_j), times the scale
      for (int64_t i = 0; i < T_; ++i)
        g += dp[size_t(r * T_ + i)] * p[size_t(r * T_ + i)] * ((i == j ? 1.0 : 0.0) - p[size_t(r * T_ + j)]);
      want.push_back(scale * g);
    }
  const Errors e = errors(d, want, 1e-2);
  PRETRAIN_EXPECT_ERRORS(e, 2 * kUnitRoundoff<T> + 1e-5, 3 * kUnitRoundoff<T> + 1e-5, "dscores");
}

}  // namespace
}  // namespace pretrain::softmax_test
