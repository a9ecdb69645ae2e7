// The training loop that bert_pretrain and gpt_pretrain share: shards through the loader, steps of
// forward/backward over --grad-accum micro-batches run by the pipeline schedule on this rank's
// shard of the model, the data-parallel reduction, the optimizer, one log line and one
// metrics.jsonl object per iteration, evaluations on held-out data every --eval-interval,
// checkpoints every --save-interval, --resume; --plan instead
// prints what a layout needs without running it.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/comm_watchdog.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"

namespace pretrain {

// Which model: a preset and what the command line overrides.
struct ModelOptions {
  std::string preset = "tiny";
  int64_t layers = 0, hidden = 0, heads = 0;  // 0: the preset's
  int64_t vocab_size = 0;     // 0: the manifest's (may pad it, never cut it)
  int64_t max_positions = 0;  // 0: the preset's
  double dropout = -1;        // < 0: the preset's
  bool recompute = false;
};

// GPT's tokens per sample unless --seq-len says otherwise (GPT-2's context), at most the model's
// positions. BERT's (for --plan: training takes the shards') is formats/bert_defaults.h's.
inline constexpr int64_t kGptSeqLen = 1024;

// What the loader reads, in what batches.
struct DataOptions {
  std::vector<std::string> sources;  // directories, manifests, files, globs
  int64_t batch_size = 32;  // samples per micro-batch per data-parallel rank
  int64_t grad_accum = 1;   // micro-batches per step
  int64_t seq_len = 0;      // 0: kGptSeqLen (at most the model's positions); BERT: --plan only (kBertSeqLen)
  bool dynamic_masking = false;
  int workers = 2;
};

// The data × tensor × pipeline grid (data parallel = ranks / (tensor × pipeline)).
struct ParallelOptions {
  int tensor = 1, pipeline = 1, virtual_stages = 1;
  bool sequence_parallel = false;
  int zero = 0;            // 1: ZeRO stage 1 over the data-parallel ranks
  double bucket_mb = 25;   // data parallel: gradient bucket size (0: one all-reduce after backward)
};

// How long it runs, on what, and what it writes.
struct RunOptions {
  int64_t max_steps = 100;
  int64_t log_interval = 1;
  int64_t save_interval = 0;  // 0: only at the end (when --checkpoint-dir is set)
  std::string checkpoint_dir;
  bool resume = false;
  std::string init_from;    // safetensors weights to start from
  std::string export_path;  // safetensors weights written at the end
  std::string log_dir;      // metrics.jsonl goes here; empty: no file
  uint64_t seed = 1234;     // weights, dropout and data order
  std::string precision = "fp32";
  std::string device = "cpu";
  double peak_tflops = 0;  // for MFU; 0: the GPU table, or a measured sgemm rate on CPU
  double comm_timeout = kCommTimeoutTrainer;  // seconds a collective may wait (common/comm_watchdog.h); 0: forever
};

// Evaluation during training (Megatron's --eval-interval / --eval-iters): every `interval` steps and
// after the last, `iters` iterations of held-out data, each a global batch as a training step
// takes it, forward only, dropout off, no update. Its loader starts over at the beginning of the
// held-out data each time, so every evaluation sees the same batches.
struct EvalOptions {
  std::vector<std::string> data;  // empty: the valid/ split beside each --data directory, when there is one
  int64_t interval = -1;          // -1: 1000 (Megatron's) when there is held-out data, else off; 0: off
  int64_t iters = 100;            // at most the held-out data's whole iterations; 0: off
};

// --plan: print each rank's memory and traffic for this layout and batch, then exit (no data read).
struct PlanOptions {
  bool on = false;
  int world_size = 0;           // 0: the ranks of this launch, or tensor × pipeline outside mpirun
  int64_t max_predictions = 0;  // BERT; 0: ceil(kBertMaskedLmProb × seq)
  double device_memory_gb = 0;
};

struct TrainOptions {
  ModelKind kind = ModelKind::bert;
  ModelOptions model;
  DataOptions data;
  ParallelOptions parallel;
  OptimizerConfig optimizer;
  std::string optimizer_name = "adamw", schedule_name = "linear";
  RunOptions run;
  EvalOptions eval;
  PlanOptions plan;
};

// Registers the common options on app (the main adds nothing but its description and defaults).
void add_train_options(CLI::App& app, TrainOptions& options);
// Runs the training (or --plan); returns the exit code. Throws Error / UsageError as the tools
// expect; under mpirun a rank that fails alone aborts the job, naming itself.
int run_training(TrainOptions options);

}  // namespace pretrain
