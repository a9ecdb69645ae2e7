// The models' forward and backward passes on the CPU backend (trainer/model_passes.cpp with the
// rest of the Model): gradients against finite differences of the loss, the same bits at 1 and 2
// threads, training that lowers the loss, reduced-precision GEMMs, an overflowed step, the ranges
// data parallel reduces while the backward pass goes on, packed BERT batches. (The activation plan:
// model_plan_test.cpp; the heads: model_heads_test.cpp; equality with PyTorch:
// tests/compat/test_trainer_torch.py.)
#include <gtest/gtest.h>

#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "fixtures.h"
#include "trainer/optimizer.h"

namespace pretrain::model_test {
namespace {

using pretrain::testing::tiny_model;
const Device kCpu{};

using Data = pretrain::testing::TinyBatch;

class ModelTest : public ::testing::TestWithParam<ModelKind> {};

// Per tensor, the directional derivative along a random direction d: (L(θ + h·d) − L(θ − h·d)) / 2h
// against Σ grad · d. (Single elements are too small a signal for fp32 finite differences.)
TEST_P(ModelTest, GradientsMatchFiniteDifferences) {
  Model model(tiny_model(GetParam()), kCpu);
  model.init_weights(7);
  for (int64_t i = 0; i < model.num_parameters(); ++i) model.weights()[i] *= 3.0f;  // a stronger signal
  const Data data(1);
  const ModelInputs in = data.inputs(GetParam());
  model.zero_grads();
  model.step(in, true, 1.0f, 0);
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  int checked = 0;
  for (const ParamInfo& p : model.params()) {
    if (p.name.find("key.bias") != std::string::npos) continue;  // its gradient is exactly 0
    std::vector<float> d(static_cast<size_t>(p.numel)), saved(model.weights() + p.offset, model.weights() + p.offset + p.numel);
    double predicted = 0;
    for (int64_t k = 0; k < p.numel; ++k) d[size_t(k)] = normal(gen), predicted += double(model.grads()[p.offset + k]) * d[size_t(k)];
    const float h = 5e-4f;
    auto loss_at = [&](float s) {
      for (int64_t k = 0; k < p.numel; ++k) model.weights()[p.offset + k] = saved[size_t(k)] + s * d[size_t(k)];
      return model.step(in, false, 1.0f, 0).total;
    };
    const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
    std::copy(saved.begin(), saved.end(), model.weights() + p.offset);
    EXPECT_NEAR(predicted, fd, 2e-2 * std::fabs(fd) + 1e-3) << p.name;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

std::vector<float> gradients_with_threads(ModelKind kind, int threads) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  ModelConfig c = tiny_model(kind);
  c.hidden_dropout = c.attention_dropout = 0.1f;
  Model model(c, kCpu);
  model.init_weights(11);
  const Data data(2);
  model.zero_grads();
  model.step(data.inputs(kind), true, 1.0f, 99);
  return std::vector<float>(model.grads(), model.grads() + model.num_parameters());
}

TEST_P(ModelTest, SameBitsAtOneAndTwoThreads) {
  EXPECT_EQ(gradients_with_threads(GetParam(), 1), gradients_with_threads(GetParam(), 2));
}

TEST_P(ModelTest, TrainingOnOneBatchLowersTheLoss) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::lamb}) {
    Model model(tiny_model(GetParam()), kCpu);
    model.init_weights(5);
    OptimizerConfig oc;
    oc.kind = kind, oc.lr = 1e-2, oc.schedule = LrSchedule::constant;
    Optimizer opt(oc, model);
    const Data data(4);
    double first = 0, last = 0;
    for (int step = 1; step <= 60; ++step) {
      model.zero_grads();
      const double loss = model.step(data.inputs(GetParam()), true, 1.0f, 0).total;
      if (step == 1) first = loss;
      last = loss;
      opt.step(step);
    }
    EXPECT_LT(last, 0.9 * first) << optimizer_name(kind);  // measured: bert 0.7, gpt 0.84
  }
}

