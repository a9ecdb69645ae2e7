#include "trainer/optimizer.h"

#include <cmath>

#include "common/error.h"

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

double gradient_norm(const Model& model) {
  double s = 0;
  for (const ParamInfo& p : model.params()) s += sum_squares(model.device(), model.grads() + p.offset, p.numel);
  return std::sqrt(s);
}

Optimizer::Optimizer(const OptimizerConfig& config, Model& model)
    : config_(config), model_(model),
      m_(model.device(), size_t(model.num_parameters())),
      v_(model.device(), size_t(model.num_parameters())) {
  if (config_.kind == OptimizerKind::lamb) {
    int64_t largest = 0;
    for (const ParamInfo& p : model.params()) largest = std::max(largest, p.numel);
    update_ = DeviceBuffer<float>(model.device(), size_t(largest));
  }
}

UpdateInfo Optimizer::step(int64_t t, double grad_unscale) {
  const Device& d = model_.device();
  UpdateInfo info;
  info.lr = learning_rate(config_, t);
  info.grad_norm = gradient_norm(model_) * grad_unscale;
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
  for (const ParamInfo& p : model_.params()) {
    float *w = model_.weights() + p.offset, *g = model_.grads() + p.offset;
    float *m = m_.get() + p.offset, *v = v_.get() + p.offset;
    const float wd = p.decay ? float(config_.weight_decay) : 0.0f;
    if (config_.kind == OptimizerKind::adamw) {
      launch(d, p.numel, kernels::AdamW{w, m, v, g, lr, b1, b2, eps, wd, clip, bc1, bc2});
      continue;
    }
    launch(d, p.numel, kernels::LambStage1{update_.get(), m, v, w, g, b1, b2, eps, wd, clip, bc1, bc2});
    // apex (use_nvlamb off) applies the trust ratio only to tensors that decay.
    double trust = 1.0;
    if (wd != 0.0f) {
      const double w_norm = std::sqrt(sum_squares(d, w, p.numel));
      const double u_norm = std::sqrt(sum_squares(d, update_.get(), p.numel));
      if (w_norm > 0 && u_norm > 0) trust = w_norm / u_norm;
    }
    launch(d, p.numel, kernels::LambStage2{w, update_.get(), float(info.lr * trust)});
  }
  return info;
}

}  // namespace pretrain
