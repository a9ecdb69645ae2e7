// The order in which a pipeline stage runs its micro-batches (Megatron-LM's schedules, read from
// megatron/core/pipeline_parallel/schedules.py): a pure function of the stage and the sizes, so
// every rank knows every other rank's order and the tests can check it without MPI.
#pragma once
#include <string>
#include <vector>

namespace pretrain {

// The forward or backward pass of one micro-batch through one of the stage's model chunks.
struct PipelineOp {
  bool forward = true;
  int chunk = 0, micro = 0;
  bool operator==(const PipelineOp&) const = default;
};

// Stage `stage` of `stages`, each with `chunks` model chunks (virtual stages), over `micros`
// micro-batches:
//  - one stage, one chunk: forward then backward of each micro-batch in turn (gradient accumulation);
//  - one chunk: 1F1B (PipeDream-flush): stages − stage − 1 warm-up forwards, then one forward and
//    one backward in turn, then the cool-down backwards, so a stage holds at most stages − stage
//    micro-batches' activations;
//  - chunks > 1: the interleaved schedule (micros must be a multiple of stages).
std::vector<PipelineOp> pipeline_schedule(int stage, int stages, int chunks, int micros);
// The most micro-batches whose activations each chunk holds at once under `ops`.
std::vector<int> peak_live(const std::vector<PipelineOp>& ops, int chunks);
// The idle share of an ideal pipeline: (p − 1) / (v·m + p − 1) (Narayanan et al., 2021).
double pipeline_bubble(int stages, int chunks, int micros);
std::string describe(const PipelineOp& op);  // "F2.1": forward of micro-batch 2 through chunk 1

}  // namespace pretrain
