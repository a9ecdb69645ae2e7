#include "trainer/parallel/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "trainer/kernels.h"
#include "trainer/parallel/schedule.h"

namespace pretrain {

namespace {

constexpr size_t kFloat = sizeof(float);

// Ring collectives: what one of n ranks sends for a payload of `bytes`.
double all_reduce_sent(double bytes, int n) { return n > 1 ? 2.0 * (n - 1) / n * bytes : 0; }
double gather_sent(double bytes, int n) { return n > 1 ? double(n - 1) / n * bytes : 0; }

// What one micro-batch makes this rank send over its tensor group (trainer/model_passes.cpp's
// gather_rows / reduce_rows / vocab_cross_entropy calls, pass by pass). Without sequence
// parallelism every region change is an all-reduce of N × C; with it, an all-gather before the
// column-parallel GEMM and a reduce-scatter after the row-parallel one, which move as much.
double tensor_bytes_per_micro(const ModelConfig& c, const ModelShard& s, int64_t B, int64_t T, int64_t P) {
  const int t = s.tensor_size;
  if (t == 1) return 0;
  const double NC = double(B * T * c.hidden) * kFloat;
  const double region_change = s.sequence_parallel ? 2 * gather_sent(NC, t) : all_reduce_sent(NC, t);
  int64_t layers = 0;
  for (const auto& [b, e] : s.chunks) layers += e - b;
  double bytes = double(layers) * 4 * region_change;  // two forward, two backward
  if (s.embeddings) bytes += region_change;           // the vocabulary-parallel lookup (and its gather back)
  if (s.heads) {
    if (c.kind == ModelKind::gpt) {
      bytes += region_change + (s.sequence_parallel ? gather_sent(NC, t) : 0);  // ln_f's gather, the head's input grad
      bytes += 3 * all_reduce_sent(double(B * T) * kFloat, t);  // cross-entropy: max, target logit, sum of exp
    } else {
      const double M = double(B * P);
      if (s.sequence_parallel) bytes += gather_sent(NC, t);  // the last hidden states, whole
      bytes += 3 * all_reduce_sent(M * kFloat, t) + all_reduce_sent(M * double(c.hidden) * kFloat, t);
    }
  }
  return bytes;
}

}  // namespace

MemoryPlan plan_memory(const PlanRequest& r) {
  MemoryPlan plan;
  plan.request = r;
  plan.data = data_parallel_size(r.world, r.grid);
  const ModelConfig& c = r.model;
  c.validate();
  const int p = r.grid.pipeline, v = r.grid.virtual_stages, t = r.grid.tensor, d = plan.data;
  const int micros = int(r.grad_accum);
  if (c.kind == ModelKind::bert && r.predictions <= 0) throw UsageError("--plan: BERT needs the masked positions per sample");
  for (int stage = 0; stage < p; ++stage) {
    const ModelShard shard = model_shard(c, r.grid, {0, 0, stage});
    Model model(c, shard, Model::Unallocated{});
    model.set_recompute(r.recompute);
    StagePlan s;
    s.stage = stage;
    s.slots = peak_live(pipeline_schedule(stage, p, v, micros), v);
    const int64_t P = c.kind == ModelKind::bert ? r.predictions : 0;
    if (shard.sequence_parallel && (r.micro_batch * r.seq_len) % t != 0)
      throw UsageError(cat("--sequence-parallel: batch × sequence (", r.micro_batch, " × ", r.seq_len,
                           ") is not a multiple of --tensor-parallel ", t));
    s.parameters = model.num_parameters();
    s.weights = s.grads = size_t(s.parameters) * kFloat;
    const size_t vectors = r.lamb ? 3 : 2;
    s.optimizer = vectors * size_t(s.parameters) * kFloat;
    // ZeRO-1: rank k of d keeps [n·k/d, n·(k+1)/d): the largest shard.
    s.optimizer_zero1 = d > 1 ? vectors * size_t((s.parameters + d - 1) / d) * kFloat : s.optimizer;
    s.activations = model.planned_activation_bytes(r.micro_batch, r.seq_len, P, s.slots);
    // The pipeline's buffer for a received gradient, and the norms' chunk table and partial sums
    // (freed after each use; LAMB's per-tensor norms take weights and updates at once).
    const size_t received = size_t(model.stage_rows(r.micro_batch, r.seq_len) * c.hidden) * kFloat;
    int64_t chunks = 0;
    for (const ParamInfo& q : model.params()) chunks += (q.numel + kernels::kReduceChunk - 1) / kernels::kReduceChunk;
    if (r.lamb) chunks *= 2;
    s.buffers = received + size_t(chunks) * (sizeof(kernels::ChunkRef) + sizeof(double));
    s.workspace = r.cuda ? kCublasLtWorkspaceBytes : 0;

    s.tensor_bytes = micros * tensor_bytes_per_micro(c, shard, r.micro_batch, r.seq_len, P);
    int64_t partial = 0;  // sequence parallel: LayerNorm gradients summed over the tensor group
    for (const ParamInfo& q : model.params()) partial += q.sequence_partial ? q.numel : 0;
    s.tensor_bytes += all_reduce_sent(double(partial) * kFloat, t);
    // Point to point: every chunk's output forward but the last virtual stage's, every chunk's
    // input gradient backward but the first's.
    const double activation = double(received);
    int sends = 0;
    for (int k = 0; k < v; ++k) sends += !(stage == p - 1 && k == v - 1) + !(stage == 0 && k == 0);
    s.pipeline_bytes = double(micros) * sends * activation;
    s.data_bytes = all_reduce_sent(double(s.parameters) * kFloat, d);  // ZeRO-1's reduce-scatter + all-gather: as much
    if (p > 1 && (stage == 0 || stage == p - 1)) {
      const std::string wte = c.kind == ModelKind::gpt ? "transformer.wte.weight" : "bert.embeddings.word_embeddings.weight";
      s.embedding_bytes = all_reduce_sent(double(model.param(wte).numel) * kFloat, 2);
    }
    plan.stages.push_back(std::move(s));
  }
  return plan;
}

namespace {
std::string mib(double bytes) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(bytes >= 100 * 1048576.0 ? 0 : 1);
  o << bytes / 1048576.0;
  return o.str();
}
}  // namespace

