// Every non-GEMM op of the trainer, written once (docs/architecture.md, "Kernels"). An op is a small struct of
// pointers and sizes with `operator()(i)` for one index of its range: an element, a row, or a
// (chunk of rows, column) pair. The CPU backend calls it from a oneTBB parallel_for, the CUDA backend from a
// grid-stride kernel (trainer/backend_cuda.cu). How each is checked: the arithmetic ops (LayerNorm,
// GELU, softmax, cross-entropy, AdamW) against naive double-precision versions in trainer/reference.h
// (tests/trainer/kernels_test.cpp); AdamW and LAMB's stages, as the optimizer runs them, against a
// double-precision reference (tests/trainer/optimizer_test.cpp) and one step of torch's AdamW and
// apex's LAMB (tests/compat/test_optimizer_torch.py); the vocabulary-shard cross-entropy and
// embedding against the single-rank ops (tests/trainer/layers_mpi_test.cpp); the rest
// (copies, gathers, scales) through the model's loss and gradients against PyTorch (tests/compat).
//
// Determinism: every output element is written by exactly one index, and every sum runs in a
// fixed order inside that index, so results do not depend on the thread count or the schedule.
// Reductions over rows (bias, LayerNorm and embedding gradients) run in two passes, as llm.c's
// bias and LayerNorm backward kernels split them: pass 1 over (chunk of kRowChunk rows, column)
// writes partial sums to a scratch buffer (neighbouring indices are neighbouring columns, so a
// GPU warp reads whole rows), pass 2 over columns adds a column's partials in chunk order. One
// index per column walking all rows would give a GPU C threads (768 for BERT base) each with N
// serial loads, which made these ops nearly all of a GPU step; the chunks are a constant, so the
// sums do not depend on the thread count either.
//
// Shapes: N = rows (batch × sequence, or masked positions), C = channels, V = vocabulary,
// T = sequence length, NH = heads. All row-major, contiguous, fp32.
#pragma once
#include <cmath>
#include <cstdint>

#include "common/hd.h"

namespace pretrain::kernels {

// Rows per partial sum of a column reduction: 64 keeps the partials at 1/64 of the input (little
// scratch, little extra traffic) while B·T = 8192 rows still give a GPU 128 × C threads.
inline constexpr int64_t kRowChunk = 64;
inline constexpr int64_t kReduceChunk = 1 << 14;  // elements per partial sum of a norm
inline constexpr float kMaskedScore = -10000.0f;  // Google BERT's additive attention mask

PRETRAIN_HD inline int64_t row_chunks(int64_t N) { return (N + kRowChunk - 1) / kRowChunk; }

// ---------------------------------------------------------------- column reductions
// Pass 2 of every column reduction: index c (of C): out[c] += Σ_k partial[k·C + c], k in order.
struct AddColumnPartials {
  float* out;
  const float* partial;  // [chunks, C]
  int64_t chunks, C;
  PRETRAIN_HD void operator()(int64_t c) const {
    float s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * C + c];
    out[c] += s;
  }
};

// ---------------------------------------------------------------- embeddings
// The position a token's row r of [N, C] reads: position_ids[r] when given (a packed row restarts
// them at each instance), else its column r mod T.
PRETRAIN_HD inline int64_t position_of(const int32_t* positions, int64_t r, int64_t T) {
  return positions ? int64_t(positions[r]) : r % T;
}

