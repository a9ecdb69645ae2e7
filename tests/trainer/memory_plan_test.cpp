// --plan's arithmetic (trainer/parallel/memory_plan.h) without MPI: each rank's parameters, optimizer
// state (whole and ZeRO-1's shard), cuBLASLt workspace and traffic counted by hand for a tiny GPT
// at one rank, split over pipeline stages and over a tensor group; the activations and the arenas
// against what a model of the same layout really allocates in this process; the layouts the
// trainer refuses; the table it prints. (The plan against whole runs under mpirun:
// tests/e2e/test_trainer_plan.py.)
#include "trainer/parallel/memory_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "fixtures.h"
#include "test_util.h"
#include "trainer/optimizer.h"
#include "trainer/parallel/schedule.h"

namespace pretrain::memory_plan_test {
namespace {

using testing::tiny_model;

constexpr int64_t B = 2, T = 16, M = 4;  // micro-batch, sequence, micro-batches per step
constexpr size_t F = sizeof(float);

// The tiny GPT: 2 layers, C = 16, I = 64, 23 ids, 16 positions.
const ModelConfig kGpt = tiny_model(ModelKind::gpt);
constexpr int64_t C = 16, I = 64, V = 23, P = 16;
// One GPT-2 block: two LayerNorms (2C each), the fused QKV (3C·C + 3C), the attention projection
// (C·C + C), the MLP (I·C + I and C·I + C).
constexpr int64_t kBlock = 2 * 2 * C + 3 * C * C + 3 * C + C * C + C + I * C + I + C * I + C;

PlanRequest request(int world, GridShape grid) {
  PlanRequest r;
  r.model = kGpt, r.world = world, r.grid = grid;
  r.micro_batch = B, r.grad_accum = M, r.seq_len = T;
  return r;
}

TEST(MemoryPlan, OneRankCountedByHand) {
  const MemoryPlan plan = plan_memory(request(1, {}));
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(plan.data, 1);
  const StagePlan& s = plan.stages[0];
  const int64_t n = V * C + P * C + 2 * kBlock + 2 * C;  // embeddings, blocks, ln_f
  EXPECT_EQ(s.parameters, n);
  EXPECT_EQ(s.weights, size_t(n) * F);
  EXPECT_EQ(s.grads, size_t(n) * F);
  EXPECT_EQ(s.optimizer, 2 * size_t(n) * F) << "AdamW's two moments";
  EXPECT_EQ(s.optimizer_zero1, s.optimizer) << "one data rank: ZeRO-1 shards nothing";
  EXPECT_EQ(s.slots, std::vector<int>{1}) << "gradient accumulation holds one micro-batch";
  EXPECT_EQ(s.workspace, 0u);
  EXPECT_EQ(s.tensor_bytes + s.pipeline_bytes + s.data_bytes + s.embedding_bytes, 0.0) << "one rank sends nothing";
  EXPECT_EQ(s.total(false), s.weights + s.grads + s.optimizer + s.activations + s.buffers);
  // The buffers: a received gradient (B·T × C), and per 64 Ki-float chunk of each tensor a chunk
  // reference and a double for the norms.
  int64_t chunks = 0;
  for (const ParamInfo& p : whole_model_params(kGpt))
    chunks += (p.numel + kernels::kReduceChunk - 1) / kernels::kReduceChunk;
  EXPECT_EQ(s.buffers, size_t(B * T * C) * F + size_t(chunks) * (sizeof(kernels::ChunkRef) + sizeof(double)));

  PlanRequest lamb_cuda = request(1, {});
  lamb_cuda.lamb = lamb_cuda.cuda = true;
  const StagePlan l = plan_memory(lamb_cuda).stages[0];
  EXPECT_EQ(l.optimizer, 3 * size_t(n) * F) << "LAMB keeps its update too";
  EXPECT_EQ(l.workspace, kCublasLtWorkspaceBytes);
  EXPECT_EQ(l.buffers, s.buffers + size_t(chunks) * (sizeof(kernels::ChunkRef) + sizeof(double)))
      << "LAMB's norms of weights and updates at once";
}

// Four data ranks: ZeRO-1 keeps the largest shard, ⌈n/4⌉, of each moment; the gradients'
// all-reduce sends 2·(4 − 1)/4 of them (ZeRO-1's reduce-scatter and all-gather as much).
TEST(MemoryPlan, DataParallelShardsTheOptimizerAndSendsTheRingsShare) {
  const MemoryPlan plan = plan_memory(request(4, {}));
  EXPECT_EQ(plan.data, 4);
  const StagePlan& s = plan.stages[0];
  const int64_t n = s.parameters;
  EXPECT_EQ(s.optimizer_zero1, 2 * size_t((n + 3) / 4) * F);
  EXPECT_EQ(s.data_bytes, 2.0 * 3 / 4 * double(n) * F);
  EXPECT_EQ(s.total(true), s.total(false) - s.optimizer + s.optimizer_zero1);
}

// Two stages of 1F1B over 4 micro-batches: stage 0 the embeddings and block 0, stage 1 block 1,
// ln_f and its copy of the tied word embeddings; stage 0 holds two micro-batches' activations,
// stage 1 one; each sends one activation (or its gradient) per micro-batch; both sum the tied
// embeddings' gradients (an all-reduce of two).
TEST(MemoryPlan, PipelineStagesCountedByHand) {
  const MemoryPlan plan = plan_memory(request(2, {.tensor = 1, .pipeline = 2}));
  ASSERT_EQ(plan.stages.size(), 2u);
  const StagePlan &first = plan.stages[0], &last = plan.stages[1];
  EXPECT_EQ(first.parameters, V * C + P * C + kBlock);
  EXPECT_EQ(last.parameters, kBlock + 2 * C + V * C);
  EXPECT_EQ(first.slots, std::vector<int>{2});
  EXPECT_EQ(last.slots, std::vector<int>{1});
  const double activation = double(B * T * C) * F;
  EXPECT_EQ(first.pipeline_bytes, M * activation);
  EXPECT_EQ(last.pipeline_bytes, M * activation);
  EXPECT_EQ(first.embedding_bytes, double(V * C) * F);
  EXPECT_EQ(last.embedding_bytes, double(V * C) * F);
  EXPECT_EQ(first.tensor_bytes, 0.0);
}

// Tensor 2 without sequence parallelism: the vocabulary padded to 256 rows (128 a rank), the
// split matrices halved; every region change is an all-reduce of B·T × C (a rank of two sends
// the payload once): per block two forward and two backward, one at the embeddings, one at
// ln_f, and the cross-entropy's three of B·T floats (row max, target logit, Σ exp).
TEST(MemoryPlan, TensorParallelCountedByHand) {
  const MemoryPlan plan = plan_memory(request(2, {.tensor = 2}));
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(plan.data, 1);
  const StagePlan& s = plan.stages[0];
  // Per block: the LayerNorms and the row-parallel biases whole, the rest halved.
  const int64_t block = 2 * 2 * C + (3 * C * C + 3 * C) / 2 + C * C / 2 + C + (I * C + I) / 2 + C * I / 2 + C;
  EXPECT_EQ(s.parameters, 128 * C + P * C + 2 * block + 2 * C);
  const double region = double(B * T * C) * F;
  EXPECT_EQ(s.tensor_bytes, M * ((2 * 4 + 1 + 1) * region + 3 * double(B * T) * F));
  EXPECT_EQ(s.data_bytes, 0.0);

  // Sequence parallelism moves as much per region change (an all-gather and a reduce-scatter of
  // half each), plus ln_f's input gradient gathered and the LayerNorms' gradients summed.
  const MemoryPlan sp = plan_memory(request(2, {.tensor = 2, .sequence_parallel = true}));
  const int64_t layernorms = 2 * 2 * 2 * C + 2 * C;
  EXPECT_EQ(sp.stages[0].tensor_bytes, s.tensor_bytes + M * region / 2 + double(layernorms) * F);
}

// The plan's figures are what a model of the layout allocates: its arenas (weights, gradients,
// the optimizer's state) and, for each stage's slots, its activations; here in this process, for
// BERT and GPT, with --recompute, LAMB, and each stage of a two-stage pipeline.
TEST(MemoryPlan, EqualsTheArenasAModelOfTheLayoutAllocates) {
  struct Case {
    ModelKind kind;
    GridShape grid;
    bool recompute, lamb;
  };
  const Device cpu{};
  for (const Case& k : {Case{ModelKind::bert, {}, false, false}, Case{ModelKind::gpt, {}, true, true},
                        Case{ModelKind::bert, {.pipeline = 2}, false, true},
                        Case{ModelKind::gpt, {.pipeline = 2}, true, false}}) {
    PlanRequest r = request(k.grid.pipeline, k.grid);
    r.model = tiny_model(k.kind);
    r.predictions = k.kind == ModelKind::bert ? 3 : 0;
    r.recompute = k.recompute, r.lamb = k.lamb;
    const MemoryPlan plan = plan_memory(r);
    for (const StagePlan& s : plan.stages) {
      SCOPED_TRACE(cat(model_kind_name(k.kind), " stage ", s.stage, " of ", k.grid.pipeline, k.recompute ? " recompute" : "",
                       k.lamb ? " lamb" : ""));
      const size_t before = device_bytes_allocated().now;
      Model model(r.model, cpu, model_shard(r.model, k.grid, {0, 0, s.stage}));
      model.set_recompute(k.recompute);
      OptimizerConfig oc;
      oc.kind = k.lamb ? OptimizerKind::lamb : OptimizerKind::adamw;
      Optimizer optimizer(oc, model);
      EXPECT_EQ(model.num_parameters(), s.parameters);
      const size_t arenas = device_bytes_allocated().now - before;
      EXPECT_EQ(arenas, s.weights + s.grads + s.optimizer);
      model.prepare(B, T, r.predictions, s.slots);
      EXPECT_EQ(device_bytes_allocated().now - before - arenas, s.activations) << "the activations' floats and ints";
      EXPECT_EQ(device_bytes_allocated().now - before, s.total(false) - s.buffers) << "the buffers come and go";
    }
  }
}

// The trainer's refusals, with its messages, before anything is counted.
TEST(MemoryPlan, RefusesWhatTheTrainerRefuses) {
  auto refusal = [](PlanRequest r) {
    try {
      plan_memory(r);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(refusal(request(3, {.tensor = 2})).find("3 ranks do not divide into tensor 2"), std::string::npos);
  EXPECT_NE(refusal(request(4, {.tensor = 4})).find("does not divide the model's 2 attention heads"), std::string::npos);
  EXPECT_NE(refusal(request(4, {.pipeline = 4})).find("2 layers do not split evenly"), std::string::npos);
  PlanRequest odd = request(2, {.tensor = 2, .sequence_parallel = true});
  odd.micro_batch = 1, odd.seq_len = 15;
  EXPECT_NE(refusal(odd).find("--sequence-parallel: batch × sequence (1 × 15) is not a multiple of --tensor-parallel 2"),
            std::string::npos);
  PlanRequest bert = request(1, {});
  bert.model = tiny_model(ModelKind::bert);
  EXPECT_NE(refusal(bert).find("BERT needs the masked positions per sample"), std::string::npos);
}

// The table: a header line per layout, one row per stage with its ranks, and with a device size
// whether each stage fits it.
TEST(MemoryPlan, TheTableHasARowPerStageAndSaysWhatFits) {
  PlanRequest r = request(4, {.pipeline = 2});
  r.device_memory_gb = 1;
  const std::string text = format_plan(plan_memory(r));
  EXPECT_NE(text.find("plan: gpt tiny: 2 layers"), std::string::npos) << text;
  EXPECT_NE(text.find("4 ranks = tensor 1 × pipeline 2 × data 2"), std::string::npos) << text;
  EXPECT_NE(text.find("global batch 16, seq 16"), std::string::npos) << text;
  EXPECT_NE(text.find("pipeline bubble (p − 1)/(v·m + p − 1) = 0.2"), std::string::npos) << text;
  EXPECT_NE(text.find("fits 1 GB"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    0    0-1 "), std::string::npos) << text;
  EXPECT_NE(text.find("\n    1    2-3 "), std::string::npos) << text;
  EXPECT_EQ(text.find("  NO\n"), std::string::npos) << text;
  r.device_memory_gb = 1e-6;
  EXPECT_NE(format_plan(plan_memory(r)).find("  NO\n"), std::string::npos);
}

}  // namespace
}  // namespace pretrain::memory_plan_test
