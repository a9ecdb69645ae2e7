// What the attention tests share (tests/trainer/attention_test.cpp, tests/gpu/attention_test.cpp):
// attention as the unfused ops in double — the scores GEMM, the masked softmax, dropout, the
// values GEMM, and their gradients written out — from the definitions; the three masks' inputs;
// and the statistical check of a dropout whose mask is not ours to reproduce (cuDNN's Philox).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "trainer/kernels.h"
#include "trainer/ops/attention.h"

namespace pretrain::attention_testing {

using ops::AttentionMask;
using ops::AttentionShape;

// The key mask of each kind for B rows of T: padding (row b has T − 7b − 3 real tokens), packed
// (instances of 5 + 3b tokens, then 4 padding), none/causal (empty).
inline std::vector<int32_t> key_mask(const AttentionShape& s) {
  std::vector<int32_t> km;
  if (s.mask != AttentionMask::padding && s.mask != AttentionMask::packed) return km;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t) {
      if (s.mask == AttentionMask::padding)
        km.push_back(t < s.T - 7 * b - 3 ? 1 : 0);
      else
        km.push_back(t < s.T - 4 ? int32_t(1 + t / (5 + 3 * b)) : 0);
    }
  return km;
}

// Whether query (b, i) is a real position (the cuDNN padding mask leaves padding queries at 0).
inline bool real_query(const AttentionShape& s, const std::vector<int32_t>& km, int64_t b, int64_t i) {
  return s.mask != AttentionMask::padding || km[size_t(b * s.T + i)] != 0;
}

// Attention in double from qkv [B, T, 3, NH, HS] (as doubles), the dropout mask `keep` of element
// ((b·NH + h)·T + i)·T + j (null: none).
struct Unfused {
  AttentionShape s;
  std::vector<double> out, lse, dqkv;
  std::function<bool(int64_t)> keep;

  double q(const std::vector<double>& x, int which, int64_t b, int64_t i, int64_t h, int64_t d) const {
    const int64_t C = s.NH * s.HS;
    return x[size_t(((b * s.T + i) * 3 + which) * C + h * s.HS + d)];
  }
  size_t qi(int which, int64_t b, int64_t i, int64_t h, int64_t d) const {
    const int64_t C = s.NH * s.HS;
    return size_t(((b * s.T + i) * 3 + which) * C + h * s.HS + d);
  }
  size_t oi(int64_t b, int64_t i, int64_t h, int64_t d) const { return size_t((b * s.T + i) * s.NH * s.HS + h * s.HS + d); }

  // P (T × T, 0 where excluded) of one (b, h).
  std::vector<double> probs(const std::vector<double>& x, const std::vector<int32_t>& km, int64_t b, int64_t h,
                            std::vector<double>* row_lse) const {
    const int64_t T = s.T;
    std::vector<double> P(static_cast<size_t>(T * T), 0.0);
    const int32_t* m = km.empty() ? nullptr : km.data() + b * T;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t n = s.mask == AttentionMask::causal ? i + 1 : T;
      std::vector<double> z(static_cast<size_t>(n));
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.HS; ++d) dot += q(x, 0, b, i, h, d) * q(x, 1, b, j, h, d);
        z[size_t(j)] = s.scale * dot + kernels::key_mask_score(m, i, j);
        mx = std::max(mx, z[size_t(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(z[size_t(j)] - mx);
      for (int64_t j = 0; j < n; ++j) P[size_t(i * T + j)] = std::exp(z[size_t(j)] - mx) / sum;
      if (row_lse) row_lse->push_back(mx + std::log(sum));
    }
    return P;
  }
  double drop(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (!keep) return 1.0;
    return keep(((b * s.NH + h) * s.T + i) * s.T + j) ? 1.0 / (1.0 - double(s.dropout)) : 0.0;
  }

  void forward(const std::vector<double>& x, const std::vector<int32_t>& km) {
    const int64_t T = s.T;
    out.assign(static_cast<size_t>(s.B * T * s.NH * s.HS), 0.0), lse.clear();
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.NH; ++h) {
        const std::vector<double> P = probs(x, km, b, h, &lse);
        for (int64_t i = 0; i < T; ++i)
          for (int64_t d = 0; d < s.HS; ++d) {
            double o = 0;
            for (int64_t j = 0; j < T; ++j) o += P[size_t(i * T + j)] * drop(b, h, i, j) * q(x, 2, b, j, h, d);
            out[oi(b, i, h, d)] = o;
          }
      }
  }

