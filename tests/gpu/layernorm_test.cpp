// trainer/ops/layernorm.h on CUDA against its CPU op (CTest label "gpu"; skips without a device):
// forward with the residual add (out, sum, mean, rstd), backward (dinp written, dresidual added
// to, dw and db accumulated), fp32 and bf16, at BERT's and GPT's widths and a row count that
// leaves the last backward block short. Fresh random inputs, outputs poisoned with NaN.
//
// Tolerances: both backends compute in float and differ in summation order only (a warp's
// butterfly against a loop), ~C · 2⁻²⁴ relative in mean and rstd; a stored result can then round
// the other way: one unit in the last place of T, 2⁻⁷ relative at most for bf16 (2u) — in the worst
// element, while the norm of the difference stays below u. dw, db: sums over N rows in another
// order, N · 2⁻²⁴ of the terms' magnitude (√N of the result) before the one rounding.
// Deterministic: the same launch twice gives the same bits.
#include <gtest/gtest.h>

#include <cstring>

#include "ops_fixtures.h"
#include "trainer/ops/layernorm.h"

namespace pretrain::gpu_layernorm_test {
namespace {

using namespace ops_testing;

template <typename T>
class LayerNormGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(LayerNormGpu, Storage);

template <typename T>
void check(int64_t N, int64_t C, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << " N=" << N << " C=" << C);
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const size_t n = size_t(N * C);
  const auto x = random_tensor<T>(n, seed), res = random_tensor<T>(n, seed + 1, 0.5f, 0.2f);
  const auto w = random_tensor<T>(static_cast<size_t>(C), seed + 2, 0.2f, 1.0f), b = random_tensor<T>(static_cast<size_t>(C), seed + 3, 0.1f);
  const auto dout = random_tensor<T>(n, seed + 4), dres0 = random_tensor<T>(n, seed + 5);
  const auto dw0 = random_tensor<T>(static_cast<size_t>(C), seed + 6), db0 = random_tensor<T>(static_cast<size_t>(C), seed + 7);

  // CPU
  std::vector<T> out(n), sum(n), dinp(n), dres = dres0, dw = dw0, db = db0;
  std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)), scratch(static_cast<size_t>(ops::layernorm_backward_scratch(N, C)));
  ops::layernorm_forward(cpu, ops::LayerNormForward<T>{out.data(), sum.data(), mean.data(), rstd.data(), x.data(),
                                                       res.data(), w.data(), b.data(), N, C, 1e-5f});
  ops::layernorm_backward(cpu, ops::LayerNormBackward<T>{dinp.data(), dres.data(), dw.data(), db.data(), scratch.data(),
                                                         dout.data(), sum.data(), w.data(), mean.data(), rstd.data(), N, C});
  // GPU, twice: the second run must give the same bits.
  std::vector<T> first_dinp, first_dw;
  for (int run = 0; run < 2; ++run) {
    auto gx = upload(gpu, x);
    auto gres = upload(gpu, res);
    auto gw = upload(gpu, w);
    auto gb = upload(gpu, b);
    auto gdout = upload(gpu, dout);
    auto gout = poisoned<T>(gpu, n);
    auto gsum = poisoned<T>(gpu, n);
    auto gdinp = poisoned<T>(gpu, n);
    auto gdres = upload(gpu, dres0);
    auto gdw = upload(gpu, dw0);
    auto gdb = upload(gpu, db0);
    auto gmean = poisoned<float>(gpu, size_t(N));
    auto grstd = poisoned<float>(gpu, size_t(N));
    auto gscratch = poisoned<float>(gpu, scratch.size());
    ops::layernorm_forward(gpu, ops::LayerNormForward<T>{gout.get(), gsum.get(), gmean.get(), grstd.get(), gx.get(),
                                                         gres.get(), gw.get(), gb.get(), N, C, 1e-5f});
    ops::layernorm_backward(gpu, ops::LayerNormBackward<T>{gdinp.get(), gdres.get(), gdw.get(), gdb.get(), gscratch.get(),
                                                           gdout.get(), gsum.get(), gw.get(), gmean.get(), grstd.get(),
                                                           N, C});
    if (run == 1) {
      EXPECT_EQ(0, memcmp(first_dinp.data(), gdinp.to_host().data(), n * sizeof(T))) << "dinp differs between runs";
      EXPECT_EQ(0, memcmp(first_dw.data(), gdw.to_host().data(), size_t(C) * sizeof(T))) << "dw differs between runs";
      break;
    }
    first_dinp = gdinp.to_host(), first_dw = gdw.to_host();
    const double u = kUnitRoundoff<T>, sums = double(C) * 0x1p-24 * 8;
    EXPECT_EQ(0, memcmp(sum.data(), gsum.to_host().data(), n * sizeof(T))) << "the residual sum is exact";
    PRETRAIN_EXPECT_ERRORS(errors(gout.to_host(), out, 0.1), u + sums, 2 * u + sums, "out");
    PRETRAIN_EXPECT_ERRORS(errors(gmean.to_host(), to_double(mean), 0.1), sums, sums, "mean");
    PRETRAIN_EXPECT_ERRORS(errors(grstd.to_host(), to_double(rstd), 0.1), sums, sums, "rstd");
    PRETRAIN_EXPECT_ERRORS(errors(first_dinp, dinp, 0.1), u + sums, 2 * u + sums, "dinp");
    PRETRAIN_EXPECT_ERRORS(errors(gdres.to_host(), dres, 0.1), u + sums, 2 * u + sums, "dresidual");
    const double col = double(N) * 0x1p-24 * 8;
    PRETRAIN_EXPECT_ERRORS(errors(first_dw, dw, std::sqrt(double(N))), u + col, 2 * u + col, "dw");
    PRETRAIN_EXPECT_ERRORS(errors(gdb.to_host(), db, std::sqrt(double(N))), u + col, 2 * u + col, "db");
  }
  close_device(gpu);
}

TYPED_TEST(LayerNormGpu, MatchesTheCpuAtBertWidth) { check<TypeParam>(4099, 768, 100); }
TYPED_TEST(LayerNormGpu, MatchesTheCpuAtGptLargeWidth) { check<TypeParam>(1000, 1024, 200); }
TYPED_TEST(LayerNormGpu, MatchesTheCpuOnAWideRow) { check<TypeParam>(77, 1600, 300); }

}  // namespace
}  // namespace pretrain::gpu_layernorm_test
