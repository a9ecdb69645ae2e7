#include "trainer/train.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/counter_rng.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "loader/loader.h"
#include "trainer/checkpoint.h"
#include "trainer/communicator.h"
#include "trainer/nccl.h"
#include "trainer/metrics.h"
#include "trainer/parallel/grid.h"
#include "trainer/parallel/memory_plan.h"
#include "trainer/parallel/pipeline.h"
#include "trainer/parallel/tensor_group.h"
#include "trainer/reducer.h"

namespace pretrain {

void add_train_options(CLI::App& app, TrainOptions& o) {
  const bool bert = o.kind == ModelKind::bert;
  std::string presets;
  for (const std::string& n : ModelConfig::preset_names(o.kind)) presets += (presets.empty() ? "" : ", ") + n;
  app.add_option("--data", o.data, bert ? "BERT HDF5 shards: directories, manifest.json, files or globs (required but with --plan)"
                                        : "GPT shards (Megatron .bin/.idx or llm.c .bin): directories, manifests, files, globs "
                                          "(required but with --plan)");
  app.add_option("--model", o.model, "model size: " + presets)->capture_default_str();
  app.add_option("--layers", o.layers, "override the preset's layers");
  app.add_option("--hidden", o.hidden, "override the preset's hidden size (intermediate = 4 × hidden)");
  app.add_option("--heads", o.heads, "override the preset's attention heads");
  app.add_option("--vocab-size", o.vocab_size,
                 "vocabulary rows (default: the manifest's; larger pads it; --plan: BERT 30522, GPT-2 50257)");
  app.add_option("--max-positions", o.max_positions, "override the preset's position embeddings (BERT 512, GPT-2 1024)");
  app.add_option("--dropout", o.dropout, "hidden and attention dropout (default: BERT 0.1, GPT 0)");
  app.add_option("--batch-size", o.batch_size, "samples per micro-batch")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--grad-accum", o.grad_accum, "micro-batches per step")->capture_default_str()->check(CLI::PositiveNumber);
  if (!bert) app.add_option("--seq-len", o.seq_len, "tokens per sample (default: 1024, at most the model's positions)");
  else app.add_option("--seq-len", o.seq_len, "tokens per sample for --plan (default 128; training takes the shards')");
  app.add_option("--max-steps", o.max_steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
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
  app.add_option("--precision", o.precision,
                 "fp32, or bf16 / fp16 tensor-core GEMMs (fp32 accumulation, activations and master weights; "
                 "fp16 with dynamic loss scaling); on the CPU bf16/fp16 are emulated")
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--log-interval", o.log_interval, "steps between log lines")->capture_default_str();
  app.add_option("--save-interval", o.save_interval, "steps between checkpoints (0: at the end only)");
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "where checkpoints go");
  app.add_flag("--resume", o.resume, "continue from the newest checkpoint in --checkpoint-dir");
  app.add_option("--init-from", o.init_from, "start from these safetensors weights");
  app.add_option("--export", o.export_path, "write the final weights as safetensors (HF / nanoGPT names)");
  app.add_option("--log-dir", o.log_dir, "write metrics.jsonl and train.log here");
  app.add_option("--seed", o.seed, "weights, dropout and data order")->capture_default_str();
  app.add_flag("--recompute", o.recompute, "recompute GELU outputs and attention probabilities in the backward pass (less activation memory)");
  if (bert) app.add_flag("--dynamic-masking", o.dynamic_masking, "mask anew each epoch (LDDL style) in the loader");
  app.add_option("--bucket-mb", o.bucket_mb,
                 "data parallel: gradients reduced in buckets of this size while the backward pass runs "
                 "(0: one all-reduce after it)")
      ->capture_default_str();
  app.add_option("--zero", o.zero, "1: ZeRO stage 1, optimizer state sharded over the data-parallel ranks")
      ->check(CLI::IsMember({0, 1}))->capture_default_str();
  app.add_option("--tensor-parallel,--tensor-model-parallel-size", o.tensor_parallel,
                 "ranks that split every layer (Megatron's column/row-parallel linears, vocabulary-parallel "
                 "embedding and cross-entropy)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--pipeline-parallel,--pipeline-model-parallel-size", o.pipeline_parallel,
                 "pipeline stages the layers are split over (1F1B schedule)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--virtual-stages", o.virtual_stages, "model chunks per pipeline stage (the interleaved schedule)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--sequence-parallel", o.sequence_parallel,
               "split LayerNorm and dropout regions along the sequence over the tensor group (Megatron's "
               "sequence parallelism)");
  app.add_option("--workers", o.workers, "loader threads")->capture_default_str();
  app.add_option("--peak-tflops", o.peak_tflops, "peak TFLOPs per device for MFU (default: GPU table or measured sgemm)");
  app.add_flag("--plan", o.plan.on,
               "print each rank's memory (parameters, gradients, optimizer state with and without ZeRO-1, activations "
               "at the pipeline schedule's peak) and bytes sent per step per group for this layout and batch, then "
               "exit; reads no data, allocates nothing");
  app.add_option("--world-size", o.plan.world_size, "--plan: ranks of the launch to plan (default: this launch's, or outside mpirun tensor × pipeline)");
  if (bert)
    app.add_option("--max-predictions", o.plan.max_predictions, "--plan: masked positions per sample (default ceil(0.15 × seq))");
  app.add_option("--device-memory-gb", o.plan.device_memory_gb, "--plan: say whether each rank fits this much device memory");
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The preset with the command line's overrides: everything but the vocabulary, which the shards say.
ModelConfig preset_config(const TrainOptions& o) {
  ModelConfig c = ModelConfig::preset(o.kind, o.model);
  if (o.layers) c.layers = o.layers, c.name = "custom";
  if (o.hidden) c.hidden = o.hidden, c.intermediate = 4 * o.hidden, c.name = "custom";
  if (o.heads) c.heads = o.heads, c.name = "custom";
  if (o.max_positions) c.max_positions = o.max_positions;
  if (o.dropout >= 0) c.hidden_dropout = c.attention_dropout = float(o.dropout);
  return c;
}

// The model for shards of `shard_vocab` ids and `seq_len` tokens: the vocabulary may be padded
// (--vocab-size), never cut.
ModelConfig with_vocabulary(ModelConfig c, const TrainOptions& o, int64_t shard_vocab, int64_t seq_len) {
  if (shard_vocab <= 0)
    throw UsageError("the shards' manifest does not give the vocabulary size (make them with make-pretraining-shards, "
                     "or put a manifest.json with tokenizer.vocab_size beside them)");
  if (o.vocab_size && o.vocab_size < shard_vocab)
    throw UsageError(cat("--vocab-size ", o.vocab_size, " is smaller than the shards' vocabulary (", shard_vocab,
                         " ids in the manifest)"));
  c.vocab_size = o.vocab_size ? o.vocab_size : shard_vocab;
  if (seq_len > c.max_positions)
    throw UsageError(cat("the sequence length ", seq_len, " exceeds the model's ", c.max_positions,
                         " positions (--max-positions)"));
  c.validate();
  return c;
}

// Sums every rank's gradients into every rank's: NCCL on the device's stream for CUDA tensors,
// MPI for CPU ones.
void all_reduce_gradients(const Communicator& comm, DeviceCommunicator* nccl, Model& model) {
  const int64_t n = model.num_parameters();
  if (nccl) return nccl->all_reduce_sum(model.grads(), n), nccl->join();
  comm.all_reduce_sum(model.grads(), n);
}

// ZeRO-1: each rank receives the sum of its shard of the gradients only (half the traffic of an
// all-reduce), updates that shard, and the weights are put back together with an all-gather.
void reduce_scatter_gradients(const Communicator& comm, Model& model, const Optimizer& optimizer) {
  const int64_t n = model.num_parameters(), lo = optimizer.shard_begin(), len = optimizer.shard_end() - lo;
  std::vector<float> full, shard(static_cast<size_t>(len));
  const float* send = model.grads();  // CPU gradients go to MPI as they are; CUDA ones through the host
  if (model.device().cuda) {
    full.resize(static_cast<size_t>(n));
    copy_to_host(model.device(), full.data(), model.grads(), full.size() * sizeof(float));
    send = full.data();
  }
  comm.reduce_scatter_sum(send, shard.data(), optimizer.shard_sizes());
  copy_to_device(model.device(), model.grads() + lo, shard.data(), shard.size() * sizeof(float));
}

void all_gather_weights(const Communicator& comm, Model& model, const Optimizer& optimizer) {
  if (!model.device().cuda) return comm.all_gather_blocks(model.weights(), optimizer.shard_sizes());
  std::vector<float> host(static_cast<size_t>(model.num_parameters()));
  copy_to_host(model.device(), host.data(), model.weights(), host.size() * sizeof(float));
  comm.all_gather_blocks(host.data(), optimizer.shard_sizes());
  copy_to_device(model.device(), model.weights(), host.data(), host.size() * sizeof(float));
}

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
  return in;
}

// What the tensor and pipeline groups add to the gradients before data parallel's reduction: under
// sequence parallelism the LayerNorms' partial sums over the tensor group's rows; with pipeline
// stages the tied word embeddings' gradient of the first stage and the last stage's copy.
void finish_gradients(Model& model, const Grid& grid, TensorGroup& tensor) {
  for (const ParamInfo& p : model.params())
    if (p.sequence_partial) tensor.all_reduce_sum(model.grads() + p.offset, p.numel);
  if (grid.pipeline_size() == 1 || grid.embedding().size() == 1) return;
  const std::string wte = model.config().kind == ModelKind::gpt ? "transformer.wte.weight"
                                                                 : "bert.embeddings.word_embeddings.weight";
  const ParamInfo& p = model.param(wte);
  std::vector<float> host(static_cast<size_t>(p.numel));
  copy_to_host(model.device(), host.data(), model.grads() + p.offset, host.size() * sizeof(float));
  grid.embedding().all_reduce_sum(host.data(), p.numel);
  copy_to_device(model.device(), model.grads() + p.offset, host.data(), host.size() * sizeof(float));
}

// Each rank's peak of device memory held through the arenas (what --plan predicts), printed by
// rank 0, one line per rank: "memory: rank 3 (tensor 1, data 0, stage 1): 12.5 MiB allocated at peak".
void report_memory(const Communicator& world, const Grid& grid, size_t peak) {
  std::vector<int64_t> all(static_cast<size_t>(world.size()) * 4, 0);
  int64_t* mine = all.data() + 4 * world.rank();
  mine[0] = grid.tensor_rank(), mine[1] = grid.data_rank(), mine[2] = grid.pipeline_rank(), mine[3] = int64_t(peak);
  world.all_reduce_sum(all.data(), int64_t(all.size()));
  if (world.rank() != 0) return;
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* x = all.data() + 4 * r;
    std::printf("memory: rank %d (tensor %lld, data %lld, stage %lld): %.3f MiB allocated at peak\n", r,
                (long long)x[0], (long long)x[1], (long long)x[2], double(x[3]) / 1048576.0);
  }
  std::fflush(stdout);
}

