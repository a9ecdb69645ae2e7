// AdamW (torch.optim.AdamW's arithmetic) and LAMB (NVIDIA's BERT: apex FusedLAMB), with the
// learning-rate schedule, global-norm clipping, and the moments in an arena laid out like the
// parameters. The element work is kernels.h's AdamW / LambStage1 / LambStage2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/model.h"

namespace pretrain {

enum class OptimizerKind { adamw, lamb };
enum class LrSchedule { constant, linear, polynomial, cosine };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 1e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.01;  // not applied to biases and LayerNorm (ParamInfo::decay)
  double max_grad_norm = 1.0;  // 0: no clipping
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;     // where the decay ends (the run's --max-steps)
  LrSchedule schedule = LrSchedule::linear;
  double poly_power = 0.5;     // NVIDIA BERT's PolyWarmUpScheduler
  double min_lr_ratio = 0.0;   // floor of the decay, as a fraction of lr
};

OptimizerKind parse_optimizer(const std::string& name);  // "adamw" | "lamb"; UsageError otherwise
LrSchedule parse_schedule(const std::string& name);      // "constant" | "linear" | "polynomial" | "cosine"
const char* optimizer_name(OptimizerKind kind);
const char* schedule_name(LrSchedule schedule);

// Learning rate of step t (1-based): linear warmup from 0 over warmup_steps, then the decay from
// lr to min_lr_ratio·lr at total_steps.
double learning_rate(const OptimizerConfig& c, int64_t t);

struct UpdateInfo {
  double lr = 0;
  double grad_norm = 0;  // global L2 norm of the (unscaled) gradients, before clipping
  double clip = 1;       // the factor the gradients were scaled by
  bool applied = true;   // false: a gradient was NaN or Inf, and nothing was changed
};

// fp16's dynamic loss scaling, as torch.cuda.amp.GradScaler does it: the loss is multiplied by
// `scale` before the backward pass; a step whose gradients overflow is skipped and the scale
// halved; after `interval` steps in a row without an overflow it doubles.
struct LossScaler {
  double scale = 65536.0;
  int64_t good_steps = 0, interval = 2000;
  void update(bool finite) {
    if (!finite) {
      scale = scale / 2 < 1.0 ? 1.0 : scale / 2, good_steps = 0;
    } else if (++good_steps == interval) {
      scale *= 2, good_steps = 0;
    }
  }
};

class Communicator;

class Optimizer {
 public:
  // With zero (ZeRO stage 1) over a communicator of several ranks, this rank keeps the moments of
  // its shard [shard_begin, shard_end) of the flat parameter arena only and updates only those
  // weights: the trainer reduce-scatters the gradients before step() and all-gathers the weights
  // after it. Norms (clipping, LAMB's trust ratios) add the shards' partial sums over the ranks.
  // Under tensor / pipeline parallelism the model is one rank's shard: `model_group` (tensor ×
  // pipeline) adds the shards' squared norms, each parameter counted once (ParamInfo::counted),
  // and `tensor_group` LAMB's per-tensor norms of tensors cut across it.
  Optimizer(const OptimizerConfig& config, Model& model, const Communicator* comm = nullptr, bool zero = false,
            const Communicator* model_group = nullptr, const Communicator* tensor_group = nullptr);
  // One update of every parameter from model.grads() × grad_unscale (1 / the loss scale), with the
  // learning rate of training step t. Bias corrections count the updates applied so far (a step
  // skipped for an overflow does not count, as in torch). Gradients holding NaN or Inf change
  // nothing: the result says applied = false.
  UpdateInfo step(int64_t t, double grad_unscale = 1.0);
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }  // when resuming
  const OptimizerConfig& config() const { return config_; }
  float* m() const { return m_.get(); }  // first moments of the shard (all parameters unless ZeRO)
  float* v() const { return v_.get(); }  // second moments of the shard
  size_t state_bytes() const { return (m_.size() + v_.size() + update_.size()) * sizeof(float); }
  bool sharded() const { return zero_; }
  int64_t shard_begin() const { return lo_; }
  int64_t shard_end() const { return hi_; }
  const std::vector<int64_t>& shard_sizes() const { return shard_sizes_; }  // per rank
  // The moments of every parameter, in the arena's layout (gathered when sharded: a collective,
  // call it on every rank); and back (each rank keeps its shard).
  void moments_to_host(std::vector<float>& m, std::vector<float>& v) const;
  void moments_from_host(const std::vector<float>& m, const std::vector<float>& v);

 private:
  OptimizerConfig config_;
  Model& model_;
  const Communicator* comm_ = nullptr;
  const Communicator *model_group_ = nullptr, *tensor_group_ = nullptr;
  bool zero_ = false;
  int64_t lo_ = 0, hi_ = 0;
  std::vector<int64_t> shard_sizes_;
  DeviceBuffer<float> m_, v_, update_;
  int64_t updates_ = 0;
};

}  // namespace pretrain
