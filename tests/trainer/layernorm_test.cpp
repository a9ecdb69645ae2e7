// trainer/ops/layernorm.h's CPU op (the CUDA kernels' reference) against the double-precision
// definitions of trainer/reference.h, in fp32 and bf16 storage: the residual sum as stored, the
// output, mean and rstd; the input gradient written, added to a residual gradient, or both; dw and
// db accumulated over rows (more rows than one partial-sum chunk, and a last chunk short).
#include <gtest/gtest.h>

#include "ops_fixtures.h"
#include "trainer/ops/layernorm.h"
#include "trainer/reference.h"

namespace pretrain::layernorm_test {
namespace {

using namespace ops_testing;
using reference::Vec;
const Device kCpu{};

template <typename T>
class LayerNorm : public ::testing::Test {};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(LayerNorm, Storage);

Vec row(const std::vector<double>& v, int64_t r, int64_t C) { return Vec(v.begin() + r * C, v.begin() + (r + 1) * C); }

TYPED_TEST(LayerNorm, ForwardWithResidualMatchesTheDefinition) {
  using T = TypeParam;
  const int64_t N = 37, C = 48;
  const auto x = random_tensor<T>(static_cast<size_t>(N * C), 1, 1.0f, 0.5f), res = random_tensor<T>(static_cast<size_t>(N * C), 2);
  const auto w = random_tensor<T>(static_cast<size_t>(C), 3, 0.3f, 1.0f), b = random_tensor<T>(static_cast<size_t>(C), 4, 0.1f);
  std::vector<T> out(x.size(), poison<T>()), sum(x.size(), poison<T>());
  std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  ops::layernorm_forward(kCpu, ops::LayerNormForward<T>{out.data(), sum.data(), mean.data(), rstd.data(), x.data(),
                                                        res.data(), w.data(), b.data(), N, C, 1e-5f});
  // The sum is x + residual rounded once to T; the reference normalises that stored sum.
  const auto xd = to_double(x), rd = to_double(res), sd = to_double(sum), wd = to_double(w), bd = to_double(b);
  std::vector<double> want_sum(x.size()), want_out;
  for (size_t i = 0; i < x.size(); ++i) want_sum[i] = double(ops::rounded<T>(float(xd[i] + rd[i])));
  for (int64_t r = 0; r < N; ++r) {
    const Vec o = reference::layernorm(row(sd, r, C), wd, bd, 1e-5);
    want_out.insert(want_out.end(), o.begin(), o.end());
    double m, v;
    reference::moments(row(sd, r, C), m, v);
    EXPECT_NEAR(mean[size_t(r)], m, 1e-6 * (1 + std::fabs(m)));
    EXPECT_NEAR(rstd[size_t(r)], 1 / std::sqrt(v + 1e-5), 1e-5 / std::sqrt(v + 1e-5));
  }
  const Errors es = errors(sum, want_sum, 1e-30);
  EXPECT_EQ(es.worst, 0.0) << "the sum is x + residual rounded once";
  // out: float arithmetic (C terms) then one rounding to T.
  const Errors eo = errors(out, want_out, 0.1);
  PRETRAIN_EXPECT_ERRORS(eo, 2 * kUnitRoundoff<T> + 1e-5, 2 * kUnitRoundoff<T> + 1e-5, "out");
}

TYPED_TEST(LayerNorm, ForwardWithoutResidualNormalisesX) {
  using T = TypeParam;
  const int64_t N = 5, C = 64;
  const auto x = random_tensor<T>(static_cast<size_t>(N * C), 5, 2.0f, -1.0f);
  const auto w = random_tensor<T>(static_cast<size_t>(C), 6, 0.3f, 1.0f), b = random_tensor<T>(static_cast<size_t>(C), 7, 0.1f);
  std::vector<T> out(x.size(), poison<T>());
  std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  ops::layernorm_forward(kCpu, ops::LayerNormForward<T>{out.data(), nullptr, mean.data(), rstd.data(), x.data(), nullptr,
                                                        w.data(), b.data(), N, C, 1e-5f});
  std::vector<double> want;
  for (int64_t r = 0; r < N; ++r) {
    const Vec o = reference::layernorm(row(to_double(x), r, C), to_double(w), to_double(b), 1e-5);
    want.insert(want.end(), o.begin(), o.end());
  }
  const Errors e = errors(out, want, 0.1);
  PRETRAIN_EXPECT_ERRORS(e, 2 * kUnitRoundoff<T> + 1e-5, 2 * kUnitRoundoff<T> + 1e-5, "out");
}

TYPED_TEST(LayerNorm, BackwardMatchesTheChainRule) {
  using T = TypeParam;
  const int64_t N = 70, C = 32;  // 5 chunks of 16 rows, the last short
  const auto x = random_tensor<T>(static_cast<size_t>(N * C), 8, 1.0f, 0.3f), dout = random_tensor<T>(static_cast<size_t>(N * C), 9);
  const auto w = random_tensor<T>(static_cast<size_t>(C), 10, 0.3f, 1.0f), b = random_tensor<T>(static_cast<size_t>(C), 11);
  std::vector<T> out(x.size());
  std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  ops::layernorm_forward(kCpu, ops::LayerNormForward<T>{out.data(), nullptr, mean.data(), rstd.data(), x.data(), nullptr,
                                                        w.data(), b.data(), N, C, 1e-5f});
  const auto dres0 = random_tensor<T>(x.size(), 12), dw0 = random_tensor<T>(static_cast<size_t>(C), 13), db0 = random_tensor<T>(static_cast<size_t>(C), 14);
  std::vector<T> dinp(x.size(), poison<T>()), dres = dres0, dw = dw0, db = db0;
  std::vector<float> scratch(static_cast<size_t>(ops::layernorm_backward_scratch(N, C)));
  ops::layernorm_backward(kCpu, ops::LayerNormBackward<T>{dinp.data(), dres.data(), dw.data(), db.data(), scratch.data(),
                                                          dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C});
  std::vector<double> want_dx, want_dres(x.size()), want_dw = to_double(dw0), want_db = to_double(db0);
  for (int64_t r = 0; r < N; ++r) {
    Vec dx, dwr, dbr;
    reference::layernorm_backward(row(to_double(x), r, C), to_double(w), 1e-5, row(to_double(dout), r, C), dx, dwr, dbr);
    want_dx.insert(want_dx.end(), dx.begin(), dx.end());
    for (int64_t c = 0; c < C; ++c) want_dw[size_t(c)] += dwr[size_t(c)], want_db[size_t(c)] += dbr[size_t(c)];
  }
  const auto dr0 = to_double(dres0);
  for (size_t i = 0; i < want_dres.size(); ++i) want_dres[i] = dr0[i] + want_dx[i];
  // The input gradient: C-term sums in float, then one rounding (twice for the residual's +=).
  const double tol = 3 * kUnitRoundoff<T> + 1e-5;
  PRETRAIN_EXPECT_ERRORS(errors(dinp, want_dx, 0.1), tol, tol, "dinp");
  PRETRAIN_EXPECT_ERRORS(errors(dres, want_dres, 0.1), tol, tol, "dresidual");
  // dw, db: N-term float sums of O(1) terms added to O(1) values: relative to √N.
  const double ptol = 2 * kUnitRoundoff<T> + 1e-5;
  PRETRAIN_EXPECT_ERRORS(errors(dw, want_dw, std::sqrt(double(N))), ptol, ptol, "dw");
  PRETRAIN_EXPECT_ERRORS(errors(db, want_db, std::sqrt(double(N))), ptol, ptol, "db");
}

TYPED_TEST(LayerNorm, BackwardWithoutResidualWritesDinpOnly) {
  using T = TypeParam;
  const int64_t N = 3, C = 16;
  const auto x = random_tensor<T>(static_cast<size_t>(N * C), 15), dout = random_tensor<T>(static_cast<size_t>(N * C), 16);
  const auto w = random_tensor<T>(static_cast<size_t>(C), 17, 0.3f, 1.0f), b = random_tensor<T>(static_cast<size_t>(C), 18);
  std::vector<T> out(x.size()), dinp(x.size(), poison<T>()), dw(static_cast<size_t>(C)), db(static_cast<size_t>(C));
  std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)), scratch(static_cast<size_t>(ops::layernorm_backward_scratch(N, C)));
  ops::layernorm_forward(kCpu, ops::LayerNormForward<T>{out.data(), nullptr, mean.data(), rstd.data(), x.data(), nullptr,
                                                        w.data(), b.data(), N, C, 1e-5f});
  ops::layernorm_backward(kCpu, ops::LayerNormBackward<T>{dinp.data(), nullptr, dw.data(), db.data(), scratch.data(),
                                                          dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C});
  double row_sum = 0;  // the gradient of a normalised row sums to 0 (shifting x changes nothing)
  for (int64_t c = 0; c < C; ++c) row_sum += double(ops::to_float(dinp[size_t(c)]));
  EXPECT_NEAR(row_sum, 0.0, 8 * C * kUnitRoundoff<T>);
  for (const T& g : dinp) EXPECT_TRUE(std::isfinite(ops::to_float(g)));
}

TEST(LayerNormArgs, AResidualAddWithoutSumIsRefused) {
  std::vector<float> x(16), out(16), mean(1), rstd(1);
  EXPECT_THROW(ops::layernorm_forward(kCpu, ops::LayerNormForward<float>{out.data(), nullptr, mean.data(), rstd.data(),
                                                                          x.data(), x.data(), x.data(), x.data(), 1,
                                                                          16, 1e-5f}),
               Error);
}

}  // namespace
}  // namespace pretrain::layernorm_test