  void backward(const std::vector<double>& x, const std::vector<int32_t>& km, const std::vector<double>& dout) {
    const int64_t T = s.T;
    dqkv.assign(x.size(), 0.0);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.NH; ++h) {
        const std::vector<double> P = probs(x, km, b, h, nullptr);
        std::vector<double> dP(static_cast<size_t>(T * T), 0.0), dS(static_cast<size_t>(T * T), 0.0);
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j) {
            double dpd = 0;  // ∂/∂Pd_ij = dO_i · v_j
            for (int64_t d = 0; d < s.HS; ++d) dpd += dout[oi(b, i, h, d)] * q(x, 2, b, j, h, d);
            dP[size_t(i * T + j)] = dpd * drop(b, h, i, j);
            for (int64_t d = 0; d < s.HS; ++d)  // dV_j += Pd_ij · dO_i
              dqkv[qi(2, b, j, h, d)] += P[size_t(i * T + j)] * drop(b, h, i, j) * dout[oi(b, i, h, d)];
          }
        for (int64_t i = 0; i < T; ++i) {  // the softmax's Jacobian, then the scale
          double dot = 0;
          for (int64_t j = 0; j < T; ++j) dot += P[size_t(i * T + j)] * dP[size_t(i * T + j)];
          for (int64_t j = 0; j < T; ++j) dS[size_t(i * T + j)] = s.scale * P[size_t(i * T + j)] * (dP[size_t(i * T + j)] - dot);
        }
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j)
            for (int64_t d = 0; d < s.HS; ++d) {
              dqkv[qi(0, b, i, h, d)] += dS[size_t(i * T + j)] * q(x, 1, b, j, h, d);
              dqkv[qi(1, b, j, h, d)] += dS[size_t(i * T + j)] * q(x, 0, b, i, h, d);
            }
      }
  }
};

// Dropout seen through the output: Q = K = 0 makes every probability 1/T (no mask), V = identity
// (HS = T) makes out[b, i, h, j] = keep(b, h, i, j) / (T (1 − p)). The kept fraction must be 1 − p
// within 5 standard deviations of a binomial count, and every kept value 1/(T (1 − p)) (the
// scaling) to within the storage's rounding `u`.
inline void expect_dropout_statistics(const AttentionShape& s, const std::vector<double>& out, double u) {
  ASSERT_EQ(s.HS, s.T);
  const double p = s.dropout, kept_value = 1.0 / (double(s.T) * (1.0 - p));
  int64_t kept = 0, n = 0;
  for (double o : out) {
    ++n;
    if (o == 0.0) continue;
    ++kept;
    EXPECT_NEAR(o, kept_value, 2 * u * kept_value) << "a kept probability is scaled by 1/(1 − p)";
  }
  const double rate = double(kept) / double(n), sigma = std::sqrt(p * (1 - p) / double(n));
  EXPECT_NEAR(rate, 1 - p, 5 * sigma) << kept << " of " << n << " kept at p = " << p;
}

// qkv for expect_dropout_statistics: Q = K = 0, V = identity per head (HS = T).
template <typename T>
std::vector<T> dropout_probe_qkv(const AttentionShape& s) {
  const int64_t C = s.NH * s.HS;
  std::vector<T> x(static_cast<size_t>(s.B * s.T * 3 * C), ops::from_float<T>(0.0f));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t j = 0; j < s.T; ++j)
      for (int64_t h = 0; h < s.NH; ++h) x[size_t(((b * s.T + j) * 3 + 2) * C + h * s.HS + j)] = ops::from_float<T>(1.0f);
  return x;
}

}  // namespace pretrain::attention_testing
