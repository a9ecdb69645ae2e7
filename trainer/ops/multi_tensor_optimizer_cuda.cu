// The multi-tensor optimizer on CUDA (the op and its CPU path: multi_tensor_optimizer.h). One block
// of kThreads per chunk of ≤ kernels::kReduceChunk elements; each thread takes elements
// threadIdx.x, + kThreads, … (coalesced), running the element updates of multi_tensor_optimizer.h
// and writing the bf16 working copy in the same pass. Σ x² per chunk: each
// thread in double over its elements, then the block's fixed tree; per tensor: one thread adding
// its chunks in order; the global sum and the clip: one thread. Every kernel that updates reads
// OptimizerScalars::finite on the device and returns when the norm was NaN or Inf.
#include "trainer/ops/cuda_util.cuh"
#include "trainer/ops/multi_tensor_optimizer.h"

namespace pretrain::ops::cuda {
namespace {

constexpr int kThreads = 256;

__device__ double block_sum_double(double x, double* shared) {
  x = warp_sum(x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  double s = 0;
  for (int w = 0; w < kThreads / 32; ++w) s += shared[w];
  __syncthreads();
  return s;
}

// partial[k] (and partial[chunks + k] with y) = Σ x² over chunk k.
__global__ void __launch_bounds__(kThreads) chunk_squares_kernel(MultiTensorTables t, const float* x, const float* y) {
  __shared__ double shared[kThreads / 32];
  const OptChunk c = t.chunks[blockIdx.x];
  double sx = 0, sy = 0;
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    const double a = x[c.begin + i];
    sx += a * a;
    if (y) {
      const double b = y[c.begin - t.moments_base + i];
      sy += b * b;
    }
  }
  sx = block_sum_double(sx, shared);
  if (y) sy = block_sum_double(sy, shared);
  if (threadIdx.x == 0) {
    t.partial[blockIdx.x] = sx;
    if (y) t.partial[t.chunk_count + blockIdx.x] = sy;
  }
}

// out[t] = its chunks' sums in order (with y: out[2t] for x, out[2t + 1] for y).
__global__ void tensor_sums_kernel(MultiTensorTables t, bool pairs, double* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= t.tensor_count) return;
  const OptTensorInfo info = t.tensors[i];
  double sx = 0, sy = 0;
  for (int32_t k = info.first_chunk; k < info.first_chunk + info.chunk_count; ++k) {
    sx += t.partial[k];
    if (pairs) sy += t.partial[t.chunk_count + k];
  }
  if (pairs)
    out[2 * i] = sx, out[2 * i + 1] = sy;
  else
    out[i] = sx;
}

__global__ void global_sum_kernel(MultiTensorTables t, const double* sums, OptimizerScalars* s) {
  double g2 = 0;
  for (int64_t i = 0; i < t.tensor_count; ++i)
    if (t.tensors[i].counted) g2 += sums[i];
  s->g2 = g2;
}

__global__ void clip_kernel(OptimizerScalars* s, double unscale, double max_grad_norm, ClipRule rule) {
  finish_clip(*s, unscale, max_grad_norm, rule);
}

__global__ void __launch_bounds__(kThreads) adamw_kernel(MultiTensorTables t, float* p, float* m, float* v,
                                                         const float* g, bf16* working, AdamHyper h,
                                                         const OptimizerScalars* s) {
  if (!s->finite) return;
  const OptChunk c = t.chunks[blockIdx.x];
  const float wd = t.tensors[c.tensor].decay ? h.weight_decay : 0.0f;
  const int64_t mo = c.begin - t.moments_base;
  const float grad_scale = s->grad_scale;
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    float pi = p[c.begin + i], mi = m[mo + i], vi = v[mo + i];
    adamw_element(pi, mi, vi, g[c.begin + i], h, wd, grad_scale);
    p[c.begin + i] = pi, m[mo + i] = mi, v[mo + i] = vi;
    if (working) working[c.begin + i] = bf16::from_float(pi);
  }
}

