// The optimizers (trainer/optimizer.h) against their update rules written out here in double
// precision, on a tiny BERT whose parameters hold fixed values: AdamW (torch.optim.AdamW's
// arithmetic) and LAMB (apex FusedLAMB's) over several steps, on loss-scaled gradients, without
// clipping, with a clipping bound above the norm and with one below it; biases and LayerNorms
// exempt from weight decay; LAMB's trust ratio on a tensor whose weights are zero and on one whose
// weights and gradients are; a step with NaN or Inf gradients changing nothing and not counting;
// moments restored giving the same next step; the learning-rate schedules at their boundary steps;
// the loss scaler's rule. tests/compat/test_optimizer_torch.py compares the steps with PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "optimizer_fixtures.h"
#include "trainer/optimizer.h"

namespace pretrain::optimizer_test {
namespace {

using testing::fill_normal;
using testing::tiny_bert;
const Device kCpu{};

// Tensors LAMB's trust ratio must not divide by: weights all zero with gradients (‖w‖ = 0: trust
// 1, the weights move), and weights and gradients all zero (‖u‖ = 0 too: the weights stay 0).
const std::string kZeroWeights = "bert.pooler.dense.weight";
const std::string kZeroEverything = "cls.seq_relationship.weight";

void zero(Model& model, const std::string& name, float* arena) {
  const ParamInfo& p = model.param(name);
  std::fill(arena + p.offset, arena + p.offset + p.numel, 0.0f);
}

void set_weights(Model& model) {
  fill_normal(model.weights(), model.num_parameters(), 7, 0.5f);
  zero(model, kZeroWeights, model.weights());
  zero(model, kZeroEverything, model.weights());
}

// The gradients of step t (different each step), multiplied by the loss scale.
void set_grads(Model& model, int t, double loss_scale) {
  fill_normal(model.grads(), model.num_parameters(), 100 + uint32_t(t), 0.1f);
  for (int64_t i = 0; i < model.num_parameters(); ++i) model.grads()[i] = float(model.grads()[i] * loss_scale);
  zero(model, kZeroEverything, model.grads());
}

double global_norm(const Model& model, double unscale) {
  double s = 0;
  for (int64_t i = 0; i < model.num_parameters(); ++i) s += double(model.grads()[i]) * double(model.grads()[i]);
  return std::sqrt(s) * unscale;
}

// The update rules over the whole arena, tensor by tensor, in double, with one exception: the
// moments decay by the betas rounded to float, because the kernels receive them as floats, while
// the bias corrections 1 − βᵗ are formed on the host from the double ones. 1 − float(0.999) is
// 1.3e-5 below 0.001 (torch forms 1 − β2 in double): v̂ carries that, the Adam direction half of
// it, far above this test's tolerance, so the reference says which one we compute.
struct Reference {
  OptimizerConfig c;
  std::vector<ParamInfo> params;
  std::vector<double> w, m, v;
  int64_t updates = 0;

  Reference(const OptimizerConfig& config, const Model& model)
      : c(config),
        params(model.params()),
        w(model.weights(), model.weights() + model.num_parameters()),
        m(w.size(), 0.0),
        v(w.size(), 0.0) {}

