// trainer/ops/softmax.h on CUDA against its CPU op (CTest label "gpu"; skips without a device):
// BERT's shape (T 128, padding mask), a packed row's mask and GPT's (T 1024, causal), forward and
// backward, fp32 and bf16, fresh random inputs, outputs poisoned with NaN.
// Tolerances: the backends differ in the order of the row's sums (T terms) and in exp (the GPU's
// __expf is within 2 ulp of expf): ~T · 2⁻²⁴ relative before the one rounding to T, which may then
// go the other way (one unit: 2u relative in the worst element, below u in the norm).
#include <gtest/gtest.h>

#include "ops_fixtures.h"
#include "trainer/ops/softmax.h"

namespace pretrain::gpu_softmax_test {
namespace {

using namespace ops_testing;

template <typename T>
class SoftmaxGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(SoftmaxGpu, Storage);

template <typename T>
void check(int64_t B, int64_t NH, int64_t T_, const std::vector<int32_t>& km, bool causal, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << " T=" << T_ << (causal ? " causal" : ""));
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const size_t n = size_t(B * NH * T_ * T_);
  const float scale = 0.125f;
  const auto scores = random_tensor<T>(n, seed, 8.0f), dprobs = random_tensor<T>(n, seed + 1);
  std::vector<T> probs(n), dscores(n);
  ops::softmax_forward(cpu, ops::SoftmaxForward<T>{probs.data(), scores.data(), km.empty() ? nullptr : km.data(), causal,
                                                   scale, B, NH, T_});
  ops::softmax_backward(cpu, ops::SoftmaxBackward<T>{dscores.data(), dprobs.data(), probs.data(), scale, B * NH * T_, T_});
  auto gs = upload(gpu, scores);
  auto gdp = upload(gpu, dprobs);
  auto gp = poisoned<T>(gpu, n);
  auto gds = poisoned<T>(gpu, n);
  auto gkm = upload(gpu, km);
  ops::softmax_forward(gpu, ops::SoftmaxForward<T>{gp.get(), gs.get(), km.empty() ? nullptr : gkm.get(), causal, scale, B,
                                                   NH, T_});
  auto gprobs = upload(gpu, probs);  // the backward from the CPU's probabilities: one op at a time
  ops::softmax_backward(gpu, ops::SoftmaxBackward<T>{gds.get(), gdp.get(), gprobs.get(), scale, B * NH * T_, T_});
  const double u = kUnitRoundoff<T>, sums = double(T_) * 0x1p-24 * 8;
  PRETRAIN_EXPECT_ERRORS(errors(gp.to_host(), probs, 1e-4), u + sums, 2 * u + sums, "probs");
  PRETRAIN_EXPECT_ERRORS(errors(gds.to_host(), dscores, 1e-4), u + sums, 2 * u + sums + 1e-3, "dscores");
  close_device(gpu);
}

TYPED_TEST(SoftmaxGpu, BertPaddingMask) {
  std::vector<int32_t> km(4 * 128, 1);
  for (int b = 0; b < 4; ++b)
    for (int t = 40 + 25 * b; t < 128; ++t) km[size_t(b * 128 + t)] = 0;
  check<TypeParam>(4, 12, 128, km, false, 500);
}
TYPED_TEST(SoftmaxGpu, PackedRows) {
  std::vector<int32_t> km(2 * 128, 0);
  for (int t = 0; t < 120; ++t) km[size_t(t)] = 1 + t / 50, km[size_t(128 + t)] = 1 + t / 17;
  check<TypeParam>(2, 4, 128, km, false, 510);
}
TYPED_TEST(SoftmaxGpu, GptCausalMask) { check<TypeParam>(1, 3, 1024, {}, true, 520); }

}  // namespace
}  // namespace pretrain::gpu_softmax_test