__global__ void __launch_bounds__(kThreads) lamb_stage1_kernel(MultiTensorTables t, float* update, float* m, float* v,
                                                               const float* p, const float* g, AdamHyper h,
                                                               const OptimizerScalars* s) {
  if (!s->finite) return;
  const OptChunk c = t.chunks[blockIdx.x];
  const float wd = t.tensors[c.tensor].decay ? h.weight_decay : 0.0f;
  const int64_t mo = c.begin - t.moments_base;
  const float grad_scale = s->grad_scale;
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    float mi = m[mo + i], vi = v[mo + i];
    update[mo + i] = lamb_update_element(p[c.begin + i], mi, vi, g[c.begin + i], h, wd, grad_scale);
    m[mo + i] = mi, v[mo + i] = vi;
  }
}

__global__ void __launch_bounds__(kThreads) lamb_stage2_kernel(MultiTensorTables t, float* p, const float* update,
                                                               bf16* working, const double* norms, double lr,
                                                               bool weight_decay, const OptimizerScalars* s) {
  if (!s->finite) return;
  const OptChunk c = t.chunks[blockIdx.x];
  const bool decay = t.tensors[c.tensor].decay && weight_decay;
  const float step = lamb_step(lr, norms, c.tensor, decay);
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    const float pi = p[c.begin + i] - step * update[c.begin - t.moments_base + i];
    p[c.begin + i] = pi;
    if (working) working[c.begin + i] = bf16::from_float(pi);
  }
}

}  // namespace

void sum_squares_by_tensor(const Device& d, const MultiTensorTables& t, const float* x, const float* y, double* out) {
  if (t.chunk_count > 0) {
    chunk_squares_kernel<<<unsigned(t.chunk_count), kThreads, 0, stream_of(d)>>>(t, x, y);
    check_launch("multi-tensor sum of squares");
  }
  if (t.tensor_count > 0) {
    // y: the partials of both halves; t.partial holds chunk_count · 2 doubles then (see the table).
    tensor_sums_kernel<<<unsigned(ceil_div(t.tensor_count, 128)), 128, 0, stream_of(d)>>>(t, y != nullptr, out);
    check_launch("multi-tensor sums per tensor");
  }
}

void global_sum(const Device& d, const MultiTensorTables& t, const double* tensor_sums, OptimizerScalars* s) {
  global_sum_kernel<<<1, 1, 0, stream_of(d)>>>(t, tensor_sums, s);
  check_launch("multi-tensor global sum");
}

void clip(const Device& d, OptimizerScalars* s, double unscale, double max_grad_norm, ClipRule rule) {
  clip_kernel<<<1, 1, 0, stream_of(d)>>>(s, unscale, max_grad_norm, rule);
  check_launch("multi-tensor clip");
}

void adamw(const Device& d, const MultiTensorTables& t, float* p, float* m, float* v, const float* g, bf16* working,
           const AdamHyper& h, const OptimizerScalars* s) {
  if (t.chunk_count == 0) return;
  adamw_kernel<<<unsigned(t.chunk_count), kThreads, 0, stream_of(d)>>>(t, p, m, v, g, working, h, s);
  check_launch("multi-tensor AdamW");
}

void lamb_stage1(const Device& d, const MultiTensorTables& t, float* update, float* m, float* v, const float* p,
                 const float* g, const AdamHyper& h, const OptimizerScalars* s) {
  if (t.chunk_count == 0) return;
  lamb_stage1_kernel<<<unsigned(t.chunk_count), kThreads, 0, stream_of(d)>>>(t, update, m, v, p, g, h, s);
  check_launch("multi-tensor LAMB stage 1");
}

void lamb_stage2(const Device& d, const MultiTensorTables& t, float* p, const float* update, bf16* working,
                 const double* norms, double lr, bool weight_decay, const OptimizerScalars* s) {
  if (t.chunk_count == 0) return;
  lamb_stage2_kernel<<<unsigned(t.chunk_count), kThreads, 0, stream_of(d)>>>(t, p, update, working, norms, lr,
                                                                             weight_decay, s);
  check_launch("multi-tensor LAMB stage 2");
}

}  // namespace pretrain::ops::cuda
