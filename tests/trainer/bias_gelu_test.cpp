// trainer/ops/bias_gelu.h's CPU op (the CUDA kernels' reference) against the definitions in
// double: out = gelu(inp + bias) for BERT's erf and GPT's tanh GELU, the pre-activation kept as
// stored; the backward dinp = dout · gelu'(pre) against a central difference of the double GELU,
// and the bias gradient (GELU's or plain) as the column sums, over more rows than one chunk.
#include <gtest/gtest.h>

#include "ops_fixtures.h"
#include "trainer/ops/bias_gelu.h"
#include "trainer/reference.h"

namespace pretrain::bias_gelu_test {
namespace {

using namespace ops_testing;
const Device kCpu{};

template <typename T>
class BiasGelu : public ::testing::Test {};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(BiasGelu, Storage);

double gelu(ops::Gelu kind, double x) { return kind == ops::Gelu::erf ? reference::gelu_erf(x) : reference::gelu_tanh(x); }

TYPED_TEST(BiasGelu, ForwardAndBackwardMatchTheDefinitions) {
  using T = TypeParam;
  const int64_t N = 150, C = 40;  // 3 chunks of 64 rows, the last short
  for (ops::Gelu kind : {ops::Gelu::erf, ops::Gelu::tanh}) {
    SCOPED_TRACE(kind == ops::Gelu::erf ? "erf" : "tanh");
    const auto inp = random_tensor<T>(static_cast<size_t>(N * C), 31, 2.0f), bias = random_tensor<T>(static_cast<size_t>(C), 32, 0.5f);
    const auto dout = random_tensor<T>(static_cast<size_t>(N * C), 33), dbias0 = random_tensor<T>(static_cast<size_t>(C), 34);
    std::vector<T> out(inp.size(), poison<T>()), pre(inp.size(), poison<T>());
    ops::bias_gelu_forward(kCpu, ops::BiasGeluForward<T>{out.data(), pre.data(), inp.data(), bias.data(), N, C, kind});
    const auto in = to_double(inp), b = to_double(bias), p = to_double(pre);
    std::vector<double> want_pre(inp.size()), want_out(inp.size());
    for (size_t i = 0; i < inp.size(); ++i)
      want_pre[i] = double(ops::rounded<T>(float(in[i] + b[i % size_t(C)]))), want_out[i] = gelu(kind, want_pre[i]);
    EXPECT_EQ(errors(pre, want_pre, 1e-30).worst, 0.0) << "pre is inp + bias rounded once";
    PRETRAIN_EXPECT_ERRORS(errors(out, want_out, 1e-2), kUnitRoundoff<T> + 1e-6, kUnitRoundoff<T> + 1e-5, "out");

    std::vector<T> dinp(inp.size(), poison<T>()), dbias = dbias0;
    std::vector<float> scratch(static_cast<size_t>(ops::bias_backward_scratch(N, C)));
    ops::bias_gelu_backward(kCpu, ops::BiasGeluBackward<T>{dinp.data(), dbias.data(), scratch.data(), dout.data(),
                                                           pre.data(), N, C, kind});
    const auto d = to_double(dout), di = to_double(dinp);
    std::vector<double> want_dinp(inp.size()), want_dbias = to_double(dbias0);
    for (size_t i = 0; i < inp.size(); ++i) {
      const double h = 1e-5;
      want_dinp[i] = d[i] * (gelu(kind, p[i] + h) - gelu(kind, p[i] - h)) / (2 * h);
      want_dbias[i % size_t(C)] += di[i];  // the gradient as stored is what the bias receives
    }
    // gelu'(x) crosses zero near x = −0.75: element errors relative to |value| + rms/10 there.
    PRETRAIN_EXPECT_ERRORS(errors(dinp, want_dinp, rms(want_dinp) / 10), kUnitRoundoff<T> + 1e-6,
                           kUnitRoundoff<T> + 1e-5, "dinp");
    PRETRAIN_EXPECT_ERRORS(errors(dbias, want_dbias, std::sqrt(double(N))), kUnitRoundoff<T> + 1e-5,
                           kUnitRoundoff<T> + 1e-5, "dbias");
  }
}

TYPED_TEST(BiasGelu, PlainBiasGradientSumsTheColumns) {
  using T = TypeParam;
  const int64_t N = 200, C = 24;
  const auto dout = random_tensor<T>(static_cast<size_t>(N * C), 35);
  std::vector<T> dbias(static_cast<size_t>(C), ops::from_float<T>(0.0f));
  std::vector<float> scratch(static_cast<size_t>(ops::bias_backward_scratch(N, C)));
  ops::bias_gelu_backward(kCpu, ops::BiasGeluBackward<T>{nullptr, dbias.data(), scratch.data(), dout.data(), nullptr, N,
                                                         C, ops::Gelu::erf, false});
  std::vector<double> want(static_cast<size_t>(C), 0.0);
  const auto d = to_double(dout);
  for (size_t i = 0; i < d.size(); ++i) want[i % size_t(C)] += d[i];
  PRETRAIN_EXPECT_ERRORS(errors(dbias, want, std::sqrt(double(N))), kUnitRoundoff<T> + 1e-5, kUnitRoundoff<T> + 1e-5,
                         "dbias");
}

TEST(BiasGeluArgs, TheGeluBackwardNeedsItsInput) {
  std::vector<float> x(8), s(8);
  EXPECT_THROW(ops::bias_gelu_backward(kCpu, ops::BiasGeluBackward<float>{x.data(), nullptr, s.data(), x.data(), nullptr,
                                                                          1, 8, ops::Gelu::tanh}),
               Error);
}

}  // namespace
}  // namespace pretrain::bias_gelu_test