TEST_P(ModelTest, ReducedPrecisionStepsStayCloseToFp32) {
  const Data data(6);
  std::vector<double> losses;
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    Device d;
    d.gemm_precision = p;
    Model model(tiny_model(GetParam()), d);
    model.init_weights(8);
    model.zero_grads();
    losses.push_back(model.step(data.inputs(GetParam()), true, 1.0f, 0).total);
  }
  EXPECT_NE(losses[0], losses[1]) << "bf16 rounds the GEMM inputs";
  EXPECT_NEAR(losses[1], losses[0], 1e-2 * losses[0]);
  EXPECT_NEAR(losses[2], losses[0], 2e-3 * losses[0]);
}

TEST_P(ModelTest, AnOverflowedStepChangesNothing) {
  Model model(tiny_model(GetParam()), kCpu);
  model.init_weights(9);
  OptimizerConfig oc;
  Optimizer opt(oc, model);
  const Data data(7);
  model.zero_grads();
  model.step(data.inputs(GetParam()), true, 1024.0f, 0);  // a loss scale of 1024
  const std::vector<float> before(model.weights(), model.weights() + model.num_parameters());
  model.grads()[5] = INFINITY;
  const UpdateInfo skipped = opt.step(1, 1.0 / 1024);
  EXPECT_FALSE(skipped.applied);
  EXPECT_EQ(opt.updates(), 0);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), model.weights()));
  model.grads()[5] = 0.0f;
  const UpdateInfo applied = opt.step(1, 1.0 / 1024);
  EXPECT_TRUE(applied.applied);
  EXPECT_EQ(opt.updates(), 1);
  EXPECT_GT(applied.grad_norm, 0.0);
  EXPECT_LT(applied.grad_norm, 100.0) << "the norm is of the unscaled gradients";
}

// Data parallel reduces each range the backward pass hands over while it goes on: the ranges must
// cover the arena exactly once, from its end down, and hold their final gradients when handed over.
TEST_P(ModelTest, GradsReadyRangesTileTheArenaWithFinalGradients) {
  Model model(tiny_model(GetParam()), kCpu);
  model.init_weights(10);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<float> seen(static_cast<size_t>(model.num_parameters()), NAN);
  model.set_grads_ready([&](int64_t b, int64_t e) {
    ranges.emplace_back(b, e);
    std::copy(model.grads() + b, model.grads() + e, seen.begin() + b);
  });
  const Data data(8);
  model.zero_grads();
  model.step(data.inputs(GetParam()), true, 1.0f, 0);
  ASSERT_EQ(ranges.size(), size_t(tiny_model(GetParam()).layers + 2));  // heads, each layer, embeddings
  EXPECT_EQ(ranges.front().second, model.num_parameters());
  EXPECT_EQ(ranges.back().first, 0);
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].second, ranges[i - 1].first) << "range " << i;
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), model.grads())) << "a gradient changed after it was handed over";
}

INSTANTIATE_TEST_SUITE_P(Kinds, ModelTest, ::testing::Values(ModelKind::bert, ModelKind::gpt),
                         [](const auto& info) { return info.param == ModelKind::bert ? "bert" : "gpt"; });

// ---------------------------------------------------------------- packed BERT batches
// One BERT instance: [CLS] a.. [SEP] b.. [SEP], its masked positions (in the instance) and label.
struct Instance {
  std::vector<int32_t> ids, types;
  std::vector<int32_t> masked, masked_ids;
  int32_t nsp = 0;
};

