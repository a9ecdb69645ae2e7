#include "trainer/parallel/schedule.h"

#include <algorithm>

#include "common/error.h"

namespace pretrain {

std::vector<PipelineOp> pipeline_schedule(int stage, int stages, int chunks, int micros) {
  if (stages < 1 || chunks < 1 || micros < 1 || stage < 0 || stage >= stages)
    throw Error(cat("pipeline schedule: bad sizes (stage ", stage, " of ", stages, ", ", chunks, " chunks, ", micros,
                    " micro-batches)"));
  std::vector<PipelineOp> ops;
  if (chunks == 1) {
    const int warmup = std::min(stages - stage - 1, micros);
    for (int m = 0; m < warmup; ++m) ops.push_back({true, 0, m});
    for (int m = warmup; m < micros; ++m) ops.push_back({true, 0, m}), ops.push_back({false, 0, m - warmup});
    for (int m = micros - warmup; m < micros; ++m) ops.push_back({false, 0, m});
    return ops;
  }
  if (micros % stages != 0)
    throw UsageError(cat("--virtual-stages: the interleaved schedule needs --grad-accum (", micros,
                         ") to be a multiple of --pipeline-parallel (", stages, ")"));
  // Virtual micro-batch k runs chunk (k mod p·v) / p (backward: the chunks in reverse) on
  // micro-batch (k / p·v)·p + k mod p: groups of p micro-batches go through each chunk in turn.
  const int total = micros * chunks, group = stages * chunks;
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / stages;
    return forward ? c : chunks - 1 - c;
  };
  auto micro_of = [&](int k) { return (k / group) * stages + k % stages; };
  int warmup = micros == stages ? total : std::min(total, (stages - stage - 1) * 2 + (chunks - 1) * stages);
  for (int k = 0; k < warmup; ++k) ops.push_back({true, chunk_of(k, true), micro_of(k)});
  for (int k = 0; k < total - warmup; ++k) {
    ops.push_back({true, chunk_of(warmup + k, true), micro_of(warmup + k)});
    ops.push_back({false, chunk_of(k, false), micro_of(k)});
  }
  for (int k = total - warmup; k < total; ++k) ops.push_back({false, chunk_of(k, false), micro_of(k)});
  return ops;
}

std::vector<int> peak_live(const std::vector<PipelineOp>& ops, int chunks) {
  std::vector<int> live(static_cast<size_t>(chunks), 0), peak(static_cast<size_t>(chunks), 0);
  for (const PipelineOp& op : ops) {
    int& n = live.at(size_t(op.chunk));
    n += op.forward ? 1 : -1;
    peak[size_t(op.chunk)] = std::max(peak[size_t(op.chunk)], n);
  }
  return peak;
}

double pipeline_bubble(int stages, int chunks, int micros) {
  return double(stages - 1) / double(chunks * micros + stages - 1);
}

std::string describe(const PipelineOp& op) { return cat(op.forward ? "F" : "B", op.micro, ".", op.chunk); }

}  // namespace pretrain
