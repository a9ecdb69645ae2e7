// AdamW and LAMB over the whole parameter arena in one launch each (issue #47: no launch per
// tensor, no host round trip in the step), with the arithmetic of trainer/optimizer.cpp: its
// element updates (adamw_element, lamb_update_element below), the global norm as sum_squares sums it,
// torch's and apex's clipping rules and LAMB's trust ratios, all formed on the device from device
// scalars. On the CPU it gives Optimizer::step's bits (tests/trainer/multi_tensor_optimizer_test.cpp
// steps both on the same model); the CUDA kernels are tested against it (tests/gpu/).
//
// The work list is a chunk table, as kernels::SumSquaresChunks' (uploaded once): every tensor cut
// into chunks of kernels::kReduceChunk elements, each chunk one block on the GPU (one task on the
// CPU). A step:
//   grad_norm(g)   Σ g² per chunk (double), per tensor (its chunks in order), then over the counted
//                  tensors in order → scalars.g2. [The caller all-reduces g2 over ZeRO ranks and the
//                  model group, on the device, as Optimizer does on the host.]
//   clip(...)      scalars.norm = √g2 · unscale, finite, clip (torch: max / (norm + 1e-6) capped at 1;
//                  apex LAMB: max / norm above max), grad_scale = float(clip · unscale): one thread.
//   adamw(...)     p, m, v updated and the bf16 working copy of p written, one pass; nothing when
//                  the norm is not finite (read on the device).
//   lamb_stage1 → lamb_norms (‖p‖², ‖u‖² per tensor; [the caller all-reduces them over ZeRO ranks
//                  and, for tensors cut across it, the tensor group]) → lamb_stage2 (trust ratio per
//                  tensor from the norms, p −= lr · trust · u, the working copy written).
// The bias corrections and the learning rate come from the host (they depend on the step only).
// Tensors: every parameter in order, the same list on every rank; under ZeRO each as its part in
// this rank's shard (numel 0 when none), moments indexed from the shard's start (moments_base).
// Determinism: chunk sums are fixed trees (GPU) or loops (CPU); per-tensor and global sums run in
// order on one thread: the same bits at any launch configuration, run to run.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "trainer/backend.h"
#include "trainer/bf16.h"

namespace pretrain::ops {

struct OptTensor {
  int64_t offset = 0, numel = 0;  // in the arena of weights and gradients
  bool decay = true;              // weight decay (and LAMB's trust ratio) applies
  bool counted = true;            // its gradient counts in the global norm (a shard counts it once)
};

struct OptChunk {
  int64_t begin;   // arena offset of its first element
  int32_t n;       // ≤ kernels::kReduceChunk
  int32_t tensor;  // index into the tensor list
};

// What a step computes on the device, read by the update kernels and, when logged, the host.
struct OptimizerScalars {
  double g2 = 0;         // Σ g² (this rank's, then the reduced one)
  double norm = 0;       // √g2 · unscale: the global gradient norm before clipping
  double clip = 1;       // the clipping factor
  float grad_scale = 1;  // float(clip · unscale): each gradient's factor
  int32_t finite = 1;    // 0: the norm is NaN or Inf and nothing is updated
};

enum class ClipRule { torch, apex_lamb };

// A tensor as the kernels see it: its place, its chunks (first, count) and flags.
struct OptTensorInfo {
  int64_t offset, numel;
  int32_t first_chunk, chunk_count;
  int32_t decay, counted;
};

namespace cuda {
struct MultiTensorTables {
  const OptChunk* chunks;
  const OptTensorInfo* tensors;
  int64_t chunk_count, tensor_count, moments_base;
  double* partial;
};
}  // namespace cuda

struct AdamHyper {
  float lr, beta1, beta2, eps, weight_decay;  // weight_decay applies to decayed tensors only
  float bias_correction1, bias_correction2;   // 1 − βᵗ, formed on the host as Optimizer does
};

class MultiTensorOptimizer {
 public:
  MultiTensorOptimizer(const Device& d, std::vector<OptTensor> tensors, int64_t moments_base = 0);
  MultiTensorOptimizer(const MultiTensorOptimizer&) = delete;
  MultiTensorOptimizer& operator=(const MultiTensorOptimizer&) = delete;

  // Every pointer is device memory (host memory on the CPU); scalars one OptimizerScalars there.
  void grad_norm(const float* grads, OptimizerScalars* scalars);
  void clip(OptimizerScalars* scalars, double unscale, double max_grad_norm, ClipRule rule);
  void adamw(float* p, float* m, float* v, const float* g, bf16* working, const AdamHyper& h,
             const OptimizerScalars* scalars);
  void lamb_stage1(float* update, float* m, float* v, const float* p, const float* g, const AdamHyper& h,
                   const OptimizerScalars* scalars);
  void lamb_norms(const float* p, const float* update, double* norms);  // norms: [2 · tensors], ‖p‖² then ‖u‖²
  // weight_decay: the config's; a tensor takes the trust ratio when it decays and weight_decay ≠ 0.
  void lamb_stage2(float* p, const float* update, bf16* working, const double* norms, double lr, float weight_decay,
                   const OptimizerScalars* scalars);

