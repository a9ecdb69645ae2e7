// trainer/ops/bias_gelu.h on CUDA against its CPU op (CTest label "gpu"; skips without a device):
// the forward (out, pre) and backward (dinp, dbias) for the erf and tanh GELU and the plain bias
// gradient, at BERT-base's MLP width, fp32 and bf16, outputs poisoned with NaN.
// Tolerances: elementwise results differ only by the math library (erff, tanhf, expf: a few ulp
// of float) before one rounding to T, which may go the other way (2u relative worst, u in the
// norm); pre is the same rounding of the same float sum, so equal bits; dbias sums the same
// stored values in another grouping (rows in chunks of 64, then the chunks: the same grouping on
// both, so only the elementwise differences remain), N · 2⁻²⁴ of its terms at most.
#include <gtest/gtest.h>

#include <cstring>

#include "ops_fixtures.h"
#include "trainer/ops/bias_gelu.h"

namespace pretrain::gpu_bias_gelu_test {
namespace {

using namespace ops_testing;

template <typename T>
class BiasGeluGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(BiasGeluGpu, Storage);

TYPED_TEST(BiasGeluGpu, MatchesTheCpu) {
  using T = TypeParam;
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const int64_t N = 1030, C = 3072;
  const size_t n = size_t(N * C);
  for (ops::Gelu kind : {ops::Gelu::erf, ops::Gelu::tanh}) {
    for (bool gelu : {true, false}) {
      SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << (kind == ops::Gelu::erf ? " erf" : " tanh")
                                      << (gelu ? "" : " bias only"));
      const auto inp = random_tensor<T>(n, 600, 2.0f), bias = random_tensor<T>(static_cast<size_t>(C), 601, 0.3f);
      const auto dout = random_tensor<T>(n, 602), dbias0 = random_tensor<T>(static_cast<size_t>(C), 603);
      std::vector<T> out(n), pre(n), dinp(n), dbias = dbias0;
      std::vector<float> scratch(static_cast<size_t>(ops::bias_backward_scratch(N, C)));
      ops::bias_gelu_forward(cpu, ops::BiasGeluForward<T>{out.data(), pre.data(), inp.data(), bias.data(), N, C, kind});
      ops::bias_gelu_backward(cpu, ops::BiasGeluBackward<T>{dinp.data(), dbias.data(), scratch.data(), dout.data(),
                                                            pre.data(), N, C, kind, gelu});
      auto gi = upload(gpu, inp);
      auto gb = upload(gpu, bias);
      auto gd = upload(gpu, dout);
      auto gdb = upload(gpu, dbias0);
      auto go = poisoned<T>(gpu, n);
      auto gpre = poisoned<T>(gpu, n);
      auto gdi = poisoned<T>(gpu, n);
      auto gs = poisoned<float>(gpu, scratch.size());
      ops::bias_gelu_forward(gpu, ops::BiasGeluForward<T>{go.get(), gpre.get(), gi.get(), gb.get(), N, C, kind});
      ops::bias_gelu_backward(gpu, ops::BiasGeluBackward<T>{gdi.get(), gdb.get(), gs.get(), gd.get(), gpre.get(), N, C,
                                                            kind, gelu});
      const double u = kUnitRoundoff<T>, f = 16 * 0x1p-24;
      EXPECT_EQ(0, memcmp(pre.data(), gpre.to_host().data(), n * sizeof(T))) << "pre";
      PRETRAIN_EXPECT_ERRORS(errors(go.to_host(), out, 1e-3), u + f, 2 * u + f, "out");
      PRETRAIN_EXPECT_ERRORS(errors(gdi.to_host(), dinp, 1e-3), u + f, 2 * u + f, "dinp");
      const double col = double(N) * 0x1p-24 * 4 + (gelu ? u : 0.0);
      PRETRAIN_EXPECT_ERRORS(errors(gdb.to_host(), dbias, std::sqrt(double(N))), u + col, 2 * u + col, "dbias");
    }
  }
  close_device(gpu);
}

}  // namespace
}  // namespace pretrain::gpu_bias_gelu_test
