// The multi-tensor optimizer's tables, its CPU path (Optimizer::step's arithmetic, chunk by chunk)
// and the dispatch to multi_tensor_optimizer_cuda.cu.
#include "trainer/ops/multi_tensor_optimizer.h"

#include <algorithm>

#include "trainer/kernels.h"
#include "trainer/ops/dispatch.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

MultiTensorOptimizer::MultiTensorOptimizer(const Device& d, std::vector<OptTensor> tensors, int64_t moments_base)
    : d_(d), tensors_(std::move(tensors)), moments_base_(moments_base) {
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const OptTensor& x = tensors_[t];
    OptTensorInfo info{x.offset, x.numel, int32_t(chunks_.size()), 0, x.decay, x.counted};
    for (int64_t i = 0; i < x.numel; i += kernels::kReduceChunk)
      chunks_.push_back({x.offset + i, int32_t(std::min(kernels::kReduceChunk, x.numel - i)), int32_t(t)});
    info.chunk_count = int32_t(chunks_.size()) - info.first_chunk;
    info_.push_back(info);
  }
  chunk_table_ = DeviceBuffer<OptChunk>(d, chunks_.size());
  tensor_table_ = DeviceBuffer<OptTensorInfo>(d, info_.size());
  if (!chunks_.empty()) chunk_table_.from_host(chunks_.data(), chunks_.size());
  if (!info_.empty()) tensor_table_.from_host(info_.data(), info_.size());
  partial_ = DeviceBuffer<double>(d, std::max<size_t>(2 * chunks_.size(), 1));  // LAMB: two norms per chunk
  sums_ = DeviceBuffer<double>(d, std::max<size_t>(2 * info_.size(), 1));
}

namespace {
// Σ x² over n elements in order, as kernels::SumSquaresChunks.
double sum_squares(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}
}  // namespace

cuda::MultiTensorTables MultiTensorOptimizer::tables() const {
  return {chunk_table_.get(), tensor_table_.get(), int64_t(chunks_.size()), int64_t(info_.size()), moments_base_,
          partial_.get()};
}

void MultiTensorOptimizer::grad_norm(const float* grads, OptimizerScalars* scalars) {
  PRETRAIN_OPS_ON_CUDA(d_, (cuda::sum_squares_by_tensor(d_, tables(), grads, nullptr, sums_.get()),
                            cuda::global_sum(d_, tables(), sums_.get(), scalars)));
  std::vector<double> partial(chunks_.size());
  cpu_launch(int64_t(chunks_.size()), [&](int64_t k) { partial[size_t(k)] = sum_squares(grads + chunks_[size_t(k)].begin, chunks_[size_t(k)].n); });
  // Each tensor's chunks in order, then the counted tensors in order: sum_squares' bits and
  // Optimizer::step's g2.
  double g2 = 0;
  for (const OptTensorInfo& t : info_) {
    double s = 0;
    for (int32_t k = t.first_chunk; k < t.first_chunk + t.chunk_count; ++k) s += partial[size_t(k)];
    if (t.counted) g2 += s;
  }
  scalars->g2 = g2;
}

void MultiTensorOptimizer::clip(OptimizerScalars* scalars, double unscale, double max_grad_norm, ClipRule rule) {
  PRETRAIN_OPS_ON_CUDA(d_, cuda::clip(d_, scalars, unscale, max_grad_norm, rule));
  finish_clip(*scalars, unscale, max_grad_norm, rule);
}

void MultiTensorOptimizer::adamw(float* p, float* m, float* v, const float* g, bf16* working, const AdamHyper& h,
                                 const OptimizerScalars* scalars) {
  PRETRAIN_OPS_ON_CUDA(d_, cuda::adamw(d_, tables(), p, m, v, g, working, h, scalars));
  if (!scalars->finite) return;
  cpu_launch(int64_t(chunks_.size()), [&](int64_t k) {
    const OptChunk& c = chunks_[size_t(k)];
    const float wd = info_[size_t(c.tensor)].decay ? h.weight_decay : 0.0f;
    const int64_t mo = c.begin - moments_base_;
    for (int64_t i = 0; i < c.n; ++i) {
      adamw_element(p[c.begin + i], m[mo + i], v[mo + i], g[c.begin + i], h, wd, scalars->grad_scale);
      if (working) working[c.begin + i] = bf16::from_float(p[c.begin + i]);
    }
  });
}

void MultiTensorOptimizer::lamb_stage1(float* update, float* m, float* v, const float* p, const float* g,
                                       const AdamHyper& h, const OptimizerScalars* scalars) {
  PRETRAIN_OPS_ON_CUDA(d_, cuda::lamb_stage1(d_, tables(), update, m, v, p, g, h, scalars));
  if (!scalars->finite) return;
  cpu_launch(int64_t(chunks_.size()), [&](int64_t k) {
    const OptChunk& c = chunks_[size_t(k)];
    const float wd = info_[size_t(c.tensor)].decay ? h.weight_decay : 0.0f;
    const int64_t mo = c.begin - moments_base_;
    for (int64_t i = 0; i < c.n; ++i)
      update[mo + i] = lamb_update_element(p[c.begin + i], m[mo + i], v[mo + i], g[c.begin + i], h, wd, scalars->grad_scale);
  });
}

void MultiTensorOptimizer::lamb_norms(const float* p, const float* update, double* norms) {
  PRETRAIN_OPS_ON_CUDA(d_, cuda::sum_squares_by_tensor(d_, tables(), p, update, norms));
  // ‖p‖² and ‖u‖² per tensor (u indexed from the moments' base), each its chunks in order.
  std::vector<double> pw(chunks_.size()), pu(chunks_.size());
  cpu_launch(int64_t(chunks_.size()), [&](int64_t k) {
    const OptChunk& c = chunks_[size_t(k)];
    pw[size_t(k)] = sum_squares(p + c.begin, c.n);
    pu[size_t(k)] = sum_squares(update + (c.begin - moments_base_), c.n);
  });
  for (size_t t = 0; t < info_.size(); ++t) {
    double w = 0, u = 0;
    for (int32_t k = info_[t].first_chunk; k < info_[t].first_chunk + info_[t].chunk_count; ++k)
      w += pw[size_t(k)], u += pu[size_t(k)];
    norms[2 * t] = w, norms[2 * t + 1] = u;
  }
}

void MultiTensorOptimizer::lamb_stage2(float* p, const float* update, bf16* working, const double* norms, double lr,
                                       float weight_decay, const OptimizerScalars* scalars) {
  PRETRAIN_OPS_ON_CUDA(d_, cuda::lamb_stage2(d_, tables(), p, update, working, norms, lr, weight_decay != 0.0f, scalars));
  if (!scalars->finite) return;
  cpu_launch(int64_t(chunks_.size()), [&](int64_t k) {
    const OptChunk& c = chunks_[size_t(k)];
    const bool decay = info_[size_t(c.tensor)].decay && weight_decay != 0.0f;
    const float step = lamb_step(lr, norms, c.tensor, decay);
    for (int64_t i = 0; i < c.n; ++i) {
      p[c.begin + i] -= step * update[c.begin - moments_base_ + i];
      if (working) working[c.begin + i] = bf16::from_float(p[c.begin + i]);
    }
  });
}

}  // namespace pretrain::ops
