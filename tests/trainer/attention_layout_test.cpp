// trainer/ops/attention_layout.h: the batched GEMMs of the fallback attention, run here as the CUDA
// fallback runs them — one column-major batched GEMM per op (gemm_layout.h's mapping), entry e's
// pointers from the operands' offsets — on plain loops, against attention's matrices indexed
// directly from their definitions in the fused layouts: S = Q·Kᵀ, O = P·V, dP = dO·Vᵀ, dV = Pᵀ·dO,
// dQ = dS·K, dK = dSᵀ·Q, each (sequence, head) on its own. And which operands one stride can
// address: the [B, NH, T, T] matrices always, the fused QKV rows only for one sequence.
#include <gtest/gtest.h>

#include <random>

#include "trainer/gemm_layout.h"
#include "trainer/ops/attention_layout.h"

namespace pretrain::attention_layout_test {
namespace {

using ops::AttentionGemm;
using ops::AttentionLayout;

constexpr int64_t B = 2, T = 5, NH = 3, HS = 4, C = NH * HS;

std::vector<double> random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = u(gen);
  return v;
}

// What the CUDA fallback does: the column-major form, pointers per entry, a column-major GEMM.
void run(const AttentionLayout& l, const AttentionGemm& g, const std::vector<double>& A, const std::vector<double>& Bm,
         std::vector<double>& Cm) {
  const ColMajorGemm cm = col_major_gemm(g.ta, g.tb, g.m, g.n, g.k, nullptr, g.a.ld, 0, nullptr, g.b.ld, 0, nullptr,
                                         g.c.ld, 0);
  for (int64_t e = 0; e < l.batch(); ++e) {
    const double* a = Bm.data() + g.b.offset(e, l.NH);  // the library's first operand is our B
    const double* b = A.data() + g.a.offset(e, l.NH);
    double* d = Cm.data() + g.c.offset(e, l.NH);
    for (int64_t i = 0; i < cm.m; ++i)
      for (int64_t j = 0; j < cm.n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < cm.k; ++p) {
          const double x = cm.a.transpose ? a[i * cm.a.ld + p] : a[p * cm.a.ld + i];
          const double y = cm.b.transpose ? b[p * cm.b.ld + j] : b[j * cm.b.ld + p];
          s += x * y;
        }
        d[j * cm.ldd + i] = s;
      }
  }
}

// Element accessors of the fused layouts, from their definitions.
double& qkv_at(std::vector<double>& x, int which, int64_t b, int64_t t, int64_t h, int64_t d) {
  return x[size_t(((b * T + t) * 3 + which) * C + h * HS + d)];
}
double& out_at(std::vector<double>& x, int64_t b, int64_t t, int64_t h, int64_t d) {
  return x[size_t((b * T + t) * C + h * HS + d)];
}
double& att_at(std::vector<double>& x, int64_t b, int64_t h, int64_t i, int64_t j) {
  return x[size_t(((b * NH + h) * T + i) * T + j)];
}

TEST(AttentionLayout, BatchedGemmsComputeEachHeadsMatrices) {
  const AttentionLayout l{B, T, NH, HS};
  std::vector<double> qkv = random(static_cast<size_t>(B * T * 3 * C), 1), dout = random(static_cast<size_t>(B * T * C), 2),
                      att = random(static_cast<size_t>(B * NH * T * T), 3);
  std::vector<double> S(att.size(), NAN), O(dout.size(), NAN), dP(att.size(), NAN), dqkv(qkv.size(), NAN);
  run(l, l.scores(), qkv, qkv, S);
  run(l, l.context(), att, qkv, O);
  run(l, l.dprobs(), dout, qkv, dP);
  run(l, l.dvalues(), att, dout, dqkv);
  run(l, l.dqueries(), att, qkv, dqkv);
  run(l, l.dkeys(), att, qkv, dqkv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        for (int64_t j = 0; j < T; ++j) {
          double s = 0, dp = 0;
          for (int64_t d = 0; d < HS; ++d) {
            s += qkv_at(qkv, 0, b, i, h, d) * qkv_at(qkv, 1, b, j, h, d);
            dp += out_at(dout, b, i, h, d) * qkv_at(qkv, 2, b, j, h, d);
          }
          EXPECT_NEAR(att_at(S, b, h, i, j), s, 1e-12) << "S";
          EXPECT_NEAR(att_at(dP, b, h, i, j), dp, 1e-12) << "dP";
        }
        for (int64_t d = 0; d < HS; ++d) {
          double o = 0, dv = 0, dq = 0, dk = 0;
          for (int64_t j = 0; j < T; ++j) {
            o += att_at(att, b, h, i, j) * qkv_at(qkv, 2, b, j, h, d);
            dv += att_at(att, b, h, j, i) * out_at(dout, b, j, h, d);  // row i of Pᵀ·dO
            dq += att_at(att, b, h, i, j) * qkv_at(qkv, 1, b, j, h, d);
            dk += att_at(att, b, h, j, i) * qkv_at(qkv, 0, b, j, h, d);
          }
          EXPECT_NEAR(out_at(O, b, i, h, d), o, 1e-12) << "O";
          EXPECT_NEAR(qkv_at(dqkv, 2, b, i, h, d), dv, 1e-12) << "dV";
          EXPECT_NEAR(qkv_at(dqkv, 0, b, i, h, d), dq, 1e-12) << "dQ";
          EXPECT_NEAR(qkv_at(dqkv, 1, b, i, h, d), dk, 1e-12) << "dK";
        }
      }
}

TEST(AttentionLayout, OneStrideAddressesTheScoresButNotTheFusedRows) {
  const AttentionLayout l{B, T, NH, HS};
  EXPECT_EQ(l.att().strided(B, NH), T * T);
  EXPECT_EQ(l.qkv(0).strided(B, NH), -1);
  EXPECT_EQ(l.out().strided(B, NH), -1);
  EXPECT_EQ(l.qkv(1).strided(1, NH), HS);  // one sequence: the heads are HS apart
  // Every entry's offset is where the definition puts (b, h)'s first element.
  for (int64_t e = 0; e < l.batch(); ++e) {
    const int64_t b = e / NH, h = e % NH;
    EXPECT_EQ(l.qkv(1).offset(e, NH), ((b * T + 0) * 3 + 1) * C + h * HS);
    EXPECT_EQ(l.out().offset(e, NH), (b * T) * C + h * HS);
    EXPECT_EQ(l.att().offset(e, NH), (b * NH + h) * T * T);
  }
}

}  // namespace
}  // namespace pretrain::attention_layout_test