  UpdateInfo step(double lr, const float* grads, double unscale) {
    std::vector<double> g(grads, grads + w.size());
    double g2 = 0;
    for (double& x : g) x *= unscale, g2 += x * x;
    UpdateInfo info;
    info.lr = lr, info.grad_norm = std::sqrt(g2);
    if (!std::isfinite(info.grad_norm)) {
      info.applied = false;
      return info;
    }
    ++updates;
    if (c.max_grad_norm > 0 && c.kind == OptimizerKind::adamw)  // torch.nn.utils.clip_grad_norm_
      info.clip = std::min(1.0, c.max_grad_norm / (info.grad_norm + 1e-6));
    if (c.max_grad_norm > 0 && c.kind == OptimizerKind::lamb && info.grad_norm > c.max_grad_norm)  // apex
      info.clip = c.max_grad_norm / info.grad_norm;
    const double b1 = float(c.beta1), b2 = float(c.beta2);
    const double bc1 = 1 - std::pow(c.beta1, double(updates)), bc2 = 1 - std::pow(c.beta2, double(updates));
    for (const ParamInfo& p : params) {
      const double wd = p.decay ? c.weight_decay : 0.0;
      std::vector<double> u(size_t(p.numel));  // LAMB's update direction
      double w2 = 0, u2 = 0;
      for (int64_t k = p.offset; k < p.offset + p.numel; ++k) {
        const double gk = g[k] * info.clip;
        m[k] = b1 * m[k] + (1 - b1) * gk;
        v[k] = b2 * v[k] + (1 - b2) * gk * gk;
        const double adam = (m[k] / bc1) / (std::sqrt(v[k] / bc2) + c.eps);
        if (c.kind == OptimizerKind::adamw) {
          w[k] = w[k] * (1 - lr * wd) - lr * adam;
        } else {
          u[k - p.offset] = adam + wd * w[k];
          w2 += w[k] * w[k], u2 += u[k - p.offset] * u[k - p.offset];
        }
      }
      if (c.kind == OptimizerKind::lamb) {
        const double trust = wd != 0 && w2 > 0 && u2 > 0 ? std::sqrt(w2 / u2) : 1.0;
        for (int64_t k = p.offset; k < p.offset + p.numel; ++k) w[k] -= lr * trust * u[k - p.offset];
      }
    }
    return info;
  }
};

// Each tensor within 1e-6 of the reference, relative to the tensor's largest magnitude (float
// rounding makes element-wise ratios of near-zero values noise); a tensor the reference has at
// zero must be exactly zero.
void expect_close(const Model& model, const float* ours, const std::vector<double>& ref, const std::string& what) {
  for (const ParamInfo& p : model.params()) {
    double scale = 0, err = 0;
    for (int64_t k = p.offset; k < p.offset + p.numel; ++k) scale = std::max(scale, std::abs(ref[k]));
    for (int64_t k = p.offset; k < p.offset + p.numel; ++k) err = std::max(err, std::abs(double(ours[k]) - ref[k]));
    EXPECT_LE(err / std::max(scale, 1e-30), 1e-6) << what << " of " << p.name << " (largest magnitude " << scale << ")";
  }
}

OptimizerConfig config(OptimizerKind kind, double max_grad_norm) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = 0.01, c.weight_decay = 0.1;  // large enough that decay on an exempt tensor shows
  c.schedule = LrSchedule::constant;
  c.max_grad_norm = max_grad_norm;
  return c;
}

TEST(OptimizerParams, BiasesAndLayerNormsAreExemptFromWeightDecay) {
  Model model(tiny_bert(), kCpu);
  int exempt = 0;
  for (const ParamInfo& p : model.params()) {
    const bool bias = p.name.size() >= 4 && p.name.substr(p.name.size() - 4) == "bias";
    EXPECT_EQ(p.decay, !bias && p.name.find("LayerNorm") == std::string::npos) << p.name;
    exempt += !p.decay;
  }
  EXPECT_GT(exempt, 0);
  EXPECT_LT(exempt, int(model.params().size()));
}

// (optimizer, clipping bound as a multiple of the first step's gradient norm; 0: no clipping)
class OptimizerStep : public ::testing::TestWithParam<std::tuple<OptimizerKind, double>> {};

TEST_P(OptimizerStep, MatchesTheReferenceOverFourSteps) {
  const auto [kind, bound] = GetParam();
  const double loss_scale = 1024;
  Model model(tiny_bert(), kCpu);
  set_weights(model);
  set_grads(model, 1, loss_scale);
  Optimizer opt(config(kind, bound * global_norm(model, 1 / loss_scale)), model);
  Reference ref(opt.config(), model);
  for (int t = 1; t <= 4; ++t) {
    set_grads(model, t, loss_scale);
    const UpdateInfo want = ref.step(opt.config().lr, model.grads(), 1 / loss_scale);
    const UpdateInfo got = opt.step(t, 1 / loss_scale);
    const std::string when = "step " + std::to_string(t);
    ASSERT_TRUE(got.applied) << when;
    EXPECT_EQ(opt.updates(), t);
    EXPECT_EQ(got.lr, want.lr) << when;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-12 * want.grad_norm) << when;
    EXPECT_NEAR(got.clip, want.clip, 1e-12) << when;
    EXPECT_EQ(got.clip < 1.0, bound > 0 && bound < 1) << when;  // only the bound below the norm clips
    expect_close(model, opt.m(), ref.m, "first moment, " + when);
    expect_close(model, opt.v(), ref.v, "second moment, " + when);
    expect_close(model, model.weights(), ref.w, "weights, " + when);
  }
  // The zero-weight tensor moved (LAMB: trust 1, not 0/‖u‖); the all-zero one did not, and is no NaN.
  const ParamInfo &moved = model.param(kZeroWeights), &still = model.param(kZeroEverything);
  EXPECT_GT(*std::max_element(model.weights() + moved.offset, model.weights() + moved.offset + moved.numel), 0.0f);
  EXPECT_TRUE(std::all_of(model.weights() + still.offset, model.weights() + still.offset + still.numel,
                          [](float x) { return x == 0.0f; }));
}

