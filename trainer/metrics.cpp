#include "trainer/metrics.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"

namespace pretrain {

double gpu_peak_tflops(const std::string& name, const std::string& precision) {
  struct Peak { const char* name; double half, fp32; };  // dense tensor-core bf16/fp16, plain fp32
  static const Peak table[] = {{"H200", 989, 67},  {"H100 PCIe", 756, 51}, {"H100", 989, 67}, {"A100", 312, 19.5},
                               {"A10G", 125, 31.2}, {"A10", 125, 31.2},     {"L40S", 362, 91.6}, {"L4", 121, 30.3},
                               {"V100", 125, 15.7}, {"T4", 65, 8.1}};
  for (const Peak& p : table)
    if (name.find(p.name) != std::string::npos) return precision == "fp32" ? p.fp32 : p.half;
  return 0;
}

double measure_cpu_peak_tflops() {
  const int64_t n = 1024;
  Device cpu;
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm(cpu, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, 2.0 * double(n) * double(n) * double(n) / s / 1e12);
  }
  return best;
}

namespace {
size_t status_kb(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, len) == 0) kb = size_t(std::strtoull(line + len, nullptr, 10));
  std::fclose(f);
  return kb * 1024;
}
}  // namespace

size_t host_rss_bytes() { return status_kb("VmRSS:"); }
size_t host_peak_rss_bytes() { return status_kb("VmHWM:"); }

MetricsLog::MetricsLog(const std::string& log_dir, const ModelConfig& config, const Device& device,
                       const std::string& precision, double peak_tflops, bool print)
    : print_(print), kind_(config.kind) {
  peak_ = peak_tflops > 0 ? peak_tflops : device.cuda ? gpu_peak_tflops(device.name, precision) : measure_cpu_peak_tflops();
  if (!log_dir.empty()) {
    make_dirs(log_dir);
    path_ = path_join(log_dir, "metrics.jsonl");
    jsonl_.open(path_, std::ios::app);
    if (!jsonl_) throw_errno("cannot open", path_);
  }
  log_info("MFU against a peak of ", peak_, " TFLOPs per device",
           device.cuda ? cat(" (GPU table, ", precision, ")") : std::string(" (measured OpenBLAS sgemm)"));
}

// A line that cannot be written (a full disk) ends the run naming the file: the stream would
// otherwise drop this line and every later one without a word.
void MetricsLog::write_line(const std::string& line) {
  errno = 0;
  jsonl_ << line << "\n";
  jsonl_.flush();
  if (!jsonl_) {
    if (errno == 0) throw Error(Where{path_}, "write failed");
    throw_errno("write failed", path_);
  }
}

void MetricsLog::record(const StepRecord& r, bool print) {
  records_.push_back(r);
  const double tflops = r.flops / r.seconds / 1e12;
  const double mfu = peak_ > 0 ? tflops / peak_ : 0;
  const double samples_s = double(r.samples) / r.seconds, tokens_s = double(r.tokens) / r.seconds;
  const size_t host = host_rss_bytes();
  if (jsonl_.is_open()) {
    nlohmann::json j = {{"step", r.step},         {"loss", r.losses.total},  {"lr", r.lr},
                        {"grad_norm", r.grad_norm}, {"ms", r.seconds * 1e3}, {"data_ms", r.data_wait * 1e3},
                        {"pipeline_wait_ms", r.pipeline_wait * 1e3},
                        {"samples", r.samples},   {"tokens", r.tokens},      {"samples_per_s", samples_s},
                        {"tokens_per_s", tokens_s}, {"tflops", tflops},     {"mfu", mfu},
                        {"device_mb", double(r.device_bytes) / 1e6}, {"host_mb", double(host) / 1e6},
                        {"loss_scale", r.loss_scale}, {"skipped", r.skipped}};
    if (r.losses.nsp != 0 || r.losses.mlm != r.losses.total) j["mlm_loss"] = r.losses.mlm, j["nsp_loss"] = r.losses.nsp;
    write_line(j.dump());
  }
  if (!print || !print_) return;
  char loss[96];
  if (r.losses.mlm != r.losses.total)
    std::snprintf(loss, sizeof loss, "loss %.4f (mlm %.4f nsp %.4f)", r.losses.total, r.losses.mlm, r.losses.nsp);
  else
    std::snprintf(loss, sizeof loss, "loss %.4f", r.losses.total);
  std::printf("step %6lld/%lld | %s | lr %.3e | gnorm %.3f | %.1f ms | data %.2f ms | %.1f samples/s | %.0f tokens/s | "
              "%.4f TFLOPs | MFU %.2f%% | device %s | host %s\n",
              static_cast<long long>(r.step), static_cast<long long>(r.max_steps), loss, r.lr, r.grad_norm,
              r.seconds * 1e3, r.data_wait * 1e3, samples_s, tokens_s, tflops, mfu * 100,
              human_bytes(double(r.device_bytes)).c_str(), human_bytes(double(host)).c_str());
  std::fflush(stdout);
}

