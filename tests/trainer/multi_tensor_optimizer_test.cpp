// trainer/ops/multi_tensor_optimizer.h on the CPU against today's per-tensor Optimizer
// (trainer/optimizer.h), bit for bit: the same tiny BERT, weights and loss-scaled gradients, three
// steps of AdamW and of LAMB without clipping, with a bound above the norm and with one below it;
// the global norm and clip factor equal too, and the bf16 working copy is the rounding of the fp32
// master. A NaN gradient changes nothing. A ZeRO-like shard (moments indexed from the shard's
// start) updates its elements as the whole arena does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "optimizer_fixtures.h"
#include "trainer/optimizer.h"
#include "trainer/ops/multi_tensor_optimizer.h"

namespace pretrain::multi_tensor_optimizer_test {
namespace {

using testing::fill_normal;
using testing::tiny_bert;
const Device kCpu{};

std::vector<ops::OptTensor> tensors_of(const Model& model) {
  std::vector<ops::OptTensor> t;
  for (const ParamInfo& p : model.params()) t.push_back({p.offset, p.numel, p.decay, p.counted});
  return t;
}

// The hyperparameters Optimizer::step forms on the host for update u of step t.
ops::AdamHyper hyper(const OptimizerConfig& c, int64_t t, int64_t u) {
  return {float(learning_rate(c, t)),
          float(c.beta1),
          float(c.beta2),
          float(c.eps),
          float(c.weight_decay),
          float(1.0 - std::pow(c.beta1, double(u))),
          float(1.0 - std::pow(c.beta2, double(u)))};
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

void check(OptimizerKind kind, double max_grad_norm) {
  SCOPED_TRACE(::testing::Message() << optimizer_name(kind) << " max_grad_norm " << max_grad_norm);
  OptimizerConfig c;
  c.kind = kind, c.lr = 1e-2, c.warmup_steps = 1, c.total_steps = 10, c.max_grad_norm = max_grad_norm;
  Model model(tiny_bert(), kCpu);
  const int64_t n = model.num_parameters();
  fill_normal(model.weights(), n, 7, 0.5f);
  Optimizer opt(c, model);
  std::vector<float> w(model.weights(), model.weights() + n), m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f), u(static_cast<size_t>(n));
  std::vector<bf16> working(static_cast<size_t>(n));
  std::vector<double> norms(2 * model.params().size());
  ops::MultiTensorOptimizer mt(kCpu, tensors_of(model));
  const double loss_scale = 1024, unscale = 1 / loss_scale;
  for (int64_t t = 1; t <= 3; ++t) {
    fill_normal(model.grads(), n, 100 + uint32_t(t), 0.1f);
    for (int64_t i = 0; i < n; ++i) model.grads()[i] = float(model.grads()[i] * loss_scale);
    const UpdateInfo info = opt.step(t, unscale);
    ops::OptimizerScalars s;
    mt.grad_norm(model.grads(), &s);
    mt.clip(&s, unscale, max_grad_norm, kind == OptimizerKind::adamw ? ops::ClipRule::torch : ops::ClipRule::apex_lamb);
    EXPECT_EQ(s.norm, info.grad_norm);
    EXPECT_EQ(s.clip, info.clip);
    const ops::AdamHyper h = hyper(c, t, t);
    if (kind == OptimizerKind::adamw) {
      mt.adamw(w.data(), m.data(), v.data(), model.grads(), working.data(), h, &s);
    } else {
      mt.lamb_stage1(u.data(), m.data(), v.data(), w.data(), model.grads(), h, &s);
      mt.lamb_norms(w.data(), u.data(), norms.data());
      mt.lamb_stage2(w.data(), u.data(), working.data(), norms.data(), learning_rate(c, t), float(c.weight_decay), &s);
    }
    EXPECT_TRUE(same_bits(model.weights(), w.data(), n)) << "weights after step " << t;
    EXPECT_TRUE(same_bits(opt.m(), m.data(), n)) << "first moments after step " << t;
    EXPECT_TRUE(same_bits(opt.v(), v.data(), n)) << "second moments after step " << t;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(working[size_t(i)].bits, bf16::from_float(w[size_t(i)]).bits) << i;
  }
}

TEST(MultiTensorOptimizer, AdamWIsOptimizerBitForBit) {
  for (double max : {0.0, 1e6, 1e-3}) check(OptimizerKind::adamw, max);
}
TEST(MultiTensorOptimizer, LambIsOptimizerBitForBit) {
  for (double max : {0.0, 1e6, 1e-3}) check(OptimizerKind::lamb, max);
}

TEST(MultiTensorOptimizer, ANonFiniteGradientChangesNothing) {
  Model model(tiny_bert(), kCpu);
  const int64_t n = model.num_parameters();
  fill_normal(model.weights(), n, 7, 0.5f);
  fill_normal(model.grads(), n, 8, 0.1f);
  model.grads()[n / 2] = NAN;
  std::vector<float> w(model.weights(), model.weights() + n), m(static_cast<size_t>(n), 0.5f), v(static_cast<size_t>(n), 0.25f);
  const std::vector<float> w0 = w;
  ops::MultiTensorOptimizer mt(kCpu, tensors_of(model));
  ops::OptimizerScalars s;
  mt.grad_norm(model.grads(), &s);
  mt.clip(&s, 1.0, 1.0, ops::ClipRule::torch);
  EXPECT_EQ(s.finite, 0);
  mt.adamw(w.data(), m.data(), v.data(), model.grads(), nullptr, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f}, &s);
  EXPECT_TRUE(same_bits(w.data(), w0.data(), n));
  EXPECT_EQ(m[0], 0.5f);
}

TEST(MultiTensorOptimizer, AShardUpdatesItsElementsAsTheWholeArena) {
  const int64_t n = 50000;  // more than one chunk of kReduceChunk
  std::vector<float> w(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  fill_normal(w.data(), n, 1, 0.5f), fill_normal(g.data(), n, 2, 0.1f);
  const std::vector<ops::OptTensor> whole = {{0, 20000, true, true}, {20000, 30000, false, true}};
  const ops::AdamHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f};
  std::vector<float> wa = w, ma(static_cast<size_t>(n), 0.0f), va(static_cast<size_t>(n), 0.0f);
  ops::MultiTensorOptimizer all(kCpu, whole);
  ops::OptimizerScalars s;  // no clipping: grad_scale 1
  all.adamw(wa.data(), ma.data(), va.data(), g.data(), nullptr, h, &s);
  // The shard [12000, 37000): the first tensor's tail and the second's head; moments from 12000.
  const int64_t lo = 12000, hi = 37000;
  std::vector<float> wb = w, mb(static_cast<size_t>(hi - lo), 0.0f), vb(static_cast<size_t>(hi - lo), 0.0f);
  ops::MultiTensorOptimizer shard(kCpu, {{lo, 20000 - lo, true, true}, {20000, hi - 20000, false, true}}, lo);
  shard.adamw(wb.data(), mb.data(), vb.data(), g.data(), nullptr, h, &s);
  EXPECT_TRUE(same_bits(wa.data() + lo, wb.data() + lo, hi - lo));
  EXPECT_TRUE(same_bits(ma.data() + lo, mb.data(), hi - lo));
  EXPECT_TRUE(same_bits(w.data(), wb.data(), lo)) << "outside the shard nothing moves";
}

}  // namespace
}  // namespace pretrain::multi_tensor_optimizer_test