INSTANTIATE_TEST_SUITE_P(KindsAndClipping, OptimizerStep,
                         ::testing::Combine(::testing::Values(OptimizerKind::adamw, OptimizerKind::lamb),
                                            ::testing::Values(0.0, 10.0, 0.25)),
                         [](const auto& info) {
                           const double bound = std::get<1>(info.param);
                           return std::string(optimizer_name(std::get<0>(info.param))) +
                                  (bound == 0 ? "_NoClipping" : bound > 1 ? "_BoundAboveNorm" : "_Clipped");
                         });

class OptimizerState : public ::testing::TestWithParam<OptimizerKind> {};

// An overflowed step (fp16's loss scale too high) leaves weights and moments bit for bit, and
// does not count: the next step's bias corrections are those of update 2, as in torch.
TEST_P(OptimizerState, NonFiniteGradientsChangeNothing) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Model model(tiny_bert(), kCpu);
    set_weights(model);
    Optimizer opt(config(GetParam(), 1.0), model);
    Reference ref(opt.config(), model);
    set_grads(model, 1, 1);
    ref.step(opt.config().lr, model.grads(), 1);
    opt.step(1);
    const int64_t n = model.num_parameters();
    const std::vector<float> w(model.weights(), model.weights() + n), m(opt.m(), opt.m() + n), v(opt.v(), opt.v() + n);
    set_grads(model, 2, 1);
    model.grads()[n / 2] = bad;
    const UpdateInfo skipped = opt.step(2);
    EXPECT_FALSE(skipped.applied) << bad;
    EXPECT_FALSE(ref.step(opt.config().lr, model.grads(), 1).applied);
    EXPECT_EQ(opt.updates(), 1);
    EXPECT_TRUE(std::equal(w.begin(), w.end(), model.weights())) << bad;
    EXPECT_TRUE(std::equal(m.begin(), m.end(), opt.m())) << bad;
    EXPECT_TRUE(std::equal(v.begin(), v.end(), opt.v())) << bad;
    set_grads(model, 3, 1);
    ref.step(opt.config().lr, model.grads(), 1);
    EXPECT_TRUE(opt.step(3).applied);
    EXPECT_EQ(opt.updates(), 2);
    expect_close(model, model.weights(), ref.w, "weights after the skipped step");
  }
}

