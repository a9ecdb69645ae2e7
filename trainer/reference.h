// Naive double-precision versions of kernels.h's ops, written from the definitions and nothing
// else: the unit tests compare both backends' ops against these. Row-major, one row at a time.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace pretrain::reference {

using Vec = std::vector<double>;

// Mean and (biased) variance of a row.
inline void moments(const Vec& x, double& m, double& v) {
  m = v = 0;
  for (double e : x) m += e;
  m /= double(x.size());
  for (double e : x) v += (e - m) * (e - m);
  v /= double(x.size());
}

inline Vec layernorm(const Vec& x, const Vec& w, const Vec& b, double eps) {
  const size_t C = x.size();
  double m, v;
  moments(x, m, v);
  Vec out(C);
  for (size_t c = 0; c < C; ++c) out[c] = (x[c] - m) / std::sqrt(v + eps) * w[c] + b[c];
  return out;
}

// Gradient of Σ dout · layernorm(x) with respect to x, w and b, by the chain rule written out.
inline void layernorm_backward(const Vec& x, const Vec& w, double eps, const Vec& dout, Vec& dx, Vec& dw, Vec& db) {
  const size_t C = x.size();
  double m, v;
  moments(x, m, v);
  const double s = 1 / std::sqrt(v + eps);
  dx.assign(C, 0), dw.assign(C, 0), db.assign(C, 0);
  for (size_t c = 0; c < C; ++c) {
    const double n = (x[c] - m) * s;
    dw[c] = dout[c] * n, db[c] = dout[c];
  }
  // dn_i/dx_j = s (δij − 1/C − n_i n_j / C)
  for (size_t j = 0; j < C; ++j)
    for (size_t i = 0; i < C; ++i) {
      const double ni = (x[i] - m) * s, nj = (x[j] - m) * s;
      dx[j] += dout[i] * w[i] * s * ((i == j ? 1.0 : 0.0) - 1.0 / double(C) - ni * nj / double(C));
    }
}

inline double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Softmax over the first n entries (the rest 0), with an additive mask.
inline Vec softmax(const Vec& s, size_t n, const Vec& add) {
  Vec p(s.size(), 0.0);
  double mx = -INFINITY, sum = 0;
  for (size_t j = 0; j < n; ++j) mx = std::max(mx, s[j] + add[j]);
  for (size_t j = 0; j < n; ++j) sum += std::exp(s[j] + add[j] - mx);
  for (size_t j = 0; j < n; ++j) p[j] = std::exp(s[j] + add[j] - mx) / sum;
  return p;
}

// Cross-entropy of one row and its gradient (softmax − onehot) · scale.
inline double cross_entropy(const Vec& logits, int target, double scale, Vec& grad) {
  double mx = -INFINITY, sum = 0;
  for (double v : logits) mx = std::max(mx, v);
  for (double v : logits) sum += std::exp(v - mx);
  grad.resize(logits.size());
  for (size_t v = 0; v < logits.size(); ++v)
    grad[v] = (std::exp(logits[v] - mx) / sum - (int(v) == target ? 1.0 : 0.0)) * scale;
  return std::log(sum) + mx - logits[size_t(target)];
}

// One AdamW step (torch.optim.AdamW's definition) on one value; t is 1-based.
inline void adamw(double& p, double g, double& m, double& v, double lr, double b1, double b2, double eps, double wd, int t) {
  p -= lr * wd * p;
  m = b1 * m + (1 - b1) * g;
  v = b2 * v + (1 - b2) * g * g;
  const double mhat = m / (1 - std::pow(b1, t)), vhat = v / (1 - std::pow(b2, t));
  p -= lr * mhat / (std::sqrt(vhat) + eps);
}

}  // namespace pretrain::reference

namespace pretrain::reference {

// bf16 is the top half of an fp32: round the bit pattern to nearest even at bit 16.
inline float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // Inf, NaN
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}

}  // namespace pretrain::reference