// The first parameter whose weights or gradients hold a NaN or Inf (for the error message).
std::string first_bad_tensor(const Model& model) {
  for (const ParamInfo& p : model.params()) {
    if (!std::isfinite(sum_squares(model.device(), model.grads() + p.offset, p.numel))) return "gradient of " + p.name;
    if (!std::isfinite(sum_squares(model.device(), model.weights() + p.offset, p.numel))) return p.name;
  }
  return "none of the parameters (the loss itself)";
}

}  // namespace

namespace {
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
};

int train(TrainOptions o, const Fault& fault);

// --plan: nothing is read or allocated; rank 0 of a launch (or a plain process) prints.
int print_plan(const TrainOptions& o) {
  const Communicator& world = Communicator::world();
  PlanRequest r;
  const bool bert = o.kind == ModelKind::bert;
  r.seq_len = o.seq_len ? o.seq_len : bert ? 128 : 1024;
  r.model = with_vocabulary(preset_config(o), o, o.vocab_size ? o.vocab_size : bert ? 30522 : 50257, r.seq_len);
  // Outside mpirun the smallest launch of the layout: data parallel 1.
  r.world = o.plan.world_size        ? o.plan.world_size
            : world.distributed()    ? world.size()
                                     : o.tensor_parallel * o.pipeline_parallel;
  r.grid = {o.tensor_parallel, o.pipeline_parallel, o.virtual_stages, o.sequence_parallel};
  r.micro_batch = o.batch_size, r.grad_accum = o.grad_accum;
  r.predictions = o.plan.max_predictions ? o.plan.max_predictions : int64_t(std::ceil(0.15 * double(r.seq_len)));
  r.recompute = o.recompute, r.zero1 = o.zero == 1, r.lamb = parse_optimizer(o.optimizer_name) == OptimizerKind::lamb;
  r.cuda = o.device != "cpu";
  r.device_memory_gb = o.plan.device_memory_gb;
  const std::string text = format_plan(plan_memory(r));
  if (world.rank() == 0) std::fputs(text.c_str(), stdout), std::fflush(stdout);
  return 0;
}
}  // namespace