// What a checkpoint keeps of the optimizer (the moments, and the update count in state.json)
// gives the same next step bit for bit; without the count the bias corrections differ.
TEST_P(OptimizerState, RestoredMomentsAndCountGiveTheSameNextStep) {
  Model a(tiny_bert(), kCpu);
  set_weights(a);
  Optimizer opt_a(config(GetParam(), 1.0), a);
  for (int t = 1; t <= 2; ++t) set_grads(a, t, 1), opt_a.step(t);
  std::vector<float> m, v;
  opt_a.moments_to_host(m, v);
  const int64_t n = a.num_parameters();
  ASSERT_EQ(int64_t(m.size()), n);

  auto restored = [&](Model& model, bool with_count) {
    std::copy(a.weights(), a.weights() + n, model.weights());
    Optimizer opt(opt_a.config(), model);
    opt.moments_from_host(m, v);
    if (with_count) opt.set_updates(opt_a.updates());
    set_grads(model, 3, 1);
    opt.step(3);
    return std::vector<float>(model.weights(), model.weights() + n);
  };
  Model b(tiny_bert(), kCpu), c(tiny_bert(), kCpu);
  const std::vector<float> resumed = restored(b, true), uncounted = restored(c, false);
  set_grads(a, 3, 1);
  opt_a.step(3);
  EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), a.weights()));
  EXPECT_FALSE(std::equal(uncounted.begin(), uncounted.end(), a.weights()));
}

INSTANTIATE_TEST_SUITE_P(Kinds, OptimizerState, ::testing::Values(OptimizerKind::adamw, OptimizerKind::lamb),
                         [](const auto& info) { return std::string(optimizer_name(info.param)); });

// Warmup: linear from 0, step t of W at t/W of the peak, whatever the schedule.
TEST(OptimizerLearningRate, WarmupRisesLinearlyToThePeak) {
  for (LrSchedule s : {LrSchedule::constant, LrSchedule::linear, LrSchedule::polynomial, LrSchedule::cosine}) {
    OptimizerConfig c;
    c.lr = 2.0, c.warmup_steps = 10, c.total_steps = 110, c.schedule = s;
    EXPECT_EQ(learning_rate(c, 0), 0.0) << schedule_name(s);
    EXPECT_DOUBLE_EQ(learning_rate(c, 1), 0.2) << schedule_name(s);
    EXPECT_DOUBLE_EQ(learning_rate(c, 5), 1.0) << schedule_name(s);
    EXPECT_EQ(learning_rate(c, 10), 2.0) << schedule_name(s);
  }
}

// After warmup, the decay from the peak at step W to min_lr_ratio · peak at total_steps (and after).
TEST(OptimizerLearningRate, DecaysFromWarmupEndToTheFloor) {
  const double pi = std::acos(-1.0);
  struct Case {
    LrSchedule schedule;
    double quarter;  // the decay factor a quarter of the way
  };
  for (const Case& k : {Case{LrSchedule::linear, 0.75}, Case{LrSchedule::polynomial, std::sqrt(0.75)},
                        Case{LrSchedule::cosine, 0.5 * (1 + std::cos(pi / 4))}}) {
    OptimizerConfig c;
    c.lr = 2.0, c.warmup_steps = 10, c.total_steps = 110, c.schedule = k.schedule, c.min_lr_ratio = 0.1;
    auto at = [&](double f) { return 2.0 * (0.1 + 0.9 * f); };
    const char* name = schedule_name(k.schedule);
    EXPECT_LT(learning_rate(c, 11), 2.0) << name;  // the first step after warmup has decayed
    EXPECT_GT(learning_rate(c, 11), at(0.97)) << name;
    EXPECT_DOUBLE_EQ(learning_rate(c, 35), at(k.quarter)) << name;
    EXPECT_DOUBLE_EQ(learning_rate(c, 110), 0.2) << name;
    EXPECT_DOUBLE_EQ(learning_rate(c, 1000), 0.2) << name;
  }
  OptimizerConfig linear;
  linear.lr = 1.0, linear.total_steps = 100;  // no warmup: steps count from 1, as Megatron counts them
  EXPECT_DOUBLE_EQ(learning_rate(linear, 1), 0.99);
  EXPECT_DOUBLE_EQ(learning_rate(linear, 100), 0.0);
}

