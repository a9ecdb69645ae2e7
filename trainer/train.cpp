#include "trainer/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/counter_rng.h"
#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "common/manifest.h"
#include "formats/bert_defaults.h"
#include "loader/loader.h"
#include "trainer/checkpoint.h"
#include "common/communicator.h"
#include "trainer/hf_format.h"
#include "trainer/hf_tokenizer.h"
#include "trainer/metrics.h"
#include "trainer/parallel/data_parallel.h"
#include "trainer/parallel/grid.h"
#include "trainer/parallel/memory_plan.h"
#include "trainer/parallel/pipeline.h"
#include "trainer/tensor_parallel/tensor_group.h"
#include "trainer/safetensors.h"

namespace pretrain {

namespace {
// --plan's vocabulary when neither shards nor --vocab-size say: bert-base-uncased's and GPT-2's.
constexpr int64_t kBertVocabSize = 30522, kGpt2VocabSize = 50257;
}  // namespace

void add_train_options(CLI::App& app, TrainOptions& o) {
  const bool bert = o.kind == ModelKind::bert;
  ModelOptions& m = o.model;
  DataOptions& d = o.data;
  ParallelOptions& p = o.parallel;
  RunOptions& r = o.run;
  std::string presets;
  for (const std::string& n : ModelConfig::preset_names(o.kind)) presets += (presets.empty() ? "" : ", ") + n;
  app.add_option("--data", d.sources, bert ? "BERT HDF5 shards: directories, manifest.json, files or globs (required but with --plan)"
                                           : "GPT shards (Megatron .bin/.idx or llm.c .bin): directories, manifests, files, globs "
                                             "(required but with --plan)");
  app.add_option("--model", m.preset, "model size: " + presets)->capture_default_str();
  app.add_option("--layers", m.layers, "override the preset's layers");
  app.add_option("--hidden", m.hidden, "override the preset's hidden size (intermediate = 4 × hidden)");
  app.add_option("--heads", m.heads, "override the preset's attention heads");
  app.add_option("--vocab-size", m.vocab_size,
                 cat("vocabulary rows (default: the manifest's; larger pads it; --plan: BERT ", kBertVocabSize, ", GPT-2 ",
                     kGpt2VocabSize, ")"));
  app.add_option("--max-positions", m.max_positions, "override the preset's position embeddings (BERT 512, GPT-2 1024)");
  app.add_option("--dropout", m.dropout, "hidden and attention dropout (default: BERT 0.1, GPT 0)");
  app.add_flag("--recompute", m.recompute, "recompute GELU outputs and attention probabilities in the backward pass (less activation memory)");
  app.add_option("--batch-size", d.batch_size, "samples per micro-batch")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--grad-accum", d.grad_accum, "micro-batches per step")->capture_default_str()->check(CLI::PositiveNumber);
  if (!bert) app.add_option("--seq-len", d.seq_len, cat("tokens per sample (default: ", kGptSeqLen, ", at most the model's positions)"));
  else app.add_option("--seq-len", d.seq_len, cat("tokens per sample for --plan (default ", kBertSeqLen, "; training takes the shards')"));
  if (bert) app.add_flag("--dynamic-masking", d.dynamic_masking, "mask anew each epoch (LDDL style) in the loader");
  app.add_option("--workers", d.workers, "loader threads")->capture_default_str();
  app.add_option("--max-steps", r.max_steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--optimizer", o.optimizer_name, "adamw or lamb")->capture_default_str();
  app.add_option("--lr", o.optimizer.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup", o.optimizer.warmup_steps, "linear warmup steps")->capture_default_str();
  app.add_option("--lr-schedule", o.schedule_name, "decay after warmup: constant, linear, polynomial, cosine")
      ->capture_default_str();
  app.add_option("--weight-decay", o.optimizer.weight_decay, "decoupled weight decay (not on biases, LayerNorm)")
      ->capture_default_str();
  app.add_option("--beta1", o.optimizer.beta1)->capture_default_str();
  app.add_option("--beta2", o.optimizer.beta2)->capture_default_str();
  app.add_option("--eps", o.optimizer.eps)->capture_default_str();
  app.add_option("--max-grad-norm", o.optimizer.max_grad_norm, "global gradient-norm clipping (0: off)")
      ->capture_default_str();
  app.add_option("--precision", r.precision,
                 "fp32, or bf16 / fp16 tensor-core GEMMs (fp32 accumulation, activations and master weights; "
                 "fp16 with dynamic loss scaling); on the CPU bf16/fp16 are emulated")
      ->capture_default_str();
  app.add_option("--device", r.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--log-interval", r.log_interval, "steps between log lines")->capture_default_str();
  app.add_option("--save-interval", r.save_interval, "steps between checkpoints (0: at the end only)");
  app.add_option("--checkpoint-dir", r.checkpoint_dir, "where checkpoints go");
  app.add_flag("--resume", r.resume, "continue from the newest checkpoint in --checkpoint-dir");
  app.add_option("--init-from", r.init_from,
                 "start from these weights: a .safetensors file of ours, or a Hugging Face directory (an --export DIR, "
                 "or transformers' save_pretrained of BertForPreTraining / GPT2LMHeadModel)");
  app.add_option("--export", r.export_path,
                 "write the final weights: FILE.safetensors (HF / nanoGPT names), or a directory that transformers' "
                 "from_pretrained reads (config.json, model.safetensors, the shards' tokenizer)");
  app.add_option("--log-dir", r.log_dir, "write metrics.jsonl here");
  EvalOptions& e = o.eval;
  app.add_option("--eval-data", e.data,
                 "held-out shards to evaluate on, as --data takes them (default: the valid/ split that "
                 "make-pretraining-shards --valid-fraction wrote beside a --data directory, when there is one)");
  app.add_option("--eval-interval", e.interval,
                 "evaluate every N steps and after the last (0: never; default 1000 when there is held-out data)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-iters", e.iters,
                 "iterations (global batches: batch size × grad accum × data ranks) per evaluation, at most the "
                 "held-out data's; forward only, dropout off (0: no evaluation)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--seed", r.seed, "weights, dropout and data order")->capture_default_str();
  app.add_option("--peak-tflops", r.peak_tflops, "peak TFLOPs per device for MFU (default: GPU table or measured sgemm)");
  add_comm_timeout_option(app, r.comm_timeout);
  app.add_option("--bucket-mb", p.bucket_mb,
                 "data parallel: gradients reduced in buckets of this size while the backward pass runs "
                 "(0: one all-reduce after it)")
      ->capture_default_str();
  app.add_option("--zero", p.zero, "1: ZeRO stage 1, optimizer state sharded over the data-parallel ranks")
      ->check(CLI::IsMember({0, 1}))->capture_default_str();
  app.add_option("--tensor-parallel,--tensor-model-parallel-size", p.tensor,
                 "ranks that split every layer (Megatron's column/row-parallel linears, vocabulary-parallel "
                 "embedding and cross-entropy)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--pipeline-parallel,--pipeline-model-parallel-size", p.pipeline,
                 "pipeline stages the layers are split over (1F1B schedule)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--virtual-stages", p.virtual_stages, "model chunks per pipeline stage (the interleaved schedule)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--sequence-parallel", p.sequence_parallel,
               "split LayerNorm and dropout regions along the sequence over the tensor group (Megatron's "
               "sequence parallelism)");
  app.add_flag("--plan", o.plan.on,
               "print each rank's memory (parameters, gradients, optimizer state with and without ZeRO-1, activations "
               "at the pipeline schedule's peak) and bytes sent per step per group for this layout and batch, then "
               "exit; reads no data, allocates nothing");
  app.add_option("--world-size", o.plan.world_size,
                 "--plan: ranks of the launch to plan (default: this launch's, or outside mpirun tensor × pipeline)");
  if (bert)
    app.add_option("--max-predictions", o.plan.max_predictions,
                   cat("--plan: masked positions per sample (default ceil(", kBertMaskedLmProb, " × seq))"));
  app.add_option("--device-memory-gb", o.plan.device_memory_gb, "--plan: say whether each rank fits this much device memory");
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------- the model and the grid
// The preset with the command line's overrides: everything but the vocabulary, which the shards say.
ModelConfig preset_config(ModelKind kind, const ModelOptions& m) {
  ModelConfig c = ModelConfig::preset(kind, m.preset);
  if (m.layers) c.layers = m.layers, c.name = "custom";
  if (m.hidden) c.hidden = m.hidden, c.intermediate = 4 * m.hidden, c.name = "custom";
  if (m.heads) c.heads = m.heads, c.name = "custom";
  if (m.max_positions) c.max_positions = m.max_positions;
  if (m.dropout >= 0) c.hidden_dropout = c.attention_dropout = float(m.dropout);
  return c;
}

// The model for shards of `shard_vocab` ids and `seq_len` tokens: the vocabulary may be padded
// (--vocab-size), never cut.
ModelConfig with_vocabulary(ModelConfig c, const ModelOptions& m, int64_t shard_vocab, int64_t seq_len) {
  if (shard_vocab <= 0)
    throw UsageError("the shards' manifest does not give the vocabulary size (make them with make-pretraining-shards, "
                     "or put a manifest.json with tokenizer.vocab_size beside them)");
  if (m.vocab_size && m.vocab_size < shard_vocab)
    throw UsageError(cat("--vocab-size ", m.vocab_size, " is smaller than the shards' vocabulary (", shard_vocab,
                         " ids in the manifest)"));
  c.vocab_size = m.vocab_size ? m.vocab_size : shard_vocab;
  if (seq_len > c.max_positions)
    throw UsageError(cat("the sequence length ", seq_len, " exceeds the model's ", c.max_positions,
                         " positions (--max-positions)"));
  c.validate();
  return c;
}

GridShape grid_shape(const ParallelOptions& p) { return {p.tensor, p.pipeline, p.virtual_stages, p.sequence_parallel}; }

// --plan: nothing is read or allocated; rank 0 of a launch (or a plain process) prints.
int print_plan(const TrainOptions& o) {
  const Communicator& world = Communicator::world();
  const bool bert = o.kind == ModelKind::bert;
  PlanRequest r;
  r.seq_len = o.data.seq_len ? o.data.seq_len : bert ? kBertSeqLen : kGptSeqLen;
  r.model = with_vocabulary(preset_config(o.kind, o.model), o.model,
                            o.model.vocab_size ? o.model.vocab_size : bert ? kBertVocabSize : kGpt2VocabSize, r.seq_len);
  // Outside mpirun the smallest launch of the layout: data parallel 1.
  r.world = o.plan.world_size     ? o.plan.world_size
            : world.distributed() ? world.size()
                                  : o.parallel.tensor * o.parallel.pipeline;
  r.grid = grid_shape(o.parallel);
  r.micro_batch = o.data.batch_size, r.grad_accum = o.data.grad_accum;
  r.predictions = o.plan.max_predictions ? o.plan.max_predictions : int64_t(std::ceil(kBertMaskedLmProb * double(r.seq_len)));
  r.recompute = o.model.recompute, r.zero1 = o.parallel.zero == 1;
  r.lamb = parse_optimizer(o.optimizer_name) == OptimizerKind::lamb;
  r.cuda = o.run.device != "cpu";
  r.device_memory_gb = o.plan.device_memory_gb;
  const std::string text = format_plan(plan_memory(r));
  if (world.rank() == 0) std::fputs(text.c_str(), stdout), std::fflush(stdout);
  return 0;
}

// One process per device: under mpirun, on CUDA, each rank the GPU of its index on its node.
Device open_rank_device(const RunOptions& r, const Communicator& world, Precision precision) {
  std::string spec = r.device;
  if (spec == "cuda" && world.distributed()) spec = cat("cuda:", world.local_rank());
  Device device = open_device(spec, max_threads());
  device.gemm_precision = precision;
  if (!device.cuda && precision != Precision::fp32)
    log_warn("--precision ", r.precision, " on the CPU is emulated (GEMM operands rounded before sgemm): it shows the "
             "numerics of a GPU run, slower than fp32");
  return device;
}

// A data-parallel rank takes its slice of every global batch; the ranks of its tensor and
// pipeline groups read the same one.
LoaderConfig loader_config(const TrainOptions& o, const Grid& grid, const Device& device, const ModelConfig& preset) {
  const bool bert = o.kind == ModelKind::bert;
  LoaderConfig lc;
  lc.sources = o.data.sources;
  lc.kind = bert ? ModelKind::bert : ModelKind::gpt;
  lc.batch_size = o.data.batch_size;
  lc.seed = o.run.seed;
  lc.workers = o.data.workers;
  lc.device = device.cuda ? cat("cuda:", device.index) : "cpu";
  lc.rank = grid.data_rank();
  lc.world_size = grid.data_size();
  lc.prefetch = int(std::max<int64_t>(4, o.data.grad_accum + 2));  // a step holds all its micro-batches
  lc.consumer_stream = device.stream;
  lc.id_dtype = TensorDType::i32;
  lc.masking.enabled = o.data.dynamic_masking;
  lc.bin_batches = o.data.grad_accum;  // --bin-size shards: a step's micro-batches come from one bin
  if (!bert) lc.seq_len = o.data.seq_len ? o.data.seq_len : std::min<int64_t>(kGptSeqLen, preset.max_positions);
  return lc;
}

ModelConfig model_config(const TrainOptions& o, const ModelConfig& preset, const Loader& loader) {
  if (o.kind == ModelKind::bert && o.data.seq_len && o.data.seq_len != loader.seq_len())
    throw UsageError(cat("--seq-len ", o.data.seq_len, ": the shards hold sequences of ", loader.seq_len(), " tokens"));
  const ModelConfig config = with_vocabulary(preset, o.model, loader.vocab_size(), loader.seq_len());
  for (const auto& [name, id] : loader.special_ids())
    if (id < 0 || id >= config.vocab_size)
      throw UsageError(cat("the manifest's special id ", name, " = ", id, " is outside the vocabulary (", config.vocab_size, ")"));
  return config;
}

// ---------------------------------------------------------------- one step's data
ModelInputs inputs_of(const Batch& b, ModelKind kind) {
  ModelInputs in;
  in.B = b.size;
  if (kind == ModelKind::gpt) {
    in.T = b.tokens.shape[1];
    in.ids = static_cast<const int32_t*>(b.tokens.data);
    in.targets = static_cast<const int32_t*>(b.targets.data);
    return in;
  }
  in.T = b.input_ids.shape[1];
  in.ids = static_cast<const int32_t*>(b.input_ids.data);
  in.types = static_cast<const int32_t*>(b.segment_ids.data);
  in.mask = static_cast<const int32_t*>(b.input_mask.data);
  in.P = b.masked_lm_positions.shape[1];
  in.mlm_positions = static_cast<const int32_t*>(b.masked_lm_positions.data);
  in.mlm_ids = static_cast<const int32_t*>(b.masked_lm_ids.data);
  in.nsp_labels = static_cast<const int32_t*>(b.next_sentence_labels.data);
  if (b.packed()) {
    // A packed row: its instances attend within themselves (the sequence_ids are the mask), their
    // positions restart at each, and the NSP head runs on each instance's [CLS].
    in.mask = static_cast<const int32_t*>(b.sequence_ids.data);
    in.positions = static_cast<const int32_t*>(b.position_ids.data);
    in.K = b.next_sentence_positions.shape[1];
    in.nsp_positions = static_cast<const int32_t*>(b.next_sentence_positions.data);
  }
  return in;
}

// The instances a BERT batch holds: one per row, or a packed batch's NSP labels ≥ 0 (the model's
// own count, read from the device as the masked positions are).
int64_t instances_of(const Batch& b, const Device& device) {
  if (!b.packed()) return b.size;
  return count_instances(device, static_cast<const int32_t*>(b.next_sentence_labels.data),
                         b.next_sentence_labels.numel());
}

// A step's micro-batches, and what its mean losses divide by: the predictions (BERT) or tokens
// (GPT) and the samples of the whole step over every data rank, so that the gradients the ranks
// sum are those of one big batch. A sample is an instance: a packed BERT row holds several, so
// samples (the NSP mean's denominator, samples/s, evaluation's samples) count instances, while
// rows × seq_len is what the model computes (tokens/s, FLOPs). Unpacked, rows = samples.
struct StepBatch {
  std::vector<Batch> batches;
  std::vector<ModelInputs> micro;
  int64_t local_rows = 0, rows = 0, samples = 0, predictions = 0;
  void release() {
    for (Batch& b : batches) b.release();
    batches.clear();
  }
};

StepBatch next_step(Loader& loader, const TrainOptions& o, const Communicator& data, const Device& device) {
  const bool bert = o.kind == ModelKind::bert;
  StepBatch s;
  int64_t counts[3] = {0, 0, 0};  // predictions (BERT) or tokens (GPT), samples (instances), rows
  std::vector<int32_t> positions;
  for (int64_t m = 0; m < o.data.grad_accum; ++m) {
    std::optional<Batch> b = loader.next();
    if (!b) b = loader.next();  // the epoch ended: the next one starts
    if (!b) throw Error("the loader yields no batch: are the shards empty, or smaller than one batch?");
    if (bert) {
      positions.resize(size_t(b->masked_lm_positions.numel()));
      copy_to_host(device, positions.data(), b->masked_lm_positions.data, positions.size() * sizeof(int32_t));
      counts[0] += count_predictions(positions.data(), b->size, b->masked_lm_positions.shape[1]);
      counts[1] += instances_of(*b, device);
    } else {
      counts[0] += b->size * b->tokens.shape[1];
      counts[1] += b->size;
    }
    counts[2] += b->size;
    s.batches.push_back(std::move(*b));
  }
  s.local_rows = counts[2];
  data.all_reduce_sum(counts, 3);  // over the data-parallel ranks (their tensor and pipeline peers read alike)
  s.predictions = bert ? counts[0] : 0, s.samples = counts[1], s.rows = counts[2];
  for (const Batch& b : s.batches) {
    s.micro.push_back(inputs_of(b, o.kind));
    s.micro.back().lm_denominator = double(counts[0]);
    s.micro.back().nsp_denominator = double(counts[1]);
  }
  return s;
}

// Dropout masks: a function of (seed, step, micro-batch, data rank), so a resumed run, and every
// tensor and pipeline rank of a replica, draws the same.
uint64_t dropout_key(uint64_t seed, int64_t step, int micro, int data_rank) {
  return (CounterRng::mix(CounterRng::mix(seed ^ 0xd0d0d0d0ULL) ^ (uint64_t(step) * 131 + uint64_t(micro))) ^
          CounterRng::mix(uint64_t(data_rank) + 1)) |
         1;
}

// The step's losses: the last stage's shares (alike on its tensor ranks), summed over the data ranks.
Losses step_losses(const Communicator& world, const Grid& grid, Losses sum) {
  if (!world.distributed()) return sum;
  const bool counts = grid.last_stage() && grid.tensor_rank() == 0;
  double shares[4] = {counts ? sum.total : 0, counts ? sum.mlm : 0, counts ? sum.nsp : 0,
                      counts ? double(sum.correct) : 0};
  world.all_reduce_sum(shares, 4);
  sum.total = shares[0], sum.mlm = shares[1], sum.nsp = shares[2], sum.correct = int64_t(shares[3]);
  return sum;
}

// ---------------------------------------------------------------- evaluation
// Held-out data, as Megatron evaluates it: every --eval-interval steps and after the last,
// --eval-iters iterations, each a global batch fetched as a training step fetches one (so a data
// rank evaluates its slice and the losses are the global batch's means, summed over the ranks),
// run forward only through the pipeline schedule with dropout off (key 0) and no gradients.
// The loader is its own (the training loader's state is never touched) and starts over at the
// beginning of the held-out data at every evaluation: every evaluation sees the same batches, so
// two evaluations differ by the model only, and a resumed run evaluates exactly what the
// uninterrupted run did with nothing more in the checkpoint. (Megatron's validation iterator goes
// on where it stopped instead, and has to restore its position from the iteration number.)
struct Evaluation {
  std::unique_ptr<Loader> loader;
  LoaderState start;
  int64_t interval = 0, iterations = 0;
};

// The held-out shards: --eval-data, else the valid/ split beside each --data directory or manifest.
std::vector<std::string> eval_sources(const TrainOptions& o) {
  if (!o.eval.data.empty()) return o.eval.data;
  std::vector<std::string> found;
  for (const std::string& s : o.data.sources) {
    const std::string dir = base_name(s) == kManifestName ? dir_name(s) : s;
    if (file_exists(path_join(path_join(dir, "valid"), kManifestName))) found.push_back(path_join(dir, "valid"));
  }
  return found;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : " ") + i;
  return out;
}

// The evaluation's loader, or nothing when the run evaluates nothing. Errors name the held-out data.
std::optional<Evaluation> make_evaluation(const TrainOptions& o, const Grid& grid, const Device& device,
                                          const ModelConfig& preset, const Loader& train) {
  const std::vector<std::string> sources = eval_sources(o);
  const bool asked = !o.eval.data.empty() || o.eval.interval > 0;
  Evaluation e;
  e.interval = o.eval.interval >= 0 ? o.eval.interval : sources.empty() ? 0 : 1000;
  if (e.interval == 0 || o.eval.iters == 0) return std::nullopt;
  if (sources.empty())
    throw UsageError(cat("--eval-interval ", e.interval, ": no held-out data (give --eval-data, or make the shards with "
                         "make-pretraining-shards --valid-fraction, which writes them to <data>/valid/)"));
  const std::string what = cat(o.eval.data.empty() ? "held-out data " : "--eval-data ", joined(sources));
  LoaderConfig lc = loader_config(o, grid, device, preset);
  lc.sources = sources;
  lc.masking.enabled = false;  // the shards' own masks: the same predictions at every evaluation
  try {
    e.loader = std::make_unique<Loader>(lc);
  } catch (const UsageError& x) {
    throw UsageError(cat(what, ": ", x.what()));
  } catch (const Error& x) {
    throw Error(cat(what, ": ", x.what()));
  }
  const Loader& held = *e.loader;
  if (held.vocab_size() != train.vocab_size() || held.special_ids() != train.special_ids())
    throw UsageError(cat(what, ": another vocabulary than the training shards' (", held.vocab_size(), " ids against ",
                         train.vocab_size(), ", or other special ids)"));
  if (held.seq_len() != train.seq_len())
    throw UsageError(cat(what, ": sequences of ", held.seq_len(), " tokens, the training shards' are ", train.seq_len()));
  const int64_t whole = int64_t(held.batches_per_epoch()) / o.data.grad_accum;
  const int64_t global = o.data.batch_size * o.data.grad_accum * grid.data_size();
  if (whole == 0) {
    const std::string why = cat(what, ": ", held.samples_per_epoch(), " samples, fewer than one evaluation iteration (",
                                global, " = batch size × grad accum × data ranks)");
    if (asked) throw Error(why);
    log_warn(why, ": no evaluation");
    return std::nullopt;
  }
  e.iterations = std::min(o.eval.iters, whole);
  if (e.iterations < o.eval.iters)
    log_info(what, " holds ", whole, " iterations of ", global, " samples: each evaluation runs those, not --eval-iters ",
             o.eval.iters);
  e.start = held.state();
  return e;
}

EvalRecord evaluate(Evaluation& e, int64_t step, const TrainOptions& o, PipelineRunner& pipeline, const Grid& grid,
                    const Device& device) {
  const double t0 = now_seconds();
  EvalRecord r;
  r.step = step, r.max_steps = o.run.max_steps, r.iterations = e.iterations;
  for (int64_t i = 0; i < e.iterations; ++i) {
    StepBatch batch = next_step(*e.loader, o, grid.data(), device);
    Losses l = pipeline.run(batch.micro, [](int) { return uint64_t(0); }, 1.0f, false);  // key 0: no dropout
    batch.release();
    l = step_losses(grid.world(), grid, l);
    r.losses.total += l.total, r.losses.mlm += l.mlm, r.losses.nsp += l.nsp;
    r.correct += l.correct, r.predictions += batch.predictions, r.samples += batch.samples;
  }
  // Back to the beginning now, so that what the loader prefetches meanwhile is the next evaluation's.
  e.loader->restore(e.start);
  const double n = double(e.iterations);
  r.losses.total /= n, r.losses.mlm /= n, r.losses.nsp /= n;
  synchronize(device);
  r.seconds = now_seconds() - t0;
  return r;
}

// The first parameter whose weights or gradients hold a NaN or Inf (for the error message).
std::string first_bad_tensor(const Model& model) {
  for (const ParamInfo& p : model.params()) {
    if (!std::isfinite(sum_squares(model.device(), model.grads() + p.offset, p.numel))) return "gradient of " + p.name;
    if (!std::isfinite(sum_squares(model.device(), model.weights() + p.offset, p.numel))) return p.name;
  }
  return "none of the parameters (the loss itself)";
}

// ---------------------------------------------------------------- logs
// One machine-readable line for scripts/extract_logs.py: what ran, and at what scale.
void print_config_line(const TrainOptions& o, const ModelConfig& config, const Model& model, const Grid& grid,
                       const Device& device, int64_t T, double peak_tflops) {
  int64_t whole = 0;  // the whole model's parameters, whatever the layout (the TFLOPs formulas count them)
  for (const ParamInfo& p : whole_model_params(config)) whole += p.numel;
  const nlohmann::json run = {{"kind", model_kind_name(o.kind)},
                              {"model", config.name},
                              {"parameters", model.num_parameters()},  // this rank's shard
                              {"model_parameters", whole},
                              {"layers", config.layers},
                              {"hidden", config.hidden},
                              {"seq_len", T},
                              {"batch_size", o.data.batch_size},
                              {"grad_accum", o.data.grad_accum},
                              {"world_size", grid.world().size()},
                              {"data_parallel", grid.data_size()},
                              {"tensor_parallel", grid.tensor_size()},
                              {"pipeline_parallel", grid.pipeline_size()},
                              {"virtual_stages", grid.virtual_stages()},
                              {"sequence_parallel", grid.sequence_parallel()},
                              {"global_batch", o.data.batch_size * o.data.grad_accum * grid.data_size()},
                              {"precision", o.run.precision},
                              {"recompute", o.model.recompute},
                              {"zero", o.parallel.zero},
                              {"optimizer", optimizer_name(o.optimizer.kind)},
                              {"device", device.name},
                              {"peak_tflops", peak_tflops}};
  std::printf("config: %s\n", run.dump().c_str());
  std::fflush(stdout);
}

// Each rank's peak of device memory held through the arenas (what --plan predicts), printed by
// rank 0, one line per rank: "memory: rank 3 (tensor 1, data 0, stage 1): 12.5 MiB allocated at peak".
void report_memory(const Communicator& world, const Grid& grid, size_t peak) {
  const int64_t mine[4] = {grid.tensor_rank(), grid.data_rank(), grid.pipeline_rank(), int64_t(peak)};
  std::vector<int64_t> all(static_cast<size_t>(world.size()) * 4);
  world.all_gather(mine, all.data(), sizeof mine);
  if (world.rank() != 0) return;
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* x = all.data() + 4 * r;
    std::printf("memory: rank %d (tensor %lld, data %lld, stage %lld): %.3f MiB allocated at peak\n", r,
                (long long)x[0], (long long)x[1], (long long)x[2], double(x[3]) / 1048576.0);
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------- the run
// A test seam: PRETRAIN_FAULT=RANK:STEP makes that rank throw at that step, read once at start (the
// tests check that one failing rank ends the whole job, naming itself).
struct Fault {
  int rank = -1;
  long long step = -1;
  static Fault from_environment() {
    Fault f;
    if (const char* e = std::getenv("PRETRAIN_FAULT")) std::sscanf(e, "%d:%lld", &f.rank, &f.step);
    return f;
  }
  void check(int rank_now, int64_t step_now) const {
    if (rank == rank_now && step == step_now)
      throw Error(cat("step ", step_now, ": fault injected by PRETRAIN_FAULT=", rank, ":", step));
  }
};

// What a checkpoint carries besides the tensors, and what --resume restores.
struct Progress {
  int64_t step = 0;
  LossScaler scaler;  // fp16 only: bf16 has fp32's range, and fp32 needs none
};

int train(TrainOptions o, const Fault& fault) {
  const Precision precision = parse_precision(o.run.precision);
  o.optimizer.kind = parse_optimizer(o.optimizer_name);
  o.optimizer.schedule = parse_schedule(o.schedule_name);
  o.optimizer.total_steps = o.run.max_steps;
  const RunOptions& run = o.run;
  if (run.resume && run.checkpoint_dir.empty()) throw UsageError("--resume needs --checkpoint-dir");

  // Plan → grid → device → data → this rank's shard of the model → optimizer → schedule → data parallel.
  const Communicator& world = Communicator::world();
  CommWatchdog& watchdog = comm_watchdog();  // says where a stalled collective waited
  watchdog.set_stage("setup");
  // One run per checkpoint directory: two would overwrite each other's step-N and `latest`.
  const std::optional<DirLock> lock =
      run.checkpoint_dir.empty() ? std::optional<DirLock>() : lock_dir_for_job(run.checkpoint_dir, world);
  if (lock)  // rank 0: a killed run's half-written step-N.tmp-<pid>/ and latest.tmp-<pid> would stay forever
    for (const std::string& stale : remove_stale_temp_files(run.checkpoint_dir, [](std::string_view name) {
           return name == "latest" || name.starts_with("step-");
         }))
      log_info("removed ", stale, ", left by a run that was killed");
  const Grid grid(world, grid_shape(o.parallel));
  if (world.rank() != 0) set_log_level(LogLevel::warn);
  Device device = open_rank_device(run, world, precision);
  const ModelConfig preset = preset_config(o.kind, o.model);
  Loader loader(loader_config(o, grid, device, preset));
  const ModelConfig config = model_config(o, preset, loader);
  TensorGroup tensor_group(grid.tensor(), device);
  ModelShard shard = model_shard(config, grid.shape(), {grid.tensor_rank(), grid.data_rank(), grid.pipeline_rank()});
  shard.tensor = &tensor_group;
  Model model(config, device, shard);
  model.set_recompute(o.model.recompute);
  Optimizer optimizer(o.optimizer, model, &grid.data(), o.parallel.zero == 1, &grid.model(), &grid.tensor());
  PipelineRunner pipeline(model, grid.pipeline(), grid.pipeline_rank(), grid.pipeline_size());
  DataParallel data_parallel(grid, tensor_group, model, optimizer, o.parallel.bucket_mb);
  if (!run.init_from.empty()) import_weights(model, read_init_weights(run.init_from, config), run.init_from);  // each rank its shard
  else model.init_weights(run.seed);

  std::optional<Evaluation> evaluation = make_evaluation(o, grid, device, preset, loader);

  Progress done;
  if (precision != Precision::fp16) done.scaler.scale = 1.0;
  if (run.resume) {
    if (auto path = latest_checkpoint(run.checkpoint_dir)) {
      const nlohmann::json state = load_checkpoint(*path, model, optimizer);
      done.step = json_integer<int64_t>(state.at("step"));
      optimizer.set_updates(state.value("optimizer_updates", done.step));
      done.scaler.scale = state.value("loss_scale", done.scaler.scale);
      done.scaler.good_steps = json_integer_or<int64_t>(state, "loss_scale_good_steps", 0);
      loader.restore(LoaderState::from_json(state.at("loader").get<std::string>()));
      log_info("resumed from ", *path, " at step ", done.step);
    } else {
      log_info("--resume: no checkpoint in ", run.checkpoint_dir, " yet, starting from step 0");
    }
  }
  auto save = [&](int64_t step) {
    const nlohmann::json state = {{"step", step},
                                  {"loader", loader.state().to_json()},
                                  {"seed", run.seed},
                                  {"model", config.describe()},
                                  {"optimizer", optimizer_name(o.optimizer.kind)},
                                  {"optimizer_updates", optimizer.updates()},
                                  {"precision", run.precision},
                                  {"loss_scale", done.scaler.scale},
                                  {"loss_scale_good_steps", done.scaler.good_steps}};
    // Whole tensors: the grid's shards put together on world rank 0, which writes; the others wait.
    watchdog.set_stage("checkpoint");
    std::vector<float> m, v;
    optimizer.moments_to_host(m, v);
    const std::string path = save_checkpoint(run.checkpoint_dir, step, model, m, v, state, &grid);
    if (world.rank() == 0) log_info("checkpoint ", path);
    world.barrier();
  };

  const int64_t T = loader.seq_len();
  MetricsLog metrics(world.rank() == 0 ? run.log_dir : std::string(), config, device, run.precision, run.peak_tflops,
                     world.rank() == 0);
  log_info(config.describe(), "; ", human_count(double(model.num_parameters())), " parameters on ", device.name, "; ",
           optimizer_name(o.optimizer.kind), " lr ", o.optimizer.lr, " ", schedule_name(o.optimizer.schedule),
           " warmup ", o.optimizer.warmup_steps, "; batch ", o.data.batch_size, " × ", o.data.grad_accum, " × ",
           grid.data_size(), grid.data_size() == 1 ? " data rank" : " data ranks", " × seq ", T, "; ", grid.describe(),
           grid.sequence_parallel() ? ", sequence parallel" : "",
           grid.virtual_stages() > 1 ? cat(", ", grid.virtual_stages(), " virtual stages") : std::string());
  if (world.rank() == 0) print_config_line(o, config, model, grid, device, T, metrics.peak_tflops());

  // The activations planned once for the longest batch the loader yields: steps of a shorter bin
  // (--bin-size shards) are carved out of them and allocate nothing; packed shards' rows hold K
  // instances, so K NSP slots each.
  model.prepare(o.data.batch_size, loader.seq_len(), loader.max_predictions(),
                pipeline.slots(int(o.data.grad_accum), true), std::max<int64_t>(1, loader.max_pack()));
  for (int64_t step = done.step + 1; step <= run.max_steps; ++step) {
    watchdog.set_step(step);
    watchdog.set_stage("train");
    const double t0 = now_seconds();
    StepBatch batch = next_step(loader, o, grid.data(), device);
    const double data_wait = now_seconds() - t0;
    model.zero_grads();
    const double loss_scale = done.scaler.scale;
    auto key = [&](int m) { return dropout_key(run.seed, step, m, grid.data_rank()); };
    Losses losses = pipeline.run(batch.micro, key, float(loss_scale), true, [&](int) { data_parallel.attach(); });
    batch.release();
    data_parallel.reduce_gradients();
    losses = step_losses(world, grid, losses);
    if (!std::isfinite(losses.total))
      throw Error(cat("step ", step, ": the loss is ", losses.total, "; first non-finite tensor: ", first_bad_tensor(model)));
    fault.check(world.rank(), step);
    const UpdateInfo u = optimizer.step(step, 1.0 / loss_scale);
    data_parallel.gather_weights(u.applied);
    if (precision == Precision::fp16) {
      done.scaler.update(u.applied);
      if (!u.applied) log_warn("step ", step, ": fp16 gradients overflowed at loss scale ", loss_scale,
                               ": step skipped, loss scale now ", done.scaler.scale);
    } else if (!u.applied) {
      throw Error(cat("step ", step, ": the gradient norm is ", u.grad_norm, "; first non-finite tensor: ",
                      first_bad_tensor(model)));
    }
    synchronize(device);

    StepRecord r;
    r.step = step, r.max_steps = run.max_steps;
    r.losses = losses, r.lr = u.lr, r.grad_norm = u.grad_norm, r.loss_scale = loss_scale, r.skipped = !u.applied;
    r.seconds = now_seconds() - t0, r.data_wait = data_wait, r.pipeline_wait = pipeline.last_wait_seconds();
    // The step's own length: binned shards (--bin-size) train each step at its bin's length.
    const int64_t step_T = batch.micro.front().T;
    // Samples are instances (a packed row holds several); tokens and FLOPs are the rows computed.
    r.samples = batch.samples, r.tokens = batch.rows * step_T;
    // TFLOPs per device: this rank's rows (with the step's mean masked count and instances per row),
    // its share of the model.
    const bool bert = o.kind == ModelKind::bert;
    const double masked = bert ? double(batch.predictions) / double(batch.rows) : 0;
    const double instances = bert ? double(batch.samples) / double(batch.rows) : 1;
    r.flops = double(batch.local_rows) * train_flops_per_sample(config, step_T, masked, instances) /
              double(grid.tensor_size() * grid.pipeline_size());
    r.device_bytes = device_bytes_allocated().peak;
    metrics.record(r, step % run.log_interval == 0 || step == run.max_steps || step == done.step + 1);
    // After the step's record: its time leaves the evaluation out, and the next step's clock starts after it.
    if (evaluation && (step % evaluation->interval == 0 || step == run.max_steps)) {
      watchdog.set_stage("evaluation");
      metrics.record_eval(evaluate(*evaluation, step, o, pipeline, grid, device));
    }
    if (!run.checkpoint_dir.empty() && run.save_interval > 0 && step % run.save_interval == 0 && step != run.max_steps)
      save(step);
  }
  if (!run.checkpoint_dir.empty() && done.step < run.max_steps) save(run.max_steps);
  watchdog.set_stage("finish");
  if (!run.export_path.empty()) {
    const auto weights = export_weights(model, &grid);  // a collective: whole tensors on rank 0
    if (world.rank() == 0 && is_hf_directory(run.export_path)) {
      // HF's vocabulary is the tokenizer's: --vocab-size padding rows stay behind.
      const int64_t vocab = loader.vocab_size() ? loader.vocab_size() : config.vocab_size;
      write_hf_model(run.export_path, config, weights, vocab, loader.special_ids());
      const bool with_tokenizer = write_hf_tokenizer(run.export_path, find_shards_manifest(o.data.sources), config.max_positions);
      log_info("Hugging Face model ", with_tokenizer ? "and tokenizer " : "", "written to ", run.export_path);
    } else if (world.rank() == 0) {
      write_safetensors(run.export_path, weights, {{"format", "pt"}, {"model", config.describe()}});
      log_info("weights written to ", run.export_path);
    }
  }
  metrics.summary();
  report_memory(world, grid, device_bytes_allocated().peak);
  close_device(device);
  return 0;
}

}  // namespace

int run_training(TrainOptions o) {
  comm_watchdog().set_timeout(o.run.comm_timeout);  // before the world: its ranks are watched from the first call
  const Communicator& world = Communicator::world();
  if (o.plan.on) return print_plan(o);
  if (o.data.sources.empty()) throw UsageError("--data is required (the shards to train on)");
  try {
    return train(std::move(o), Fault::from_environment());
  } catch (const std::exception& e) {
    if (!world.distributed()) throw;
    // A rank that fails alone (a corrupt record in its slice, a device error) must stop the others,
    // which would otherwise wait for it in their next collective forever.
    std::fprintf(stderr, "error: rank %d: %s\n", world.rank(), e.what());
    world.abort(dynamic_cast<const UsageError*>(&e) ? 2 : 1);
  }
}

}  // namespace pretrain