std::string format_plan(const MemoryPlan& plan) {
  const PlanRequest& r = plan.request;
  const int t = r.grid.tensor, p = r.grid.pipeline, d = plan.data;
  std::ostringstream o;
  o << "plan: " << r.model.describe() << "; " << r.world << (r.world == 1 ? " rank" : " ranks") << " = tensor " << t
    << " × pipeline " << p << " × data " << d;
  if (r.grid.virtual_stages > 1) o << ", " << r.grid.virtual_stages << " virtual stages";
  if (r.grid.sequence_parallel) o << ", sequence parallel";
  o << "\nplan: micro-batch " << r.micro_batch << " × " << r.grad_accum << " micro-batches × " << d
    << " data ranks = global batch " << r.micro_batch * r.grad_accum * d << ", seq " << r.seq_len;
  if (r.model.kind == ModelKind::bert) o << ", " << r.predictions << " masked positions";
  o << (r.recompute ? ", --recompute" : "") << (r.lamb ? ", lamb" : ", adamw") << ", fp32 storage"
    << (r.cuda ? ", cuda" : ", cpu");
  if (p > 1)
    o << "; pipeline bubble (p − 1)/(v·m + p − 1) = "
      << pipeline_bubble(p, r.grid.virtual_stages, int(r.grad_accum));
  o << "\nplan: MiB per rank (the tensor and data ranks of a stage hold alike); sent: MiB a rank sends per step\n";
  std::vector<std::vector<std::string>> rows = {{"stage", "ranks", "params", "weights", "grads", "optimizer",
                                                 "optimizer ZeRO-1", "activations", "buffers", "total",
                                                 "total ZeRO-1", "sent tensor", "sent pipeline", "sent data",
                                                 "sent embedding", "slots"}};
  if (r.device_memory_gb > 0) rows[0].push_back(cat("fits ", r.device_memory_gb, " GB"));
  for (const StagePlan& s : plan.stages) {
    const int first = s.stage * t * d, last = first + t * d - 1;
    std::string slots;
    for (int k : s.slots) {
      if (!slots.empty()) slots += ',';
      slots += std::to_string(k);
    }
    rows.push_back({std::to_string(s.stage), last > first ? cat(first, "-", last) : cat(first),
                    human_count(double(s.parameters)), mib(double(s.weights)), mib(double(s.grads)),
                    mib(double(s.optimizer)), mib(double(s.optimizer_zero1)), mib(double(s.activations)),
                    mib(double(s.buffers + s.workspace)), mib(double(s.total(false))), mib(double(s.total(true))),
                    mib(s.tensor_bytes), mib(s.pipeline_bytes), mib(s.data_bytes), mib(s.embedding_bytes), slots});
    if (r.device_memory_gb > 0) rows.back().push_back(double(s.total(r.zero1)) <= r.device_memory_gb * 1e9 ? "yes" : "NO");
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i)
      o << (i ? "  " : "") << std::string(width[i] - row[i].size(), ' ') << row[i];
    o << "\n";
  }
  size_t peak = 0;
  for (const StagePlan& s : plan.stages) peak = std::max(peak, s.total(r.zero1));
  o << "plan: the largest rank needs " << mib(double(peak)) << " MiB" << (r.zero1 ? " with ZeRO-1" : "")
    << " (the CUDA context, NCCL's buffers and the allocator's fragmentation come on top on a GPU)\n";
  return o.str();
}

}  // namespace pretrain
