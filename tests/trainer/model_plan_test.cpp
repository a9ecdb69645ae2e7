// The Model's activation plan (trainer/model_plan.cpp) on the CPU backend: --recompute keeps fewer
// tensors and gives the same bits, and a shorter step is carved out of a larger plan without
// allocating. (Its figures against --plan: tests/trainer/memory_plan_test.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "fixtures.h"
#include "trainer/model.h"

namespace pretrain::model_plan_test {
namespace {

using pretrain::testing::tiny_model;
using Data = pretrain::testing::TinyBatch;
const Device kCpu{};

class ModelPlan : public ::testing::TestWithParam<ModelKind> {};

// --recompute refills the GELU outputs and the attention probabilities (dropout on, so the masks
// are drawn again too) in the backward pass: the same loss and gradient bits, with less memory —
// at least the per-layer probability tensors the scratch pair replaces.
TEST_P(ModelPlan, RecomputeGivesTheSameBitsWithLessMemory) {
  ModelConfig c = tiny_model(GetParam());
  c.hidden_dropout = c.attention_dropout = 0.1f;
  c.layers = 3;
  const Data data(4);
  auto run = [&](bool recompute, size_t* bytes) {
    Model model(c, kCpu);
    model.set_recompute(!recompute);  // toggled after a step too: the plan must follow
    model.init_weights(5);
    model.zero_grads();
    model.step(data.inputs(GetParam()), true, 1.0f, 17);
    model.set_recompute(recompute);
    model.zero_grads();
    const Losses l = model.step(data.inputs(GetParam()), true, 1.0f, 17);
    *bytes = model.activation_bytes();
    std::vector<float> g(model.grads(), model.grads() + model.num_parameters());
    g.push_back(float(l.total));
    return g;
  };
  size_t kept = 0, recomputed = 0;
  EXPECT_EQ(run(false, &kept), run(true, &recomputed));
  // Per layer but one (the scratch): the GELU output and the probabilities before and after dropout.
  const size_t gelu = size_t(data.B * data.T * c.intermediate), probs = size_t(data.B * c.heads * data.T * data.T);
  ASSERT_EQ((gelu % 64) + (probs % 64), 0u);  // the arena's 64-float alignment adds nothing
  EXPECT_EQ(kept - recomputed, (size_t(c.layers) - 1) * (gelu + 2 * probs) * sizeof(float));
}

// LDDL-binned batches change the sequence length from step to step: a model planned for the
// longest carves a shorter step out of the same arena (no allocation) and computes exactly what a
// model that only ever saw the shorter step does.
TEST_P(ModelPlan, AShorterStepIsCarvedOutOfTheLargerPlan) {
  const ModelConfig c = tiny_model(GetParam());
  const Data longer(4, 16), shorter(5, 8);
  auto step = [&](Model& model, const Data& data) {
    model.zero_grads();
    const Losses l = model.step(data.inputs(GetParam()), true, 1.0f, 0);
    std::vector<float> g(model.grads(), model.grads() + model.num_parameters());
    g.push_back(float(l.total));
    return g;
  };
  Model fresh(c, kCpu), reused(c, kCpu);
  fresh.init_weights(5);
  reused.init_weights(5);
  const std::vector<float> expected = step(fresh, shorter);
  step(reused, longer);
  const size_t longer_bytes = reused.activation_bytes();
  const size_t allocated = device_bytes_allocated().now;
  EXPECT_EQ(step(reused, shorter), expected);
  EXPECT_EQ(device_bytes_allocated().now, allocated) << "the shorter step allocated (or freed) memory";
  EXPECT_LT(reused.activation_bytes(), longer_bytes);
  EXPECT_EQ(reused.activation_bytes(), fresh.activation_bytes());
  EXPECT_EQ(step(reused, longer).size(), expected.size());  // and back to the longest: still no reallocation
  EXPECT_EQ(device_bytes_allocated().now, allocated);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ModelPlan, ::testing::Values(ModelKind::bert, ModelKind::gpt),
                         [](const auto& info) { return info.param == ModelKind::bert ? "bert" : "gpt"; });

}  // namespace
}  // namespace pretrain::model_plan_test