std::vector<Instance> varied_instances(int64_t vocab) {
  std::mt19937 gen(21);
  std::vector<Instance> out;
  const int lengths[][2] = {{3, 2}, {5, 4}, {2, 1}, {4, 2}, {6, 5}, {2, 2}};  // a and b tokens: 8 to 14 in all
  for (const auto& [a, b] : lengths) {
    Instance x;
    auto token = [&] { return int32_t(3 + gen() % uint32_t(vocab - 3)); };
    x.ids.push_back(1), x.types.push_back(0);  // [CLS]
    for (int i = 0; i < a; ++i) x.ids.push_back(token()), x.types.push_back(0);
    x.ids.push_back(2), x.types.push_back(0);  // [SEP]
    for (int i = 0; i < b; ++i) x.ids.push_back(token()), x.types.push_back(1);
    x.ids.push_back(2), x.types.push_back(1);
    for (int32_t p = 1; p < int32_t(x.ids.size()) && x.masked.size() < 3; p += 1 + int32_t(gen() % 3))
      if (x.ids[size_t(p)] > 2) x.masked.push_back(p), x.masked_ids.push_back(token());
    x.nsp = int32_t(out.size() % 3 == 1);
    out.push_back(std::move(x));
  }
  return out;
}

// Host tensors of a BERT batch, unpacked (one instance per row, input_mask) or packed (several per
// row: sequence_ids, position_ids restarting per instance, K NSP slots with −1 for empty ones).
struct BertBatch {
  int64_t B = 0, T = 0, P = 0, K = 1;
  std::vector<int32_t> ids, types, mask, positions, mlm_positions, mlm_ids, nsp_positions, nsp;
  ModelInputs inputs() const {
    ModelInputs in;
    in.B = B, in.T = T, in.P = P, in.K = K;
    in.ids = ids.data(), in.types = types.data(), in.mask = mask.data();
    in.positions = positions.empty() ? nullptr : positions.data();
    in.mlm_positions = mlm_positions.data(), in.mlm_ids = mlm_ids.data();
    in.nsp_positions = nsp_positions.empty() ? nullptr : nsp_positions.data(), in.nsp_labels = nsp.data();
    return in;
  }
};

// rows[r]: the instances row r holds, in order.
BertBatch pack(const std::vector<Instance>& xs, const std::vector<std::vector<int>>& rows, int64_t T, int64_t P,
               int64_t K, bool packed) {
  BertBatch out;
  out.B = int64_t(rows.size()), out.T = T, out.P = P, out.K = K;
  for (const std::vector<int>& row : rows) {
    int32_t at = 0, predictions = 0, slot = 0;
    for (int k : row) {
      const Instance& x = xs[size_t(k)];
      for (size_t t = 0; t < x.ids.size(); ++t) {
        out.ids.push_back(x.ids[t]), out.types.push_back(x.types[t]);
        out.mask.push_back(packed ? slot + 1 : 1), out.positions.push_back(int32_t(t));
      }
      for (size_t m = 0; m < x.masked.size(); ++m, ++predictions)
        out.mlm_positions.push_back(at + x.masked[m]), out.mlm_ids.push_back(x.masked_ids[m]);
      out.nsp_positions.push_back(at), out.nsp.push_back(x.nsp);
      at += int32_t(x.ids.size()), ++slot;
    }
    for (; at < T; ++at) out.ids.push_back(0), out.types.push_back(0), out.mask.push_back(0), out.positions.push_back(0);
    for (; predictions < P; ++predictions) out.mlm_positions.push_back(0), out.mlm_ids.push_back(0);
    for (; slot < K; ++slot) out.nsp_positions.push_back(0), out.nsp.push_back(-1);
  }
  if (!packed) out.positions.clear(), out.nsp_positions.clear();  // the column index, position 0
  return out;
}

struct StepResult {
  Losses losses;
  std::vector<std::vector<float>> grads;  // per parameter
};

StepResult packed_step(const ModelConfig& c, const BertBatch& batch) {
  Model model(c, kCpu);
  model.init_weights(17);
  for (int64_t i = 0; i < model.num_parameters(); ++i) model.weights()[i] *= 3.0f;  // sharper attention
  model.zero_grads();
  StepResult r;
  r.losses = model.step(batch.inputs(), true, 1.0f, 0);
  for (const ParamInfo& p : model.params())
    r.grads.emplace_back(model.grads() + p.offset, model.grads() + p.offset + p.numel);
  return r;
}