int run_training(TrainOptions o) {
  const Communicator& world = Communicator::world();
  if (o.plan.on) return print_plan(o);
  if (o.data.empty()) throw UsageError("--data is required (the shards to train on)");
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

namespace {

int train(TrainOptions o, const Fault& fault) {
  const bool bert = o.kind == ModelKind::bert;
  const Precision precision = parse_precision(o.precision);
  o.optimizer.kind = parse_optimizer(o.optimizer_name);
  o.optimizer.schedule = parse_schedule(o.schedule_name);
  o.optimizer.total_steps = o.max_steps;
  if (o.resume && o.checkpoint_dir.empty()) throw UsageError("--resume needs --checkpoint-dir");
  // One process per device: under mpirun, the ranks form the data × tensor × pipeline grid; a
  // data-parallel rank takes its slice of every global batch (the ranks of its tensor and
  // pipeline groups read the same one) and, on CUDA, each rank the GPU of its index on its node.
  const Communicator& world = Communicator::world();
  const Grid grid(world, {o.tensor_parallel, o.pipeline_parallel, o.virtual_stages, o.sequence_parallel});
  const Communicator& comm = grid.data();
  const bool whole_model = grid.tensor_size() == 1 && grid.pipeline_size() == 1;
  if (world.rank() != 0) set_log_level(LogLevel::warn);
  std::string device_spec = o.device;
  if (device_spec == "cuda" && world.distributed()) device_spec = cat("cuda:", world.local_rank());
  Device device = open_device(device_spec, max_threads());
  device.gemm_precision = precision;
  if (!device.cuda && precision != Precision::fp32)
    log_warn("--precision ", o.precision, " on the CPU is emulated (GEMM operands rounded before sgemm): it shows the "
             "numerics of a GPU run, slower than fp32");

  LoaderConfig lc;
  lc.sources = o.data;
  lc.kind = bert ? SampleKind::bert : SampleKind::gpt;
  lc.batch_size = o.batch_size;
  lc.seed = o.seed;
  lc.workers = o.workers;
  lc.device = device_spec;
  lc.rank = comm.rank();
  lc.world_size = comm.size();
  lc.prefetch = int(std::max<int64_t>(4, o.grad_accum + 2));  // a step holds all its micro-batches
  lc.consumer_stream = device.stream;
  lc.id_dtype = TensorDType::i32;
  lc.masking.enabled = o.dynamic_masking;
  ModelConfig preset = preset_config(o);
  if (!bert) lc.seq_len = o.seq_len ? o.seq_len : std::min<int64_t>(1024, preset.max_positions);
  Loader loader(lc);
  if (bert && o.seq_len && o.seq_len != loader.seq_len())
    throw UsageError(cat("--seq-len ", o.seq_len, ": the shards hold sequences of ", loader.seq_len(), " tokens"));
  const ModelConfig config = with_vocabulary(preset, o, loader.vocab_size(), loader.seq_len());
  for (const auto& [name, id] : loader.special_ids())
    if (id < 0 || id >= config.vocab_size)
      throw UsageError(cat("the manifest's special id ", name, " = ", id, " is outside the vocabulary (", config.vocab_size, ")"));
  TensorGroup tensor_group(grid.tensor(), device);
  ModelShard shard = model_shard(config, grid.shape(), {grid.tensor_rank(), grid.data_rank(), grid.pipeline_rank()});
  shard.tensor = &tensor_group;
  Model model(config, device, shard);
  model.set_recompute(o.recompute);
  Optimizer optimizer(o.optimizer, model, &comm, o.zero == 1, &grid.model(), &grid.tensor());
  PipelineRunner pipeline(model, grid.pipeline(), grid.pipeline_rank(), grid.pipeline_size());
  // CUDA tensors reduce over NCCL (ZeRO-1's reduce-scatter and all-gather still go through host
  // memory over MPI: NCCL's need equal blocks, ours differ by one element).
  std::unique_ptr<DeviceCommunicator> nccl;
  if (device.cuda && comm.distributed()) nccl = DeviceCommunicator::create(comm, device);
  // Buckets reduced while the backward pass runs (not under ZeRO-1, which reduce-scatters after it).
  std::unique_ptr<GradientReducer> reducer;
  if (comm.distributed() && whole_model && !optimizer.sharded() && o.bucket_mb > 0)
    reducer = std::make_unique<GradientReducer>(comm, nccl.get(), model, int64_t(o.bucket_mb * 1e6 / sizeof(float)));
  if (!o.init_from.empty()) import_weights(model, read_safetensors(o.init_from), o.init_from);  // each rank its shard
  else model.init_weights(o.seed);

  int64_t start = 0;
  LossScaler scaler;  // fp16 only: bf16 has fp32's range, and fp32 needs none
  if (precision != Precision::fp16) scaler.scale = 1.0;
  if (o.resume) {
    if (auto path = latest_checkpoint(o.checkpoint_dir)) {
      const nlohmann::json state = load_checkpoint(*path, model, optimizer);
      start = state.at("step").get<int64_t>();
      optimizer.set_updates(state.value("optimizer_updates", start));
      scaler.scale = state.value("loss_scale", scaler.scale);
      scaler.good_steps = state.value("loss_scale_good_steps", int64_t(0));
      loader.restore(LoaderState::from_json(state.at("loader").get<std::string>()));
      log_info("resumed from ", *path, " at step ", start);
    } else {
      log_info("--resume: no checkpoint in ", o.checkpoint_dir, " yet, starting from step 0");
    }
  }

  const int64_t T = loader.seq_len();
  MetricsLog metrics(world.rank() == 0 ? o.log_dir : std::string(), config, device, o.precision, o.peak_tflops,
                     world.rank() == 0);
  log_info(config.describe(), "; ", human_count(double(model.num_parameters())), " parameters on ", device.name, "; ",
           optimizer_name(o.optimizer.kind), " lr ", o.optimizer.lr, " ", schedule_name(o.optimizer.schedule),
           " warmup ", o.optimizer.warmup_steps, "; batch ", o.batch_size, " × ", o.grad_accum, " × ", comm.size(),
           comm.size() == 1 ? " data rank" : " data ranks", " × seq ", T, "; ", grid.describe(),
           grid.sequence_parallel() ? ", sequence parallel" : "",
           grid.virtual_stages() > 1 ? cat(", ", grid.virtual_stages(), " virtual stages") : std::string());

  // One machine-readable line for scripts/extract_logs.py: what ran, and at what scale.
  int64_t whole_parameters = 0;  // the whole model's, whatever the layout (the TFLOPs formulas count them)
  for (const ParamInfo& p : whole_model_params(config)) whole_parameters += p.numel;
  if (world.rank() == 0) {
    const nlohmann::json run = {{"kind", bert ? "bert" : "gpt"},
                                {"model", config.name},
                                {"parameters", model.num_parameters()},  // this rank's shard
                                {"model_parameters", whole_parameters},
                                {"layers", config.layers},
                                {"hidden", config.hidden},
                                {"seq_len", T},
                                {"batch_size", o.batch_size},
                                {"grad_accum", o.grad_accum},
                                {"world_size", world.size()},
                                {"data_parallel", grid.data_size()},
                                {"tensor_parallel", grid.tensor_size()},
                                {"pipeline_parallel", grid.pipeline_size()},
                                {"virtual_stages", grid.virtual_stages()},
                                {"sequence_parallel", grid.sequence_parallel()},
                                {"global_batch", o.batch_size * o.grad_accum * comm.size()},
                                {"precision", o.precision},
                                {"recompute", o.recompute},
                                {"zero", o.zero},
                                {"optimizer", optimizer_name(o.optimizer.kind)},
                                {"device", device.name},
                                {"peak_tflops", metrics.peak_tflops()}};
    std::printf("config: %s\n", run.dump().c_str());
    std::fflush(stdout);
  }

  auto next_batch = [&]() {
    for (int tries = 0; tries < 2; ++tries)
      if (auto b = loader.next()) return std::move(*b);
    throw Error("the loader yields no batch: are the shards empty, or smaller than one batch?");
  };
  auto save = [&](int64_t step) {
    nlohmann::json state = {{"step", step},
                            {"loader", loader.state().to_json()},
                            {"seed", o.seed},
                            {"model", config.describe()},
                            {"optimizer", optimizer_name(o.optimizer.kind)},
                            {"optimizer_updates", optimizer.updates()},
                            {"precision", o.precision},
                            {"loss_scale", scaler.scale},
                            {"loss_scale_good_steps", scaler.good_steps}};
    // Whole tensors: the grid's shards put together on world rank 0, which writes; the others wait.
    std::vector<float> m, v;
    optimizer.moments_to_host(m, v);
    const std::string path = save_checkpoint(o.checkpoint_dir, step, model, m, v, state, &grid);
    if (world.rank() == 0) log_info("checkpoint ", path);
    world.barrier();
  };

  std::vector<int32_t> host_positions;
  for (int64_t step = start + 1; step <= o.max_steps; ++step) {
    const double t0 = now_seconds();
    // The step's micro-batches first: the mean losses divide by the whole step's predictions
    // (BERT) or tokens (GPT) over every rank, so the summed gradients are one big batch's.
    std::vector<Batch> batches;
    int64_t counts[2] = {0, 0};  // this step's predictions (BERT) or tokens (GPT), and samples
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      batches.push_back(next_batch());
      const Batch& b = batches.back();
      if (bert) {
        host_positions.resize(size_t(b.masked_lm_positions.numel()));
        copy_to_host(device, host_positions.data(), b.masked_lm_positions.data, host_positions.size() * sizeof(int32_t));
        counts[0] += count_predictions(host_positions.data(), b.size, b.masked_lm_positions.shape[1]);
      } else {
        counts[0] += b.size * T;
      }
      counts[1] += b.size;
    }
    const double data_wait = now_seconds() - t0;
    const int64_t local_samples = counts[1];
    comm.all_reduce_sum(counts, 2);  // over the data-parallel ranks (their tensor and pipeline peers read alike)
    model.zero_grads();
    std::vector<ModelInputs> micro;
    for (const Batch& b : batches) {
      micro.push_back(inputs_of(b, o.kind));
      micro.back().lm_denominator = double(counts[0]);
      micro.back().nsp_denominator = double(counts[1]);
    }
    // Dropout masks: a function of (seed, step, micro-batch, data rank), so a resumed run, and every
    // tensor and pipeline rank of a replica, draws the same.
    auto key = [&](int m) {
      return (CounterRng::mix(CounterRng::mix(o.seed ^ 0xd0d0d0d0ULL) ^ (uint64_t(step) * 131 + uint64_t(m))) ^
              CounterRng::mix(uint64_t(grid.data_rank()) + 1)) | 1;
    };
    // The last micro-batch's backward pass hands its finished gradients to the reducer.
    auto attach = [&](int) {
      if (reducer) model.set_grads_ready([&](int64_t b, int64_t e) { reducer->ready(b, e); });
    };
    Losses sum = pipeline.run(micro, key, float(scaler.scale), true, attach);
    model.set_grads_ready(nullptr);
    for (Batch& b : batches) b.release();
    batches.clear();
    finish_gradients(model, grid, tensor_group);
    // Data parallel: every rank adds the others' gradients (each is already divided by the
    // step's global count).
    if (comm.distributed()) {
      if (optimizer.sharded())
        reduce_scatter_gradients(comm, model, optimizer);
      else if (reducer)
        reducer->finish();
      else
        all_reduce_gradients(comm, nccl.get(), model);
    }
    // The losses: the last stage's shares (alike on its tensor ranks), summed over the data ranks.
    if (world.distributed()) {
      const bool counts_loss = grid.last_stage() && grid.tensor_rank() == 0;
      double shares[3] = {counts_loss ? sum.total : 0, counts_loss ? sum.mlm : 0, counts_loss ? sum.nsp : 0};
      world.all_reduce_sum(shares, 3);
      sum.total = shares[0], sum.mlm = shares[1], sum.nsp = shares[2];
    }
    const int64_t samples = counts[1];
    const int64_t predictions = bert ? counts[0] : 0;
    if (!std::isfinite(sum.total))
      throw Error(cat("step ", step, ": the loss is ", sum.total, "; first non-finite tensor: ", first_bad_tensor(model)));
    if (fault.rank == world.rank() && fault.step == step)  // tests/e2e/test_trainer_{mpi,3d}.py
      throw Error(cat("step ", step, ": fault injected by PRETRAIN_FAULT=", fault.rank, ":", fault.step));
    const double loss_scale = scaler.scale;
    const UpdateInfo u = optimizer.step(step, 1.0 / loss_scale);
    if (optimizer.sharded() && u.applied) all_gather_weights(comm, model, optimizer);
    if (precision == Precision::fp16) {
      scaler.update(u.applied);
      if (!u.applied) log_warn("step ", step, ": fp16 gradients overflowed at loss scale ", loss_scale,
                               ": step skipped, loss scale now ", scaler.scale);
    } else if (!u.applied) {
      throw Error(cat("step ", step, ": the gradient norm is ", u.grad_norm, "; first non-finite tensor: ",
                      first_bad_tensor(model)));
    }
    synchronize(device);
    const double seconds = now_seconds() - t0;
    StepRecord r;
    r.step = step;
    r.max_steps = o.max_steps;
    r.losses = sum;
    r.lr = u.lr;
    r.grad_norm = u.grad_norm;
    r.loss_scale = loss_scale;
    r.skipped = !u.applied;
    r.seconds = seconds;
    r.data_wait = data_wait;
    r.samples = samples;
    r.tokens = samples * T;
    // TFLOPs per device: this rank's samples (with the step's mean masked count).
    r.flops = double(local_samples) * train_flops_per_sample(config, T, bert ? double(predictions) / double(samples) : 0) /
              double(grid.tensor_size() * grid.pipeline_size());
    r.device_bytes = device_bytes_allocated().peak;
    r.pipeline_wait = pipeline.last_wait_seconds();
    metrics.record(r, step % o.log_interval == 0 || step == o.max_steps || step == start + 1);
    if (!o.checkpoint_dir.empty() && o.save_interval > 0 && step % o.save_interval == 0 && step != o.max_steps)
      save(step);
  }
  if (!o.checkpoint_dir.empty() && start < o.max_steps) save(o.max_steps);
  if (!o.export_path.empty()) {
    const auto weights = export_weights(model, &grid);  // a collective: whole tensors on rank 0
    if (world.rank() == 0) {
      write_safetensors(o.export_path, weights, {{"format", "pt"}, {"model", config.describe()}});
      log_info("weights written to ", o.export_path);
    }
  }
  metrics.summary();
  report_memory(world, grid, device_bytes_allocated().peak);
  close_device(device);
  return 0;
}

}  // namespace

}  // namespace pretrain
