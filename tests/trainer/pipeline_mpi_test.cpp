// PipelineRunner (trainer/parallel/pipeline.h) over real ranks: ctest runs this under
// `mpirun -np 4` (label "mpi"). A 4-layer GPT with dropout on, split over 4 stages (1F1B) or over
// 2 stages of 2 virtual stages each (the interleaved schedule, twice: the world's two pipelines),
// runs a step of 4 micro-batches; its losses, summed on the last stage, and every stage's
// gradients are those of the whole model run micro-batch by micro-batch in one process — the same
// ops on the same values, so the same bits — but for the tied word embeddings, whose two halves
// (the first stage's lookup, the last stage's LM head) add up to the whole model's gradient. A
// forward-only run (evaluation) gives the whole model's forward losses.
#include "trainer/parallel/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/communicator.h"
#include "fixtures.h"
#include "trainer/parallel/grid.h"

namespace pretrain::pipeline_mpi_test {
namespace {

constexpr int kMicros = 4;
constexpr int64_t B = 2, T = 8;

const Device kCpu{};

ModelConfig config() {
  ModelConfig c = testing::tiny_model(ModelKind::gpt);
  c.layers = 4;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  return c;
}

// The step's micro-batches (host memory: the CPU backend reads it), the same on every rank; each
// micro-batch's loss is its share of the step's mean over all kMicros · B · T tokens.
struct Step {
  std::vector<std::vector<int32_t>> ids, targets;
  std::vector<ModelInputs> micro;
  Step() : ids(kMicros), targets(kMicros) {
    for (int m = 0; m < kMicros; ++m) {
      for (int64_t i = 0; i < B * T; ++i) {
        ids[size_t(m)].push_back(int32_t((7 * m + 3 * i) % 23));
        targets[size_t(m)].push_back(int32_t((5 * m + i * i) % 23));
      }
      ModelInputs in;
      in.B = B, in.T = T, in.ids = ids[size_t(m)].data(), in.targets = targets[size_t(m)].data();
      in.lm_denominator = double(kMicros * B * T);
      micro.push_back(in);
    }
  }
};

uint64_t key(int micro) { return 1000 + uint64_t(micro); }

// The whole model on one process: each micro-batch's forward and backward in turn.
struct Whole {
  Model model{config(), kCpu};
  double loss = 0, forward_loss = 0;
  explicit Whole(const Step& s) {
    model.init_weights(9);
    for (int m = 0; m < kMicros; ++m) forward_loss += model.step(s.micro[size_t(m)], false, 1.0f, key(m)).total;
    model.zero_grads();
    for (int m = 0; m < kMicros; ++m) loss += model.step(s.micro[size_t(m)], true, 1.0f, key(m)).total;
  }
};

void expect_pipeline_equals_whole(const GridShape& shape) {
  const Communicator& world = Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  const Grid grid(world, shape);
  const int stage = grid.pipeline_rank(), stages = grid.pipeline_size();
  Model model(config(), kCpu, model_shard(config(), shape, {0, grid.data_rank(), stage}));
  model.init_weights(9);
  PipelineRunner pipeline(model, grid.pipeline(), stage, stages);
  const Step step;
  const Whole whole(step);

  const Losses forward = pipeline.run(step.micro, key, 1.0f, false);
  model.zero_grads();
  const Losses trained = pipeline.run(step.micro, key, 1.0f, true);
  if (grid.last_stage()) {
    EXPECT_EQ(forward.total, whole.forward_loss) << "forward only";
    EXPECT_EQ(trained.total, whole.loss);
  } else {
    EXPECT_EQ(forward.total, 0.0) << "only the last stage has losses";
    EXPECT_EQ(trained.total, 0.0);
  }

  // The word embeddings' halves: the last stage sends its LM head's to stage 0, which adds its own.
  const std::string wte = "transformer.wte.weight";
  const ParamInfo& whole_wte = whole.model.param(wte);
  std::vector<float> head(size_t(whole_wte.numel));
  if (stage == stages - 1)
    grid.pipeline().send(model.grads() + model.param(wte).offset, head.size() * sizeof(float), 0, 7);
  if (stage == 0) grid.pipeline().recv(head.data(), head.size() * sizeof(float), stages - 1, 7);
  int64_t checked = 0;
  for (const ParamInfo& p : model.params()) {
    const ParamInfo& w = whole.model.param(p.name);
    ASSERT_EQ(p.numel, w.numel) << p.name;
    if (p.name == wte) {
      if (p.tied_copy) continue;  // the last stage's half, added on stage 0
      for (int64_t e = 0; e < p.numel; ++e) {
        const float want = whole.model.grads()[w.offset + e], got = model.grads()[p.offset + e] + head[size_t(e)];
        ASSERT_NEAR(got, want, 1e-6f * (1 + std::fabs(want))) << p.name << " element " << e;
      }
    } else {
      for (int64_t e = 0; e < p.numel; ++e)
        ASSERT_EQ(model.grads()[p.offset + e], whole.model.grads()[w.offset + e]) << p.name << " element " << e;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(PipelineRunner, OneFOneBOverFourStagesEqualsTheWholeModel) { expect_pipeline_equals_whole({.pipeline = 4}); }

TEST(PipelineRunner, InterleavedOverTwoStagesOfTwoChunksEqualsTheWholeModel) {
  expect_pipeline_equals_whole({.pipeline = 2, .virtual_stages = 2});
}

// The activation sets a stage holds at once are its schedule's peak: 1F1B's stages − stage.
TEST(PipelineRunner, SlotsAreTheSchedulesPeak) {
  const Communicator& world = Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  const Grid grid(world, {.pipeline = 4});
  Model model(config(), model_shard(config(), grid.shape(), {0, 0, grid.pipeline_rank()}), Model::Unallocated{});
  PipelineRunner pipeline(model, grid.pipeline(), grid.pipeline_rank(), 4);
  EXPECT_EQ(pipeline.slots(kMicros, true), std::vector<int>{4 - grid.pipeline_rank()});
  EXPECT_EQ(pipeline.slots(kMicros, false), std::vector<int>{1}) << "forward only frees each slot at once";
  EXPECT_EQ(pipeline.schedule(kMicros, true), pipeline_schedule(grid.pipeline_rank(), 4, 1, kMicros));
}

}  // namespace
}  // namespace pretrain::pipeline_mpi_test