// The largest difference of two gradients relative to a's largest magnitude, or to 1e-3 when that
// is smaller: the key biases' gradients are 0 but for rounding (softmax ignores a shift of a
// query's scores), and their noise (~1e-9) must not count as a relative difference. The real
// gradients here are ≥ 3e-3 at their largest and agree to ~1e-7.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-3;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, double(std::fabs(a[i] - b[i]))), scale = std::max(scale, double(std::fabs(a[i])));
  return diff / scale;
}

class PackedBatch : public ::testing::TestWithParam<int64_t> {};

// Six instances packed three to a row of 32 tokens (K = 4 slots, one empty per row) train the model
// exactly as they do one per row (GetParam(): the unpacked rows' length, 32 or a shorter 16):
// block-diagonal attention, positions restarting per instance, the pooler and NSP head on each
// [CLS], the same mean losses. Any leak between instances shows in the losses and gradients.
TEST_P(PackedBatch, EqualsUnpacked) {
  ModelConfig c = ModelConfig::preset(ModelKind::bert, "tiny");
  c.layers = 2, c.hidden = 32, c.heads = 2, c.intermediate = 128, c.vocab_size = 64, c.max_positions = 64;
  c.hidden_dropout = c.attention_dropout = 0.0f;
  const std::vector<Instance> xs = varied_instances(c.vocab_size);
  const BertBatch unpacked = pack(xs, {{0}, {1}, {2}, {3}, {4}, {5}}, GetParam(), 3, 1, false);
  const BertBatch packed = pack(xs, {{0, 1, 2}, {3, 4, 5}}, 32, 9, 4, true);
  const StepResult want = packed_step(c, unpacked), got = packed_step(c, packed);
  EXPECT_EQ(got.losses.predictions, want.losses.predictions);
  EXPECT_NEAR(got.losses.mlm, want.losses.mlm, 1e-5 * want.losses.mlm);
  EXPECT_NEAR(got.losses.nsp, want.losses.nsp, 1e-5 * want.losses.nsp);
  EXPECT_NEAR(got.losses.total, want.losses.total, 1e-5 * want.losses.total);
  const Model names(c, ModelShard{}, Model::Unallocated{});
  for (size_t i = 0; i < want.grads.size(); ++i)
    EXPECT_LE(relative_difference(want.grads[i], got.grads[i]), 1e-5) << names.params()[i].name;
}

INSTANTIATE_TEST_SUITE_P(UnpackedLength, PackedBatch, ::testing::Values(32, 16));

// The equality above needs every part of packing: the same packed rows with a 0/1 input_mask
// (instances attending to each other), without position_ids (the column index) or without the
// NSP positions (every slot on the row's first [CLS]) give other losses, by ≥ 10× the tolerance.
TEST(PackedBatchParts, EachIsNeeded) {
  ModelConfig c = ModelConfig::preset(ModelKind::bert, "tiny");
  c.layers = 2, c.hidden = 32, c.heads = 2, c.intermediate = 128, c.vocab_size = 64, c.max_positions = 64;
  c.hidden_dropout = c.attention_dropout = 0.0f;
  const std::vector<Instance> xs = varied_instances(c.vocab_size);
  const StepResult want = packed_step(c, pack(xs, {{0}, {1}, {2}, {3}, {4}, {5}}, 16, 3, 1, false));
  const BertBatch packed = pack(xs, {{0, 1, 2}, {3, 4, 5}}, 32, 9, 4, true);
  BertBatch one_mask = packed, no_positions = packed, no_nsp_positions = packed;
  for (int32_t& m : one_mask.mask) m = m != 0;
  no_positions.positions.clear();
  no_nsp_positions.nsp_positions.clear();
  const std::pair<const char*, const BertBatch*> cases[] = {
      {"input_mask", &one_mask}, {"no position_ids", &no_positions}, {"no NSP positions", &no_nsp_positions}};
  for (const auto& [what, batch] : cases) {
    const Losses got = packed_step(c, *batch).losses;
    EXPECT_GT(std::fabs(got.total - want.losses.total), 1e-4 * want.losses.total) << what;  // 10× the tolerance
  }
}

}  // namespace
}  // namespace pretrain::model_test