  const std::vector<OptChunk>& chunks() const { return chunks_; }
  int64_t tensors() const { return int64_t(tensors_.size()); }

 private:
  cuda::MultiTensorTables tables() const;

  const Device& d_;
  std::vector<OptTensor> tensors_;
  int64_t moments_base_;
  std::vector<OptChunk> chunks_;
  std::vector<OptTensorInfo> info_;
  DeviceBuffer<OptChunk> chunk_table_;
  DeviceBuffer<OptTensorInfo> tensor_table_;
  DeviceBuffer<double> partial_;  // per chunk (two for LAMB's norms)
  DeviceBuffer<double> sums_;     // per tensor
};

namespace cuda {
void sum_squares_by_tensor(const Device& d, const MultiTensorTables& t, const float* x, const float* y, double* out);
void global_sum(const Device& d, const MultiTensorTables& t, const double* tensor_sums, OptimizerScalars* s);
void clip(const Device& d, OptimizerScalars* s, double unscale, double max_grad_norm, ClipRule rule);
void adamw(const Device& d, const MultiTensorTables& t, float* p, float* m, float* v, const float* g, bf16* working,
           const AdamHyper& h, const OptimizerScalars* s);
void lamb_stage1(const Device& d, const MultiTensorTables& t, float* update, float* m, float* v, const float* p,
                 const float* g, const AdamHyper& h, const OptimizerScalars* s);
void lamb_stage2(const Device& d, const MultiTensorTables& t, float* p, const float* update, bf16* working,
                 const double* norms, double lr, bool weight_decay, const OptimizerScalars* s);
}  // namespace cuda

// The clip rule's arithmetic (Optimizer::step's, in double), for both backends.
PRETRAIN_HD inline void finish_clip(OptimizerScalars& s, double unscale, double max_grad_norm, ClipRule rule) {
  s.norm = sqrt(s.g2) * unscale;
  s.finite = s.norm - s.norm == 0.0;  // false for NaN and ±Inf
  s.clip = 1.0;
  if (s.finite && max_grad_norm > 0) {
    if (rule == ClipRule::torch) {
      const double coef = max_grad_norm / (s.norm + 1e-6);
      s.clip = coef < 1.0 ? coef : 1.0;
    } else if (s.norm > max_grad_norm) {
      s.clip = max_grad_norm / s.norm;
    }
  }
  s.grad_scale = float(s.clip * unscale);
}

// The element updates, Optimizer's arithmetic expression for expression (torch.optim.AdamW's and
// apex FusedLAMB's; the per-tensor kernels::AdamW / LambStage1 / LambStage2 of today's Optimizer,
// which the CPU test holds these to bit for bit). g is multiplied by grad_scale first.
PRETRAIN_HD inline void adamw_element(float& p, float& m, float& v, float g, const AdamHyper& h, float wd, float grad_scale) {
  const float grad = g * grad_scale;
  float param = p * (1.0f - h.lr * wd);
  const float mi = h.beta1 * m + (1.0f - h.beta1) * grad;
  const float vi = h.beta2 * v + (1.0f - h.beta2) * grad * grad;
  m = mi, v = vi;
  const float denom = sqrtf(vi) / sqrtf(h.bias_correction2) + h.eps;
  param -= (h.lr / h.bias_correction1) * (mi / denom);
  p = param;
}
PRETRAIN_HD inline float lamb_update_element(float p, float& m, float& v, float g, const AdamHyper& h, float wd,
                                             float grad_scale) {
  const float grad = g * grad_scale;
  const float mi = h.beta1 * m + (1.0f - h.beta1) * grad;
  const float vi = h.beta2 * v + (1.0f - h.beta2) * grad * grad;
  m = mi, v = vi;
  return (mi / h.bias_correction1) / (sqrtf(vi / h.bias_correction2) + h.eps) + wd * p;
}

// LAMB's step of tensor t from its norms (apex: the trust ratio on decayed tensors only).
PRETRAIN_HD inline float lamb_step(double lr, const double* norms, int64_t t, bool decay) {
  double trust = 1.0;
  if (decay) {
    const double w = sqrt(norms[2 * t]), u = sqrt(norms[2 * t + 1]);
    if (w > 0 && u > 0) trust = w / u;
  }
  return float(lr * trust);
}

}  // namespace pretrain::ops