void MetricsLog::record_eval(const EvalRecord& r) {
  const bool bert = kind_ == ModelKind::bert;
  const double accuracy = r.predictions > 0 ? double(r.correct) / double(r.predictions) : 0;
  const double perplexity = std::exp(r.losses.total);
  if (jsonl_.is_open()) {
    nlohmann::json j = {{"step", r.step},          {"eval", true},         {"eval_loss", r.losses.total},
                        {"eval_iterations", r.iterations}, {"eval_samples", r.samples}, {"eval_ms", r.seconds * 1e3}};
    if (bert) {
      j["eval_mlm_loss"] = r.losses.mlm, j["eval_nsp_loss"] = r.losses.nsp;
      j["eval_mlm_accuracy"] = accuracy, j["eval_predictions"] = r.predictions;
    } else {
      j["eval_perplexity"] = perplexity;
    }
    write_line(j.dump());
  }
  if (!print_) return;
  char what[128];
  if (bert)
    std::snprintf(what, sizeof what, "eval loss %.4f (mlm %.4f nsp %.4f) | mlm accuracy %.2f%%", r.losses.total,
                  r.losses.mlm, r.losses.nsp, accuracy * 100);
  else
    std::snprintf(what, sizeof what, "eval loss %.4f | perplexity %.3f", r.losses.total, perplexity);
  std::printf("eval at step %lld/%lld | %s | %lld iterations, %lld samples | %.1f ms\n", static_cast<long long>(r.step),
              static_cast<long long>(r.max_steps), what, static_cast<long long>(r.iterations),
              static_cast<long long>(r.samples), r.seconds * 1e3);
  std::fflush(stdout);
}

void MetricsLog::summary() const {
  if (records_.empty() || !print_) return;
  // As DLPerf's extraction does, leave out the first iterations (allocation, caches, threads).
  const size_t skip = records_.size() > 10 ? records_.size() / 5 : records_.size() > 1 ? 1 : 0;
  double seconds = 0, samples = 0, tokens = 0, flops = 0;
  for (size_t i = skip; i < records_.size(); ++i)
    seconds += records_[i].seconds, samples += double(records_[i].samples), tokens += double(records_[i].tokens),
        flops += records_[i].flops;
  std::printf("summary: steps %lld-%lld | %.1f ms/step | %.1f samples/s | %.0f tokens/s | %.4f TFLOPs | MFU %.2f%% | "
              "peak host %s\n",
              static_cast<long long>(records_[skip].step), static_cast<long long>(records_.back().step),
              seconds * 1e3 / double(records_.size() - skip), samples / seconds, tokens / seconds, flops / seconds / 1e12,
              peak_ > 0 ? flops / seconds / 1e12 / peak_ * 100 : 0.0, human_bytes(double(host_peak_rss_bytes())).c_str());
  std::fflush(stdout);
}

}  // namespace pretrain
