// The attention op's CPU path (flash attention's algorithm, the reference) and the choice of path
// (ops/attention.h). The CUDA paths: attention_cuda.cu (fallback, choice), attention_cudnn.cpp.
#include "trainer/ops/attention.h"

#include <algorithm>

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {

#if PRETRAIN_HAVE_CUDA
namespace cuda {
Attention::Impl* attention_create(const Device& d, const Attention::Options& options);
void attention_destroy(Attention::Impl* impl);
template <typename T>
std::string attention_forward(Attention::Impl& impl, const AttentionForward<T>& a, std::vector<std::string>& warnings);
template <typename T>
std::string attention_backward(Attention::Impl& impl, const AttentionBackward<T>& a, std::vector<std::string>& warnings);
}  // namespace cuda
#endif

namespace cpu {
namespace {

// Query i's view of key j: excluded (causal, j > i), or its additive mask.
struct MaskView {
  const int32_t* km;  // the row's key mask; null: none
  bool causal;
  bool excluded(int64_t i, int64_t j) const { return causal && j > i; }
  float add(int64_t i, int64_t j) const { return kernels::key_mask_score(km, i, j); }
};

template <typename T>
MaskView mask_of(const AttentionShape& s, const int32_t* key_mask, int64_t b) {
  const bool rows = s.mask == AttentionMask::padding || s.mask == AttentionMask::packed;
  return {rows && key_mask ? key_mask + b * s.T : nullptr, s.mask == AttentionMask::causal};
}

// One (sequence, head)'s Q, K and V (or dQ, dK, dV) rows: row i of which (0, 1, 2) at
// base + (i · 3 + which) · C + h · HS.
template <typename T>
struct Heads {
  T* base;  // qkv + b · T · 3C
  int64_t C, h, HS;
  T* row(int which, int64_t i) const { return base + (i * 3 + which) * C + h * HS; }
};

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

template <typename T>
void load_rows(std::vector<float>& dst, const Heads<const T>& x, int which, int64_t i0, int64_t i1) {
  dst.resize(size_t((i1 - i0) * x.HS));
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t d = 0; d < x.HS; ++d) dst[size_t((i - i0) * x.HS + d)] = to_float(x.row(which, i)[d]);
}

}  // namespace

template <typename T>
void attention_forward(const AttentionForward<T>& a, int64_t tile) {
  const AttentionShape& s = a.s;
  const int64_t T_ = s.T, HS = s.HS, C = s.NH * s.HS;
  const uint64_t key = attention_dropout_key(a.seed, a.offset);
  const float keep_scale = s.dropout > 0 ? 1.0f / (1.0f - s.dropout) : 1.0f;
  cpu_launch(s.B * s.NH, [&](int64_t e) {
    const int64_t b = e / s.NH, h = e % s.NH;
    const Heads<const T> x{a.qkv + b * T_ * 3 * C, C, h, HS};
    const MaskView mask = mask_of<T>(s, a.key_mask, b);
    std::vector<float> q, k, v, m, l, acc, p(static_cast<size_t>(tile));
    for (int64_t i0 = 0; i0 < T_; i0 += tile) {
      const int64_t i1 = std::min(T_, i0 + tile), rows = i1 - i0;
      load_rows(q, x, 0, i0, i1);
      m.assign(size_t(rows), -INFINITY), l.assign(size_t(rows), 0.0f), acc.assign(size_t(rows * HS), 0.0f);
      const int64_t jend = mask.causal ? i1 : T_;
      for (int64_t j0 = 0; j0 < jend; j0 += tile) {
        const int64_t j1 = std::min(jend, j0 + tile);
        load_rows(k, x, 1, j0, j1), load_rows(v, x, 2, j0, j1);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0;
          float mx = m[size_t(r)];
          for (int64_t j = j0; j < j1; ++j) {
            if (mask.excluded(i, j)) {
              p[size_t(j - j0)] = -INFINITY;
              continue;
            }
            p[size_t(j - j0)] = s.scale * dot(&q[size_t(r * HS)], &k[size_t((j - j0) * HS)], HS) + mask.add(i, j);
            mx = std::max(mx, p[size_t(j - j0)]);
          }
          if (mx == -INFINITY) continue;  // every key of this tile excluded, none before
          // The running max grew: what was summed so far was relative to the old one.
          const float rescale = std::exp(m[size_t(r)] - mx);
          l[size_t(r)] *= rescale;
          for (int64_t d = 0; d < HS; ++d) acc[size_t(r * HS + d)] *= rescale;
          m[size_t(r)] = mx;
          for (int64_t j = j0; j < j1; ++j) {
            if (mask.excluded(i, j)) continue;
            const float pj = std::exp(p[size_t(j - j0)] - mx);
            l[size_t(r)] += pj;
            const int64_t index = (e * T_ + i) * T_ + j;
            if (s.dropout > 0 && !kernels::dropout_keep(key, index, s.dropout)) continue;
            const float w = pj * keep_scale;
            for (int64_t d = 0; d < HS; ++d) acc[size_t(r * HS + d)] += w * v[size_t((j - j0) * HS + d)];
          }
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i - i0;
        T* o = a.out + (b * T_ + i) * C + h * HS;
        const float inv = 1.0f / l[size_t(r)];
        for (int64_t d = 0; d < HS; ++d) o[d] = from_float<T>(acc[size_t(r * HS + d)] * inv);
        a.lse[e * T_ + i] = m[size_t(r)] + std::log(l[size_t(r)]);
      }
    }
  });
}

template <typename T>
void attention_backward(const AttentionBackward<T>& a, int64_t tile) {
  const AttentionShape& s = a.s;
  const int64_t T_ = s.T, HS = s.HS, C = s.NH * s.HS;
  const uint64_t key = attention_dropout_key(a.seed, a.offset);
  const float keep_scale = s.dropout > 0 ? 1.0f / (1.0f - s.dropout) : 1.0f;
  cpu_launch(s.B * s.NH, [&](int64_t e) {
    const int64_t b = e / s.NH, h = e % s.NH;
    const Heads<const T> x{a.qkv + b * T_ * 3 * C, C, h, HS};
    const Heads<T> dx{a.dqkv + b * T_ * 3 * C, C, h, HS};
    const MaskView mask = mask_of<T>(s, a.key_mask, b);
    std::vector<float> q, k, v, dq(static_cast<size_t>(T_ * HS), 0.0f), dk(static_cast<size_t>(T_ * HS), 0.0f), dv(static_cast<size_t>(T_ * HS), 0.0f);
    std::vector<float> dO(static_cast<size_t>(T_ * HS)), D(static_cast<size_t>(T_));
    load_rows(q, x, 0, 0, T_), load_rows(k, x, 1, 0, T_), load_rows(v, x, 2, 0, T_);
    for (int64_t i = 0; i < T_; ++i) {  // D_i = Σ dO · O = Σ_j P_ij · dP_ij, dropout included
      const T *go = a.dout + (b * T_ + i) * C + h * HS, *o = a.out + (b * T_ + i) * C + h * HS;
      float sum = 0;
      for (int64_t d = 0; d < HS; ++d) dO[size_t(i * HS + d)] = to_float(go[d]), sum += to_float(go[d]) * to_float(o[d]);
      D[size_t(i)] = sum;
    }
    for (int64_t j0 = 0; j0 < T_; j0 += tile) {
      const int64_t j1 = std::min(T_, j0 + tile);
      for (int64_t i0 = mask.causal ? j0 / tile * tile : 0; i0 < T_; i0 += tile) {
        const int64_t i1 = std::min(T_, i0 + tile);
        for (int64_t i = i0; i < i1; ++i) {
          const float lse = a.lse[e * T_ + i];
          for (int64_t j = j0; j < j1; ++j) {
            if (mask.excluded(i, j)) continue;
            const float p = std::exp(s.scale * dot(&q[size_t(i * HS)], &k[size_t(j * HS)], HS) + mask.add(i, j) - lse);
            const bool kept = s.dropout <= 0 || kernels::dropout_keep(key, (e * T_ + i) * T_ + j, s.dropout);
            const float pd = kept ? p * keep_scale : 0.0f;
            for (int64_t d = 0; d < HS; ++d) dv[size_t(j * HS + d)] += pd * dO[size_t(i * HS + d)];
            const float dp = kept ? dot(&dO[size_t(i * HS)], &v[size_t(j * HS)], HS) * keep_scale : 0.0f;
            const float ds = s.scale * p * (dp - D[size_t(i)]);
            for (int64_t d = 0; d < HS; ++d) {
              dq[size_t(i * HS + d)] += ds * k[size_t(j * HS + d)];
              dk[size_t(j * HS + d)] += ds * q[size_t(i * HS + d)];
            }
          }
        }
      }
    }
    for (int64_t i = 0; i < T_; ++i)
      for (int64_t d = 0; d < HS; ++d) {
        dx.row(0, i)[d] = from_float<T>(dq[size_t(i * HS + d)]);
        dx.row(1, i)[d] = from_float<T>(dk[size_t(i * HS + d)]);
        dx.row(2, i)[d] = from_float<T>(dv[size_t(i * HS + d)]);
      }
  });
}

#define PRETRAIN_INSTANTIATE(T)                                                 \
  template void attention_forward<T>(const AttentionForward<T>&, int64_t); \
  template void attention_backward<T>(const AttentionBackward<T>&, int64_t);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace cpu

namespace {
void check_shape(const AttentionShape& s, const int32_t* key_mask) {
  if (s.B < 0 || s.T < 0 || s.NH <= 0 || s.HS <= 0) throw Error(cat("attention: bad shape B ", s.B, " T ", s.T, " heads ", s.NH, " head size ", s.HS));
  if ((s.mask == AttentionMask::padding || s.mask == AttentionMask::packed) && !key_mask)
    throw Error("attention: a padding or packed mask needs the key mask");
  if (!(s.dropout >= 0.0f && s.dropout < 1.0f)) throw Error(cat("attention: dropout ", s.dropout, " is not in [0, 1)"));
}
}  // namespace

Attention::Attention(const Device& d, Options options) : device_(d), options_(options) {
  if (options_.tile <= 0) throw Error("attention: the tile must be positive");
#if PRETRAIN_HAVE_CUDA
  if (d.cuda) impl_ = cuda::attention_create(d, options_);
#endif
}

Attention::~Attention() {
#if PRETRAIN_HAVE_CUDA
  cuda::attention_destroy(impl_);
#endif
}

template <typename T>
void Attention::forward(const AttentionForward<T>& a) {
  check_shape(a.s, a.key_mask);
  if (a.s.B * a.s.T == 0) return;
  PRETRAIN_OPS_DISPATCH(device_, last_path_ = cuda::attention_forward(*impl_, a, warnings_),
                        (cpu::attention_forward(a, options_.tile), last_path_ = "cpu flash"));
}

template <typename T>
void Attention::backward(const AttentionBackward<T>& a) {
  check_shape(a.s, a.key_mask);
  if (a.s.B * a.s.T == 0) return;
  PRETRAIN_OPS_DISPATCH(device_, last_path_ = cuda::attention_backward(*impl_, a, warnings_),
                        (cpu::attention_backward(a, options_.tile), last_path_ = "cpu flash"));
}

#define PRETRAIN_INSTANTIATE(T)                                          \
  template void Attention::forward<T>(const AttentionForward<T>&); \
  template void Attention::backward<T>(const AttentionBackward<T>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops
