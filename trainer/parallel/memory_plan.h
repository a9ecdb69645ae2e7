// What `bert_pretrain … --plan` / `gpt_pretrain … --plan` prints before a launch: for a layout of
// the data × tensor × pipeline grid and a batch, each rank's device memory (parameters,
// gradients, optimizer state with and without ZeRO-1, activations at its pipeline schedule's peak)
// and the bytes it sends per step in each of its groups. Nothing is read and nothing is allocated:
// the model lays out its parameters and carves its activation plan without memory
// (Model::Unallocated), and the schedule's peak comes from the same pure functions the pipeline
// runs. tests/e2e/test_trainer_plan.py checks the figures against what the trainer allocates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/bert_defaults.h"
#include "trainer/model.h"
#include "trainer/parallel/grid.h"

namespace pretrain {

struct PlanRequest {
  ModelConfig model;
  int world = 1;  // ranks: data parallel = world / (tensor × pipeline)
  GridShape grid;
  int64_t micro_batch = 1, grad_accum = 1, seq_len = kBertSeqLen;
  int64_t predictions = 0;  // BERT: masked positions per sample (max_predictions)
  bool recompute = false;
  bool zero1 = false;
  bool lamb = false;         // LAMB keeps a third state vector (the update, for its trust ratios)
  bool cuda = false;         // adds the cuBLASLt workspace
  double device_memory_gb = 0;  // > 0: say whether each rank fits
};

// One pipeline stage: its tensor ranks hold alike (the padded vocabulary splits evenly), and so do
// its data ranks. Bytes are device memory (host memory for the CPU backend).
struct StagePlan {
  int stage = 0;
  std::vector<int> slots;  // activation sets per model chunk at the schedule's peak
  int64_t parameters = 0;  // this rank's shard
  size_t weights = 0, grads = 0;
  size_t optimizer = 0, optimizer_zero1 = 0;  // moments (and LAMB's update), whole and ZeRO-1's shard
  size_t activations = 0;  // the activation arena at the peak
  size_t buffers = 0;      // the pipeline's received-gradient buffer and the norms' scratch
  size_t workspace = 0;    // cuBLASLt's (CUDA only)
  // Per step, bytes this rank sends (ring collectives: all-reduce 2(n−1)/n of the payload,
  // all-gather and reduce-scatter (n−1)/n; point to point: the payload).
  double tensor_bytes = 0, pipeline_bytes = 0, data_bytes = 0, embedding_bytes = 0;
  size_t total(bool zero1) const {
    return weights + grads + (zero1 ? optimizer_zero1 : optimizer) + activations + buffers + workspace;
  }
};

struct MemoryPlan {
  PlanRequest request;
  int data = 1;  // data-parallel size
  std::vector<StagePlan> stages;
};

// Throws UsageError for a layout the trainer would refuse (the same checks, the same messages).
MemoryPlan plan_memory(const PlanRequest& request);
std::string format_plan(const MemoryPlan& plan);

}  // namespace pretrain
