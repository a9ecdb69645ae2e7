// The training loop that bert_pretrain and gpt_pretrain share: shards through the loader, steps of
// forward/backward over --grad-accum micro-batches, the optimizer, one log line and one
// metrics.jsonl object per iteration, checkpoints every --save-interval, --resume.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "trainer/model.h"
#include "trainer/optimizer.h"

namespace pretrain {

struct TrainOptions {
  ModelKind kind = ModelKind::bert;
  std::vector<std::string> data;  // shard sources (directories, manifests, files, globs)
  std::string model = "tiny";
  int64_t layers = 0, hidden = 0, heads = 0, vocab_size = 0;  // 0: the preset's / the manifest's
  int64_t max_positions = 0;  // 0: the preset's
  double dropout = -1;  // < 0: the preset's
  int64_t batch_size = 32;  // per micro-batch
  int64_t grad_accum = 1;
  int64_t seq_len = 0;      // GPT: tokens per sample (default 1024, or the model's positions); BERT: --plan only
  int64_t max_steps = 100;
  OptimizerConfig optimizer;
  std::string optimizer_name = "adamw", schedule_name = "linear";
  std::string precision = "fp32";
  std::string device = "cpu";
  int64_t log_interval = 1;
  int64_t save_interval = 0;  // 0: only at the end (when --checkpoint-dir is set)
  std::string checkpoint_dir;
  bool resume = false;
  std::string init_from;    // safetensors weights to start from
  std::string export_path;  // safetensors weights written at the end
  std::string log_dir;      // metrics.jsonl (and train.log) go here; empty: no files
  uint64_t seed = 1234;
  bool recompute = false;
  int zero = 0;  // 1: ZeRO stage 1
  double bucket_mb = 25;  // data parallel: gradient bucket size (0: one all-reduce after backward)
  // The grid (data parallel = ranks / (tensor × pipeline)).
  int tensor_parallel = 1, pipeline_parallel = 1, virtual_stages = 1;
  bool sequence_parallel = false;
  bool dynamic_masking = false;
  int workers = 2;
  double peak_tflops = 0;  // for MFU; 0: the GPU table, or a measured sgemm rate on CPU
  int threads = 0;
  // --plan: print each rank's memory and traffic for this layout and batch, then exit (no data read).
  struct Plan {
    bool on = false;
    int world_size = 0;         // 0: the ranks of this launch
    int64_t max_predictions = 0;  // BERT; 0: ceil(0.15 × seq)
    double device_memory_gb = 0;
  } plan;
};

// Registers the common options on app (the main adds nothing but its description).
void add_train_options(CLI::App& app, TrainOptions& options);
// Runs the training; returns the exit code. Throws Error / UsageError as the tools expect.
int run_training(TrainOptions options);

}  // namespace pretrain
