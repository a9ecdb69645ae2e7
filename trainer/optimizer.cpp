#include "trainer/optimizer.h"

#include <cmath>

#include "common/error.h"
#include "common/communicator.h"

namespace pretrain {

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "adamw") return OptimizerKind::adamw;
  if (name == "lamb") return OptimizerKind::lamb;
  throw UsageError(cat("--optimizer: expected adamw or lamb, got '", name, "'"));
}

LrSchedule parse_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::constant;
  if (name == "linear") return LrSchedule::linear;
  if (name == "polynomial" || name == "poly") return LrSchedule::polynomial;
  if (name == "cosine") return LrSchedule::cosine;
  throw UsageError(cat("--lr-schedule: expected constant, linear, polynomial or cosine, got '", name, "'"));
}

const char* optimizer_name(OptimizerKind kind) { return kind == OptimizerKind::adamw ? "adamw" : "lamb"; }

const char* schedule_name(LrSchedule s) {
  switch (s) {
    case LrSchedule::constant: return "constant";
    case LrSchedule::linear: return "linear";
    case LrSchedule::polynomial: return "polynomial";
    case LrSchedule::cosine: return "cosine";
  }
  return "?";
}

double learning_rate(const OptimizerConfig& c, int64_t t) {
  if (c.warmup_steps > 0 && t <= c.warmup_steps) return c.lr * double(t) / double(c.warmup_steps);
  if (c.schedule == LrSchedule::constant || c.total_steps <= c.warmup_steps) return c.lr;
  const double progress = std::min(1.0, double(t - c.warmup_steps) / double(c.total_steps - c.warmup_steps));
  double f = 1.0;
  switch (c.schedule) {
    case LrSchedule::linear: f = 1.0 - progress; break;
    case LrSchedule::polynomial: f = std::pow(1.0 - progress, c.poly_power); break;
    case LrSchedule::cosine: f = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress)); break;
    case LrSchedule::constant: break;
  }
  return c.lr * (c.min_lr_ratio + (1.0 - c.min_lr_ratio) * f);
}

Optimizer::Optimizer(const OptimizerConfig& config, Model& model, const Communicator* comm, bool zero,
                     const Communicator* model_group, const Communicator* tensor_group)
    : config_(config),
      model_(model),
      comm_(comm),
      model_group_(model_group && model_group->distributed() ? model_group : nullptr),
      tensor_group_(tensor_group && tensor_group->distributed() ? tensor_group : nullptr),
      zero_(zero && comm && comm->distributed()) {
  const int64_t n = model.num_parameters();
  const int ranks = zero_ ? comm->size() : 1;
  for (int r = 0; r < ranks; ++r) shard_sizes_.push_back(n * (r + 1) / ranks - n * r / ranks);
  const int me = zero_ ? comm->rank() : 0;
  lo_ = n * me / ranks, hi_ = n * (me + 1) / ranks;
  m_ = DeviceBuffer<float>(model.device(), size_t(hi_ - lo_));
  v_ = DeviceBuffer<float>(model.device(), size_t(hi_ - lo_));
  if (config_.kind == OptimizerKind::lamb) update_ = DeviceBuffer<float>(model.device(), size_t(hi_ - lo_));
}

namespace {
// The part of parameter p inside [lo, hi), as offsets into the arena; empty when none.
struct Span {
  int64_t begin, end;
  int64_t size() const { return end > begin ? end - begin : 0; }
};
Span part(const ParamInfo& p, int64_t lo, int64_t hi) { return {std::max(p.offset, lo), std::min(p.offset + p.numel, hi)}; }
}  // namespace

