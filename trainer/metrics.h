// What each training iteration reports: one human line on stdout and one JSON object in
// <log-dir>/metrics.jsonl (the fields scripts/extract_logs.py reads). TFLOPs per device count
// train_flops_per_sample (model.h); MFU divides by the device's peak: a table of GPU models for
// CUDA, a measured OpenBLAS sgemm rate on the CPU (or --peak-tflops).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "trainer/model.h"

namespace pretrain {

struct StepRecord {
  int64_t step = 0, max_steps = 0;
  Losses losses;
  double lr = 0, grad_norm = 0;
  double loss_scale = 1;  // fp16's dynamic loss scale
  bool skipped = false;   // fp16 overflow: no update
  double seconds = 0, data_wait = 0;
  double pipeline_wait = 0;  // this rank's time waiting for its pipeline neighbours (the bubble, and imbalance)
  // Samples are instances (a packed BERT row holds several); tokens are rows × seq_len, padding
  // included, and flops those of the rows computed.
  int64_t samples = 0, tokens = 0;
  double flops = 0;
  size_t device_bytes = 0;  // the peak of allocated arenas: parameters, gradients, optimizer state, activations
};

// One evaluation on held-out data (train.h's EvalOptions): the mean over its iterations of each
// iteration's mean losses, as Megatron's evaluate() averages them, summed over the data ranks.
struct EvalRecord {
  int64_t step = 0, max_steps = 0;
  Losses losses;              // total = BERT mlm + nsp, GPT lm
  int64_t correct = 0;        // BERT: masked predictions whose target had the largest logit
  int64_t predictions = 0;    // BERT: masked predictions counted
  int64_t iterations = 0, samples = 0;  // samples: instances, as StepRecord's
  double seconds = 0;         // not part of any step's time
};

// Peak dense TFLOPs of a GPU by its name, for a precision ("fp32", "bf16", "fp16"); 0 if unknown.
double gpu_peak_tflops(const std::string& name, const std::string& precision);
// sgemm TFLOPs this process reaches on the CPU (best of a few 1024³ products).
double measure_cpu_peak_tflops();
// Resident and peak resident memory of this process, bytes (Linux /proc/self/status).
size_t host_rss_bytes();
size_t host_peak_rss_bytes();

class MetricsLog {
 public:
  // print = false: record only (ranks other than 0 of a data-parallel run).
  MetricsLog(const std::string& log_dir, const ModelConfig& config, const Device& device, const std::string& precision,
             double peak_tflops, bool print = true);
  void record(const StepRecord& r, bool print);
  // An evaluation: one "eval" line on stdout (not a "step" line: scripts/extract_logs.py reads
  // those) and one object in metrics.jsonl with "eval": true and eval_* fields (no step timing).
  void record_eval(const EvalRecord& r);
  void summary() const;  // mean throughput over the steps after the first (warm-up) ones
  double peak_tflops() const { return peak_; }

 private:
  void write_line(const std::string& line);

  std::ofstream jsonl_;
  std::string path_;
  double peak_ = 0;
  bool print_ = true;
  ModelKind kind_;
  std::vector<StepRecord> records_;
};

}  // namespace pretrain