// Row r of [N, C]: out = wte[ids[r]] + wpe[position_of(r)] (+ wtt[types[r]] when BERT's token types).
// Tensor parallel (vocabulary-parallel embedding): wte holds the ids [v0, v0 + vrows) only, a row
// whose id is elsewhere gets 0 from it, and only one rank adds the positions (wpe null elsewhere),
// so the sum over the group is the whole embedding. vrows 0: wte holds every id.
struct EmbedForward {
  float* out;
  const int32_t* ids;
  const int32_t* types;  // null: no token-type embedding (GPT, or not this rank's share)
  const float *wte, *wpe, *wtt;
  int64_t T, C;
  int64_t v0 = 0, vrows = 0;
  const int32_t* positions = nullptr;  // [N] position_ids; null: r mod T
  PRETRAIN_HD void operator()(int64_t r) const {
    const int64_t id = int64_t(ids[r]) - v0;
    const float* w = vrows == 0 || (id >= 0 && id < vrows) ? wte + id * C : nullptr;
    float* o = out + r * C;
    if (!wpe) {
      for (int64_t c = 0; c < C; ++c) o[c] = w ? w[c] : 0.0f;
      return;
    }
    const float* p = wpe + position_of(positions, r, T) * C;
    if (!w) {
      if (types) {
        const float* t = wtt + int64_t(types[r]) * C;
        for (int64_t c = 0; c < C; ++c) o[c] = p[c] + t[c];
      } else {
        for (int64_t c = 0; c < C; ++c) o[c] = p[c];
      }
    } else if (types) {
      const float* t = wtt + int64_t(types[r]) * C;
      for (int64_t c = 0; c < C; ++c) o[c] = w[c] + p[c] + t[c];
    } else {
      for (int64_t c = 0; c < C; ++c) o[c] = w[c] + p[c];
    }
  }
};

// The embedding gradients: row r of dout lands in one row of each table (its id's, its position's,
// its token type's), and many rows share one (padding, [CLS], frequent words, every position B
// times), so the rows cannot be split between threads by where they land without a race. The
// host sorts the rows into groups, one per (table, table row), each listing its rows in
// increasing order (trainer/parallel/layers.cpp); a group of more than kRowChunk rows is cut into
// segments of kRowChunk. Pass 1 (EmbedSegmentSums) sums each segment per column, pass 2
// (EmbedGroupSums) adds each group's rows (a small group) or segment sums (a big one), in order,
// into its table row. Indices are group·C + column: a warp reads whole rows.
struct EmbedGroup {
  int32_t table;    // 0 words, 1 positions, 2 token types
  int32_t row;      // of that table
  int32_t begin, end;  // its rows: order[begin, end)
  int32_t segment;  // its first segment (end − begin > kRowChunk), else −1: its rows are summed directly
};
struct EmbedSegmentSums {
  float* partial;  // [segments, C]
  const float* dout;
  const int32_t* order;     // dout rows, grouped
  const int32_t* segments;  // [segments, 2]: begin and end into order (kRowChunk, a group's last fewer)
  int64_t C;
  PRETRAIN_HD void operator()(int64_t i) const {
    const int64_t k = i / C, c = i % C;
    float s = 0;
    for (int32_t j = segments[2 * k]; j < segments[2 * k + 1]; ++j) s += dout[int64_t(order[j]) * C + c];
    partial[i] = s;
  }
};
struct EmbedGroupSums {
  float *words, *positions, *types;
  const float* dout;
  const int32_t* order;
  const EmbedGroup* groups;
  const float* partial;  // EmbedSegmentSums'
  int64_t C;
  PRETRAIN_HD void operator()(int64_t i) const {
    const int64_t k = i / C, c = i % C;
    const EmbedGroup g = groups[k];
    float s = 0;
    if (g.segment < 0) {
      for (int32_t j = g.begin; j < g.end; ++j) s += dout[int64_t(order[j]) * C + c];
    } else {
      const int32_t n = (g.end - g.begin + int32_t(kRowChunk) - 1) / int32_t(kRowChunk);
      for (int32_t j = 0; j < n; ++j) s += partial[int64_t(g.segment + j) * C + c];
    }
    float* table = g.table == 0 ? words : g.table == 1 ? positions : types;
    table[int64_t(g.row) * C + c] += s;
  }
};