TEST(OptimizerLearningRate, ConstantOrNoDecayWindowKeepsThePeak) {
  OptimizerConfig c;
  c.lr = 2.0, c.warmup_steps = 10, c.total_steps = 110, c.schedule = LrSchedule::constant, c.min_lr_ratio = 0.1;
  EXPECT_EQ(learning_rate(c, 11), 2.0);
  EXPECT_EQ(learning_rate(c, 1000), 2.0);
  c.schedule = LrSchedule::linear, c.total_steps = 10;  // total_steps ≤ warmup: nothing to decay over
  EXPECT_EQ(learning_rate(c, 11), 2.0);
  c.total_steps = 0;
  EXPECT_EQ(learning_rate(c, 50), 2.0);
}

// Each decay halfway down from the peak (no floor): linear and cosine at the window's middle,
// polynomial (power 0.5) three quarters of the way.
TEST(OptimizerLearningRate, WarmupThenEachDecayHalfway) {
  OptimizerConfig c;
  c.lr = 1.0, c.warmup_steps = 10, c.total_steps = 110;
  EXPECT_DOUBLE_EQ(learning_rate(c, 5), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 10), 1.0);
  c.schedule = LrSchedule::linear;
  EXPECT_DOUBLE_EQ(learning_rate(c, 60), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 110), 0.0);
  c.schedule = LrSchedule::cosine;
  EXPECT_NEAR(learning_rate(c, 60), 0.5, 1e-12);
  c.schedule = LrSchedule::polynomial;
  EXPECT_NEAR(learning_rate(c, 85), 0.5, 1e-12);  // (1 − 0.75)^0.5
}

TEST(OptimizerNames, ParseWhatIsPrintedAndRefuseTheRest) {
  for (OptimizerKind k : {OptimizerKind::adamw, OptimizerKind::lamb}) EXPECT_EQ(parse_optimizer(optimizer_name(k)), k);
  for (LrSchedule s : {LrSchedule::constant, LrSchedule::linear, LrSchedule::polynomial, LrSchedule::cosine})
    EXPECT_EQ(parse_schedule(schedule_name(s)), s);
  EXPECT_EQ(parse_schedule("poly"), LrSchedule::polynomial);
  EXPECT_THROW(parse_optimizer("sgd"), UsageError);
  try {
    parse_schedule("step");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--lr-schedule"), std::string::npos) << e.what();
  }
}

// torch.cuda.amp.GradScaler's rule: halve on an overflow and start counting again; double after
// `interval` finite steps in a row. Ours never goes below 1.
TEST(OptimizerLossScaler, OverflowHalvesAndRestartsTheCount) {
  LossScaler s;
  s.scale = 1024, s.interval = 3;
  s.update(true), s.update(true);
  s.update(false);
  EXPECT_EQ(s.scale, 512);
  EXPECT_EQ(s.good_steps, 0);
  s.update(true), s.update(true);
  EXPECT_EQ(s.scale, 512);
  s.update(true);
  EXPECT_EQ(s.scale, 1024);
  EXPECT_EQ(s.good_steps, 0);
}

TEST(OptimizerLossScaler, DoublesAfterTheDefaultIntervalOnly) {
  LossScaler s;
  for (int i = 0; i < 1999; ++i) s.update(true);
  EXPECT_EQ(s.scale, 65536);
  s.update(true);
  EXPECT_EQ(s.scale, 131072);
  s.update(false);
  EXPECT_EQ(s.scale, 65536) << "an overflow halves it";
}

TEST(OptimizerLossScaler, NeverBelowOne) {
  LossScaler s;
  s.scale = 2;
  s.update(false);
  EXPECT_EQ(s.scale, 1);
  s.update(false);
  EXPECT_EQ(s.scale, 1);
}

}  // namespace
}  // namespace pretrain::optimizer_test