UpdateInfo Optimizer::step(int64_t t, double grad_unscale) {
  const Device& d = model_.device();
  const auto& params = model_.params();
  UpdateInfo info;
  info.lr = learning_rate(config_, t);
  // Σ g² over this rank's shard, tensor by tensor in order, then over the ranks.
  std::vector<Tensor1d> shard_grads;
  for (const ParamInfo& p : params)
    if (Span s = part(p, lo_, hi_); s.size() && p.counted) shard_grads.push_back({model_.grads() + s.begin, s.size()});
  double g2 = 0;
  for (double s : sum_squares(d, shard_grads)) g2 += s;
  if (zero_) comm_->all_reduce_sum(&g2, 1);
  if (model_group_) model_group_->all_reduce_sum(&g2, 1);
  info.grad_norm = std::sqrt(g2) * grad_unscale;
  if (!std::isfinite(info.grad_norm)) {
    info.applied = false;
    return info;
  }
  const int64_t u = ++updates_;
  if (config_.max_grad_norm > 0) {
    if (config_.kind == OptimizerKind::adamw) {
      // torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6) when that is below 1.
      const double coef = config_.max_grad_norm / (info.grad_norm + 1e-6);
      info.clip = coef < 1.0 ? coef : 1.0;
    } else if (info.grad_norm > config_.max_grad_norm) {
      // apex FusedLAMB: the gradients are divided by norm / max_grad_norm when it exceeds 1.
      info.clip = config_.max_grad_norm / info.grad_norm;
    }
  }
  const float lr = float(info.lr), b1 = float(config_.beta1), b2 = float(config_.beta2), eps = float(config_.eps);
  const float bc1 = float(1.0 - std::pow(config_.beta1, double(u)));
  const float bc2 = float(1.0 - std::pow(config_.beta2, double(u)));
  const float clip = float(info.clip * grad_unscale);
  // Moments and LAMB's update are indexed from the shard's start.
  auto at = [&](float* base, const Span& s) { return base + (s.begin - lo_); };
  if (config_.kind == OptimizerKind::adamw) {
    for (const ParamInfo& p : params) {
      const Span s = part(p, lo_, hi_);
      if (!s.size()) continue;
      const float wd = p.decay ? float(config_.weight_decay) : 0.0f;
      launch(d, s.size(), kernels::AdamW{model_.weights() + s.begin, at(m_.get(), s), at(v_.get(), s),
                                         model_.grads() + s.begin, lr, b1, b2, eps, wd, clip, bc1, bc2});
    }
    return info;
  }
  // LAMB: the update direction everywhere first, then ‖w‖ and ‖u‖ per tensor (over the ranks
  // when sharded), then w −= lr · trust · u.
  std::vector<Tensor1d> decayed;  // weights and update of each decayed tensor, in order
  std::vector<size_t> decayed_index;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    const Span s = part(p, lo_, hi_);
    if (!s.size()) continue;
    const float wd = p.decay ? float(config_.weight_decay) : 0.0f;
    launch(d, s.size(), kernels::LambStage1{at(update_.get(), s), at(m_.get(), s), at(v_.get(), s),
                                            model_.weights() + s.begin, model_.grads() + s.begin, b1, b2, eps, wd,
                                            clip, bc1, bc2});
    if (wd != 0.0f) {
      decayed.push_back({model_.weights() + s.begin, s.size()}), decayed.push_back({at(update_.get(), s), s.size()});
      decayed_index.push_back(i);
    }
  }
  std::vector<double> norms(2 * params.size(), 0.0);
  const std::vector<double> sums = sum_squares(d, decayed);
  for (size_t j = 0; j < decayed_index.size(); ++j)
    norms[2 * decayed_index[j]] = sums[2 * j], norms[2 * decayed_index[j] + 1] = sums[2 * j + 1];
  if (zero_) comm_->all_reduce_sum(norms.data(), int64_t(norms.size()));
  if (tensor_group_) {  // tensors cut across the tensor group: the norms of the whole tensors
    std::vector<double> cut;
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].split != Split::none) cut.push_back(norms[2 * i]), cut.push_back(norms[2 * i + 1]);
    tensor_group_->all_reduce_sum(cut.data(), int64_t(cut.size()));
    for (size_t i = 0, j = 0; i < params.size(); ++i)
      if (params[i].split != Split::none) norms[2 * i] = cut[j++], norms[2 * i + 1] = cut[j++];
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Span s = part(params[i], lo_, hi_);
    if (!s.size()) continue;
    // apex (use_nvlamb off) applies the trust ratio only to tensors that decay.
    double trust = 1.0;
    const double w_norm = std::sqrt(norms[2 * i]), u_norm = std::sqrt(norms[2 * i + 1]);
    if (w_norm > 0 && u_norm > 0) trust = w_norm / u_norm;
    launch(d, s.size(), kernels::LambStage2{model_.weights() + s.begin, at(update_.get(), s), float(info.lr * trust)});
  }
  return info;
}

void Optimizer::moments_to_host(std::vector<float>& m, std::vector<float>& v) const {
  const int64_t n = model_.num_parameters();
  m.assign(size_t(n), 0.0f), v.assign(size_t(n), 0.0f);
  copy_to_host(model_.device(), m.data() + lo_, m_.get(), size_t(hi_ - lo_) * sizeof(float));
  copy_to_host(model_.device(), v.data() + lo_, v_.get(), size_t(hi_ - lo_) * sizeof(float));
  if (zero_) comm_->all_gather_blocks(m.data(), shard_sizes_), comm_->all_gather_blocks(v.data(), shard_sizes_);
}

void Optimizer::moments_from_host(const std::vector<float>& m, const std::vector<float>& v) {
  copy_to_device(model_.device(), m_.get(), m.data() + lo_, size_t(hi_ - lo_) * sizeof(float));
  copy_to_device(model_.device(), v_.get(), v.data() + lo_, size_t(hi_ - lo_) * sizeof(float));
}

}  // namespace pretrain