// ---------------------------------------------------------------- LayerNorm
// Row r: out = (x − mean) · rstd · w + b, keeping mean and rstd for the backward pass.
struct LayerNormForward {
  float *out, *mean, *rstd;
  const float *inp, *w, *b;
  int64_t C;
  float eps;
  PRETRAIN_HD void operator()(int64_t r) const {
    const float* x = inp + r * C;
    float m = 0;
    for (int64_t c = 0; c < C; ++c) m += x[c];
    m /= float(C);
    float v = 0;
    for (int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    v /= float(C);
    const float s = 1.0f / sqrtf(v + eps);
    float* o = out + r * C;
    for (int64_t c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[r] = m;
    rstd[r] = s;
  }
};

// Row r: dinp (= or +=) rstd · (dnorm − mean(dnorm) − norm · mean(dnorm · norm)), dnorm = dout · w.
struct LayerNormBackward {
  float* dinp;
  const float *dout, *inp, *w, *mean, *rstd;
  int64_t C;
  bool accumulate;
  PRETRAIN_HD void operator()(int64_t r) const {
    const float *x = inp + r * C, *d = dout + r * C;
    const float m = mean[r], s = rstd[r];
    float dn_mean = 0, dn_norm_mean = 0;
    for (int64_t c = 0; c < C; ++c) {
      const float dn = d[c] * w[c];
      dn_mean += dn;
      dn_norm_mean += dn * (x[c] - m) * s;
    }
    dn_mean /= float(C);
    dn_norm_mean /= float(C);
    float* o = dinp + r * C;
    for (int64_t c = 0; c < C; ++c) {
      const float g = s * (d[c] * w[c] - dn_mean - (x[c] - m) * s * dn_norm_mean);
      o[c] = accumulate ? o[c] + g : g;
    }
  }
};

// Pass 1 of dw += Σ_r dout · norm, db += Σ_r dout (pass 2: AddColumnPartials on each half).
// Index k·C + c: chunk k of rows, column c.
struct LayerNormParamPartials {
  float* partial;  // [2, row_chunks(N), C]: dw's partials, then db's
  const float *dout, *inp, *mean, *rstd;
  int64_t N, C;
  PRETRAIN_HD void operator()(int64_t i) const {
    const int64_t k = i / C, c = i % C, r1 = (k + 1) * kRowChunk < N ? (k + 1) * kRowChunk : N;
    float dw = 0, db = 0;
    for (int64_t r = k * kRowChunk; r < r1; ++r) {
      const float d = dout[r * C + c];
      dw += d * (inp[r * C + c] - mean[r]) * rstd[r];
      db += d;
    }
    partial[i] = dw;
    partial[row_chunks(N) * C + i] = db;
  }
};

// ---------------------------------------------------------------- bias, residual, activations
// Row r of [N, C]: out[r] = bias (a GEMM then accumulates onto it).
struct BroadcastBias {
  float* out;
  const float* bias;
  int64_t C;
  PRETRAIN_HD void operator()(int64_t r) const {
    for (int64_t c = 0; c < C; ++c) out[r * C + c] = bias[c];
  }
};

// Pass 1 of db += Σ_r dout[r] (pass 2: AddColumnPartials). Index k·C + c: chunk k of rows, column c.
struct BiasPartials {
  float* partial;  // [row_chunks(N), C]
  const float* dout;
  int64_t N, C;
  PRETRAIN_HD void operator()(int64_t i) const {
    const int64_t k = i / C, c = i % C, r1 = (k + 1) * kRowChunk < N ? (k + 1) * kRowChunk : N;
    float s = 0;
    for (int64_t r = k * kRowChunk; r < r1; ++r) s += dout[r * C + c];
    partial[i] = s;
  }
};

// Element i: out = a + b.
struct Add {
  float* out;
  const float *a, *b;
  PRETRAIN_HD void operator()(int64_t i) const { out[i] = a[i] + b[i]; }
};

// Element i: out += a.
struct Accumulate {
  float* out;
  const float* a;
  PRETRAIN_HD void operator()(int64_t i) const { out[i] += a[i]; }
};

// Element i: out = a · s.
struct Scale {
  float* out;
  const float* a;
  float s;
  PRETRAIN_HD void operator()(int64_t i) const { out[i] = a[i] * s; }
};

enum class Gelu : int { erf = 0, tanh = 1 };  // BERT's exact GELU; GPT-2's tanh approximation

PRETRAIN_HD inline float gelu(Gelu kind, float x) {
  if (kind == Gelu::erf) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  const float k = 0.79788456080286536f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

PRETRAIN_HD inline float gelu_grad(Gelu kind, float x) {
  if (kind == Gelu::erf) {
    const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return cdf + x * pdf;
  }
  const float k = 0.79788456080286536f;
  const float u = k * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  const float du = k * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// Element i: out = gelu(inp).
struct GeluForward {
  float* out;
  const float* inp;
  Gelu kind;
  PRETRAIN_HD void operator()(int64_t i) const { out[i] = gelu(kind, inp[i]); }
};

// Element i: dinp = dout · gelu'(inp). dinp may alias dout.
struct GeluBackward {
  float* dinp;
  const float *dout, *inp;
  Gelu kind;
  PRETRAIN_HD void operator()(int64_t i) const { dinp[i] = dout[i] * gelu_grad(kind, inp[i]); }
};

// Element i: out = tanh(inp) (BERT's pooler); backward dinp = dout · (1 − out²).
struct TanhForward {
  float* out;
  const float* inp;
  PRETRAIN_HD void operator()(int64_t i) const { out[i] = tanhf(inp[i]); }
};
struct TanhBackward {
  float* dinp;
  const float *dout, *out;
  PRETRAIN_HD void operator()(int64_t i) const { dinp[i] = dout[i] * (1.0f - out[i] * out[i]); }
};

// ---------------------------------------------------------------- dropout
// Whether element i survives: a counter-based hash of (key, i), so the backward pass (and a
// resumed run) recomputes the same mask without storing it. key = f(seed, step, site).
PRETRAIN_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
PRETRAIN_HD inline bool dropout_keep(uint64_t key, int64_t i, float p) {
  const uint64_t h = mix64(key + uint64_t(i) * 0x9e3779b97f4a7c15ULL);
  return float(h >> 40) * (1.0f / 16777216.0f) >= p;  // 24 random bits, uniform in [0, 1)
}

// Element i: out = keep ? inp / (1 − p) : 0. The same op on the gradients is its backward.
// offset: the index of element 0 in the whole tensor (a sequence-parallel rank's rows), so every
// layout draws the same mask.
struct Dropout {
  float* out;
  const float* inp;
  uint64_t key;
  float p;
  int64_t offset = 0;
  PRETRAIN_HD void operator()(int64_t i) const {
    out[i] = dropout_keep(key, offset + i, p) ? inp[i] * (1.0f / (1.0f - p)) : 0.0f;
  }
};

// ---------------------------------------------------------------- attention
// Row r of the [B, NH, T, T] scores (already scaled by 1/sqrt(head size)): softmax over the keys
// a query may see. Causal (GPT): keys j ≤ i, the rest get exactly 0. Padding (BERT): masked keys
// get the additive −10000 of Google's BERT.
//
// Which keys are masked, from the row's key mask km (input_mask, or a packed row's sequence_ids):
// padding keys (km[j] = 0), and for a query of an instance (km[i] ≠ 0) the keys of any other
// instance, so packed instances attend block-diagonally as if each were its own row. A padding
// query sees every real token, as unpacked padding does, so no row is all masked. For input_mask
// (0/1) this is exactly "km[j] = 0": unpacked batches get the same bits as before packing.
PRETRAIN_HD inline float key_mask_score(const int32_t* km, int64_t i, int64_t j) {
  if (!km) return 0.0f;
  const bool masked = km[j] == 0 || (km[i] != 0 && km[j] != km[i]);
  return masked ? kMaskedScore : 0.0f;
}

struct SoftmaxForward {
  float* probs;
  const float* scores;
  const int32_t* key_mask;  // [B, T] input_mask or sequence_ids; null: no padding mask
  bool causal;
  int64_t NH, T;
  PRETRAIN_HD void operator()(int64_t r) const {
    const int64_t b = r / (NH * T), i = r % T;
    const float* s = scores + r * T;
    float* p = probs + r * T;
    const int64_t n = causal ? i + 1 : T;
    const int32_t* km = key_mask ? key_mask + b * T : nullptr;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const float v = s[j] + key_mask_score(km, i, j);
      mx = v > mx ? v : mx;
    }
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float e = expf(s[j] + key_mask_score(km, i, j) - mx);
      p[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) p[j] *= inv;
    for (int64_t j = n; j < T; ++j) p[j] = 0.0f;
  }
};

// Row r: dscores = probs · (dprobs − Σ probs · dprobs). dscores may alias dprobs.
struct SoftmaxBackward {
  float* dscores;
  const float *dprobs, *probs;
  int64_t T;
  PRETRAIN_HD void operator()(int64_t r) const {
    const float *p = probs + r * T, *d = dprobs + r * T;
    float dot = 0;
    for (int64_t j = 0; j < T; ++j) dot += p[j] * d[j];
    float* o = dscores + r * T;
    for (int64_t j = 0; j < T; ++j) o[j] = p[j] * (d[j] - dot);
  }
};

// ---------------------------------------------------------------- losses
// A row whose target is negative is ignored, as PyTorch's ignore_index: loss 0, gradient 0 over
// its n logits. True when it was.
PRETRAIN_HD inline bool ignored_row(int32_t target, float& loss, float* grad, int64_t n) {
  if (target >= 0) return false;
  loss = 0;
  for (int64_t v = 0; v < n; ++v) grad[v] = 0;
  return true;
}

// Row r of [N, V] logits, overwritten with their gradient: loss[r] = logsumexp − logit[target];
// dlogits = (softmax − onehot(target)) · dloss. Rows whose target is negative are ignored (loss 0,
// gradient 0), as in PyTorch's ignore_index.
struct CrossEntropy {
  float* logits;  // in: logits, out: dloss/dlogits
  float* losses;  // [N]
  const int32_t* targets;
  int64_t V;
  float dloss;  // d(total loss)/d(loss[r]): 1/count for a mean
  PRETRAIN_HD void operator()(int64_t r) const {
    float* x = logits + r * V;
    const int32_t t = targets[r];
    if (ignored_row(t, losses[r], x, V)) return;
    float mx = -INFINITY;
    for (int64_t v = 0; v < V; ++v) mx = x[v] > mx ? x[v] : mx;
    const float target_logit = x[t];
    // One exp per logit (this row op is a third of a GPT step on the CPU with V = 50257): keep
    // exp(x − max) in place, then scale it into the softmax.
    // Σ exp in double: rounded to float once, it comes out alike whatever order the terms were
    // added in, so the vocabulary-parallel kernels below give these bits at any tensor size.
    double total = 0;
    for (int64_t v = 0; v < V; ++v) {
      x[v] = expf(x[v] - mx);
      total += double(x[v]);
    }
    const float sum = float(total);
    losses[r] = logf(sum) + mx - target_logit;
    const float scale = dloss / sum;
    for (int64_t v = 0; v < V; ++v) x[v] *= scale;
    x[t] -= dloss;
  }
};

// The vocabulary-parallel cross-entropy (Megatron's): each tensor rank holds the logits of the ids
// [v0, v0 + Vl) of a row, the ids ≥ V being padding left out of the softmax. Three row ops with
// reductions over the group between them: the shard's max and target logit (0 when the target is
// elsewhere) → max and sum over ranks → the shard's Σ exp(x − max) → sum over ranks → the loss and,
// in place, the gradient of the shard's logits. Rows whose target is negative are ignored.
struct VocabShardMax {
  const float* logits;
  float *max, *target_logit;
  const int32_t* targets;
  int64_t Vl, v0, V;
  PRETRAIN_HD void operator()(int64_t r) const {
    const float* x = logits + r * Vl;
    const int64_t real = V - v0 < Vl ? (V - v0 > 0 ? V - v0 : 0) : Vl;
    float mx = -INFINITY;
    for (int64_t v = 0; v < real; ++v) mx = x[v] > mx ? x[v] : mx;
    max[r] = mx;
    const int64_t t = int64_t(targets[r]) - v0;
    target_logit[r] = targets[r] >= 0 && t >= 0 && t < real ? x[t] : 0.0f;
  }
};
struct VocabShardSumExp {
  const float* logits;
  const float* max;
  double* sum;  // the shard's part of the row's Σ exp, in double (see CrossEntropy)
  int64_t Vl, v0, V;
  PRETRAIN_HD void operator()(int64_t r) const {
    const float* x = logits + r * Vl;
    const int64_t real = V - v0 < Vl ? (V - v0 > 0 ? V - v0 : 0) : Vl;
    double s = 0;
    for (int64_t v = 0; v < real; ++v) s += double(expf(x[v] - max[r]));
    sum[r] = s;
  }
};
struct VocabShardLoss {
  float* logits;  // in: the shard's logits, out: their gradient
  float* losses;
  const int32_t* targets;
  const float *max, *target_logit;
  const double* sum;
  int64_t Vl, v0, V;
  float dloss;
  PRETRAIN_HD void operator()(int64_t r) const {
    float* x = logits + r * Vl;
    const int32_t t = targets[r];
    if (ignored_row(t, losses[r], x, Vl)) return;
    const int64_t real = V - v0 < Vl ? (V - v0 > 0 ? V - v0 : 0) : Vl;
    const float total = float(sum[r]);
    losses[r] = logf(total) + max[r] - target_logit[r];
    const float scale = dloss / total;
    for (int64_t v = 0; v < real; ++v) x[v] = expf(x[v] - max[r]) * scale;
    for (int64_t v = real; v < Vl; ++v) x[v] = 0;
    const int64_t local = int64_t(t) - v0;
    if (local >= 0 && local < real) x[local] -= dloss;
  }
};

// ---------------------------------------------------------------- gathers
// Row r: out[r] = inp[rows[r]] (BERT's MLM head runs on the masked positions only).
struct GatherRows {
  float* out;
  const float* inp;
  const int32_t* rows;
  int64_t C;
  PRETRAIN_HD void operator()(int64_t r) const {
    const float* s = inp + int64_t(rows[r]) * C;
    for (int64_t c = 0; c < C; ++c) out[r * C + c] = s[c];
  }
};
// Row r: out[rows[r]] += inp[r], skipped where targets[r] < 0 (a padding slot, whose row may
// repeat); the other rows are distinct, so no two indices touch the same row.
struct ScatterAddRows {
  float* out;
  const float* inp;
  const int32_t* rows;
  const int32_t* targets;  // null: every row counts
  int64_t C;
  PRETRAIN_HD void operator()(int64_t r) const {
    if (targets && targets[r] < 0) return;
    float* d = out + int64_t(rows[r]) * C;
    for (int64_t c = 0; c < C; ++c) d[c] += inp[r * C + c];
  }
};

// Slot i of [B, P] predictions (NVIDIA's masked_lm_positions / masked_lm_ids, 0-padded): the row of
// the [B·T, C] hidden states it reads and its target. A prediction counts as run_pretraining.py
// counts it: when positions 0..p of its row are all non-zero (position 0 is [CLS], never masked);
// the others get target −1 and row b·T, which the loss and the scatter ignore.
struct MaskedPositions {
  int32_t *rows, *targets;
  const int32_t *positions, *ids;
  int64_t P, T;
  PRETRAIN_HD void operator()(int64_t i) const {
    const int64_t b = i / P, p = i % P;
    bool valid = true;
    for (int64_t q = 0; q <= p; ++q) valid = valid && positions[b * P + q] != 0;
    rows[i] = int32_t(b * T + (valid ? positions[i] : 0));
    targets[i] = valid ? ids[i] : -1;
  }
};

// Slot i of [B, K] NSP slots: the row of the [B·T, C] hidden states its pooler reads, b·T + its
// [CLS] position (next_sentence_positions; null: position 0, K = 1). An empty slot (label −1)
// reads its row's [CLS] too; the loss and the scatter ignore it.
struct NspRows {
  int32_t* rows;
  const int32_t* positions;  // [B, K]; null: every row's position 0
  int64_t K, T;
  PRETRAIN_HD void operator()(int64_t i) const {
    rows[i] = int32_t((i / K) * T + (positions ? positions[i] : 0));
  }
};

// ---------------------------------------------------------------- reduced precision
// The nearest bf16 / fp16 value of x (round to nearest, ties to even), as fp32: what a bf16 or
// fp16 GEMM sees of its inputs. Scaling by a power of two is exact, so rintf does the rounding.
PRETRAIN_HD inline float round_to_bits(float x, int mantissa_bits, int min_exponent) {
  if (!(x == x) || x == 0.0f || x - x != 0.0f) return x;  // NaN, ±0, ±Inf
  int e;
  frexpf(x, &e);  // |x| = m · 2^e, m in [0.5, 1)
  const int lead = e - 1 > min_exponent ? e - 1 : min_exponent;  // subnormals share min_exponent's quantum
  const float quantum = ldexpf(1.0f, lead - mantissa_bits);
  return rintf(x / quantum) * quantum;
}
PRETRAIN_HD inline float round_to_bf16(float x) { return round_to_bits(x, 7, -126); }
PRETRAIN_HD inline float round_to_fp16(float x) {
  const float r = round_to_bits(x, 10, -14);
  return r >= 65520.0f ? INFINITY : r <= -65520.0f ? -INFINITY : r;  // fp16's largest is 65504
}

// Element i of a rows × cols view with row stride ld: out[i] (contiguous) = round(in[r·ld + c]).
// The CPU backend's bf16/fp16 GEMMs round their operands with this before sgemm.
struct RoundOperand {
  float* out;
  const float* in;
  int64_t cols, ld;
  bool bf16;
  PRETRAIN_HD void operator()(int64_t i) const {
    const float x = in[(i / cols) * ld + i % cols];
    out[i] = bf16 ? round_to_bf16(x) : round_to_fp16(x);
  }
};

// ---------------------------------------------------------------- optimizers and norms
// Chunk k: partial[k] = Σ x² over its elements in order (double, so a norm over 10⁸ parameters
// does not lose the small terms). The caller adds the partials in order. The chunk table says
// which elements, so one launch covers every tensor of the model (a launch, an allocation and a
// copy per tensor cost a GPU more than the sums).
struct ChunkRef {
  const float* x;
  int64_t n;  // ≤ kReduceChunk
};
struct SumSquaresChunks {
  double* partial;
  const ChunkRef* chunks;
  PRETRAIN_HD void operator()(int64_t k) const {
    double s = 0;
    for (int64_t i = 0; i < chunks[k].n; ++i) s += double(chunks[k].x[i]) * double(chunks[k].x[i]);
    partial[k] = s;
  }
};

// Element i: AdamW as torch.optim.AdamW computes it (decoupled decay first, then the Adam step
// with bias corrections); g is scaled by grad_scale (clipping, loss scale) first.
struct AdamW {
  float *p, *m, *v;
  const float* g;
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;  // 1 − β^t
  PRETRAIN_HD void operator()(int64_t i) const {
    const float grad = g[i] * grad_scale;
    float param = p[i] * (1.0f - lr * weight_decay);
    const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / sqrtf(bias_correction2) + eps;
    param -= (lr / bias_correction1) * (mi / denom);
    p[i] = param;
  }
};

// LAMB as NVIDIA's BERT uses it (apex FusedLAMB): stage 1 updates the moments and writes the
// update direction u = m̂ / (sqrt(v̂) + eps) + wd · p; stage 2 (after the per-tensor norms of p and
// u) applies p −= lr · trust · u, trust = ‖p‖ / ‖u‖ (1 when either is 0).
struct LambStage1 {
  float *update, *m, *v;
  const float *p, *g;
  float beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;
  PRETRAIN_HD void operator()(int64_t i) const {
    const float grad = g[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    update[i] = (mi / bias_correction1) / (sqrtf(vi / bias_correction2) + eps) + weight_decay * p[i];
  }
};
struct LambStage2 {
  float* p;
  const float* update;
  float step;  // lr · trust ratio
  PRETRAIN_HD void operator()(int64_t i) const { p[i] -= step * update[i]; }
};

}  // namespace pretrain::kernels

// Every op above, for the CUDA backend's explicit instantiations (trainer/backend_cuda.cu).
#define PRETRAIN_TRAINER_KERNELS(X)                                                               \
  X(EmbedForward) X(EmbedSegmentSums) X(EmbedGroupSums) X(LayerNormForward) X(LayerNormBackward)         \
  X(LayerNormParamPartials) X(AddColumnPartials) X(BroadcastBias) X(BiasPartials) X(Add) X(Accumulate) X(Scale)        \
  X(GeluForward) X(GeluBackward) X(TanhForward) X(TanhBackward) X(Dropout) X(SoftmaxForward)      \
  X(SoftmaxBackward) X(CrossEntropy) X(VocabShardMax) X(VocabShardSumExp) X(VocabShardLoss) X(GatherRows) X(ScatterAddRows) X(SumSquaresChunks) X(AdamW)     \
  X(LambStage1) X(LambStage2) X(MaskedPositions) X(NspRows) X(RoundOperand)
