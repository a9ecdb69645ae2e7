// What the trainer reports (trainer/metrics.h): one JSON object a step in metrics.jsonl with the
// fields scripts/extract_logs.py reads and the rates derived from the step's record; BERT's two
// losses only where there are two; evaluations as their own objects without step timing; the
// stdout lines and the summary, which leaves the warm-up steps out; nothing on stdout from ranks
// that do not print and no file without --log-dir; a line that cannot be written ends the run
// naming the file. Also the GPU peak table and this process's resident memory.
#include "trainer/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "fixtures.h"
#include "test_util.h"

namespace pretrain::metrics_test {
namespace {

using ::testing::internal::CaptureStdout;
using ::testing::internal::GetCapturedStdout;
using pretrain::testing::TempDir;
using pretrain::testing::tiny_model;

const Device kCpu{};
constexpr double kPeak = 2.0;  // TFLOPs: given, so no sgemm is measured

std::vector<nlohmann::json> lines_of(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Step `step` of 10: 0.5 s for 8 samples of 128 tokens and 4e12 FLOPs (8 TFLOPs, MFU 4 at peak 2).
StepRecord step_record(int64_t step, double total, double mlm, double nsp) {
  StepRecord r;
  r.step = step, r.max_steps = 10;
  r.losses.total = total, r.losses.mlm = mlm, r.losses.nsp = nsp;
  r.lr = 1e-4, r.grad_norm = 1.5, r.loss_scale = 65536, r.skipped = step == 2;
  r.seconds = 0.5, r.data_wait = 0.01, r.pipeline_wait = 0.002;
  r.samples = 8, r.tokens = 1024, r.flops = 4e12;
  r.device_bytes = 3000000;
  return r;
}

TEST(MetricsLog, EachStepIsOneJsonObjectWithItsRates) {
  TempDir dir;
  {
    MetricsLog log(dir.path(), tiny_model(ModelKind::bert), kCpu, "fp32", kPeak);
    EXPECT_EQ(log.peak_tflops(), kPeak);
    CaptureStdout();
    log.record(step_record(1, 7.0, 6.0, 1.0), true);
    log.record(step_record(2, 6.5, 5.75, 0.75), false);  // a step between log lines: in the file only
    const std::string out = GetCapturedStdout();
    EXPECT_EQ(out.find("step      2/10"), std::string::npos) << out;
    EXPECT_NE(out.find("step      1/10 | loss 7.0000 (mlm 6.0000 nsp 1.0000) | lr 1.000e-04 | gnorm 1.500 | 500.0 ms | "
                       "data 10.00 ms | 16.0 samples/s | 2048 tokens/s | 8.0000 TFLOPs | MFU 400.00% | device "),
              std::string::npos)
        << out;
  }
  const auto lines = lines_of(dir.file("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json& j = lines[0];
  EXPECT_EQ(j["step"], 1);
  EXPECT_EQ(j["loss"], 7.0);
  EXPECT_EQ(j["mlm_loss"], 6.0);
  EXPECT_EQ(j["nsp_loss"], 1.0);
  EXPECT_EQ(j["lr"], 1e-4);
  EXPECT_EQ(j["grad_norm"], 1.5);
  EXPECT_EQ(j["ms"], 500.0);
  EXPECT_EQ(j["data_ms"], 10.0);
  EXPECT_EQ(j["pipeline_wait_ms"], 2.0);
  EXPECT_EQ(j["samples"], 8);
  EXPECT_EQ(j["tokens"], 1024);
  EXPECT_EQ(j["samples_per_s"], 16.0);
  EXPECT_EQ(j["tokens_per_s"], 2048.0);
  EXPECT_EQ(j["tflops"], 8.0);
  EXPECT_EQ(j["mfu"], 4.0);
  EXPECT_EQ(j["device_mb"], 3.0);
  EXPECT_GT(j["host_mb"].get<double>(), 0.0);
  EXPECT_EQ(j["loss_scale"], 65536.0);
  EXPECT_EQ(j["skipped"], false);
  EXPECT_EQ(lines[1]["skipped"], true);
  EXPECT_EQ(lines[1]["mlm_loss"], 5.75);
}

// GPT's one loss has no mlm / nsp fields; a second log over the same directory appends (a
// resumed run keeps the steps before it).
TEST(MetricsLog, OneLossHasNoMlmAndNspFieldsAndARestartAppends) {
  TempDir dir;
  for (int64_t step : {1, 2}) {
    MetricsLog log(dir.path(), tiny_model(ModelKind::gpt), kCpu, "fp32", kPeak, false);
    log.record(step_record(step, 3.25, 3.25, 0.0), true);
  }
  const auto lines = lines_of(dir.file("metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& j : lines) {
    EXPECT_EQ(j["loss"], 3.25);
    EXPECT_FALSE(j.contains("mlm_loss")) << j.dump();
    EXPECT_FALSE(j.contains("nsp_loss")) << j.dump();
  }
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_EQ(lines[1]["step"], 2);
}

// An evaluation: its own object marked "eval", with eval_* fields and no step timing; BERT's
// accuracy, GPT's perplexity.
TEST(MetricsLog, EvaluationsAreTheirOwnObjects) {
  TempDir dir;
  EvalRecord e;
  e.step = 4, e.max_steps = 10, e.iterations = 3, e.samples = 24, e.seconds = 0.25;
  e.losses.total = 2.0, e.losses.mlm = 1.5, e.losses.nsp = 0.5, e.correct = 30, e.predictions = 40;
  CaptureStdout();
  {
    MetricsLog bert(dir.file("bert"), tiny_model(ModelKind::bert), kCpu, "fp32", kPeak);
    bert.record_eval(e);
    MetricsLog gpt(dir.file("gpt"), tiny_model(ModelKind::gpt), kCpu, "fp32", kPeak);
    e.losses.mlm = e.losses.nsp = 0;
    gpt.record_eval(e);
  }
  const std::string out = GetCapturedStdout();
  EXPECT_NE(out.find("eval at step 4/10 | eval loss 2.0000 (mlm 1.5000 nsp 0.5000) | mlm accuracy 75.00% | 3 iterations, "
                     "24 samples | 250.0 ms\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("eval at step 4/10 | eval loss 2.0000 | perplexity 7.389 |"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nstep "), std::string::npos) << "an evaluation is no step line: " << out;

  const auto bert = lines_of(dir.file("bert/metrics.jsonl")), gpt = lines_of(dir.file("gpt/metrics.jsonl"));
  ASSERT_EQ(bert.size(), 1u);
  ASSERT_EQ(gpt.size(), 1u);
  const nlohmann::json& b = bert[0];
  EXPECT_EQ(b["eval"], true);
  EXPECT_EQ(b["step"], 4);
  EXPECT_EQ(b["eval_loss"], 2.0);
  EXPECT_EQ(b["eval_mlm_loss"], 1.5);
  EXPECT_EQ(b["eval_nsp_loss"], 0.5);
  EXPECT_EQ(b["eval_mlm_accuracy"], 0.75);
  EXPECT_EQ(b["eval_predictions"], 40);
  EXPECT_EQ(b["eval_iterations"], 3);
  EXPECT_EQ(b["eval_samples"], 24);
  EXPECT_EQ(b["eval_ms"], 250.0);
  for (const char* step_field : {"loss", "ms", "tflops", "samples_per_s"}) EXPECT_FALSE(b.contains(step_field)) << step_field;
  EXPECT_FALSE(b.contains("eval_perplexity"));
  EXPECT_NEAR(gpt[0]["eval_perplexity"].get<double>(), std::exp(2.0), 1e-12);
  EXPECT_FALSE(gpt[0].contains("eval_mlm_accuracy"));
  EXPECT_FALSE(gpt[0].contains("eval_mlm_loss"));
}

// The summary's means leave out the first step of a short run and the first fifth of a run of
// more than 10 steps (as DLPerf's log extraction does).
TEST(MetricsLog, TheSummaryLeavesOutTheWarmUpSteps) {
  auto summary = [](int steps) {
    MetricsLog log("", tiny_model(ModelKind::gpt), kCpu, "fp32", kPeak);
    CaptureStdout();
    for (int s = 1; s <= steps; ++s) {
      StepRecord r = step_record(s, 3.0, 3.0, 0.0);
      r.max_steps = steps;
      r.seconds = s <= steps / 5 || s == 1 ? 10.0 : 0.5;  // the warm-up is slow
      log.record(r, false);
    }
    log.summary();
    return GetCapturedStdout();
  };
  const std::string short_run = summary(5);
  EXPECT_NE(short_run.find("summary: steps 2-5 | 500.0 ms/step | 16.0 samples/s | 2048 tokens/s | 8.0000 TFLOPs | "
                           "MFU 400.00% | peak host "),
            std::string::npos)
      << short_run;
  const std::string long_run = summary(20);
  EXPECT_NE(long_run.find("summary: steps 5-20 | 500.0 ms/step |"), std::string::npos) << long_run;
  MetricsLog empty("", tiny_model(ModelKind::gpt), kCpu, "fp32", kPeak);
  CaptureStdout();
  empty.summary();
  EXPECT_EQ(GetCapturedStdout(), "") << "no steps, no summary";
}

// print = false (data-parallel ranks but the first): nothing on stdout, whatever record() is
// asked; without a log directory no file.
TEST(MetricsLog, ARankThatDoesNotPrintPrintsNothing) {
  TempDir dir;
  CaptureStdout();
  {
    MetricsLog log("", tiny_model(ModelKind::bert), kCpu, "fp32", kPeak, false);
    log.record(step_record(1, 7.0, 6.0, 1.0), true);
    EvalRecord e;
    e.losses.total = 1;
    log.record_eval(e);
    log.summary();
  }
  EXPECT_EQ(GetCapturedStdout(), "");
  EXPECT_FALSE(file_exists(dir.file("metrics.jsonl")));
}

// A full disk: the first line that cannot be written ends the run naming the file, instead of
// the stream dropping it and every later line without a word.
TEST(MetricsLog, ALineThatCannotBeWrittenIsAnErrorNamingTheFile) {
  if (!file_exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  TempDir dir;
  std::filesystem::create_symlink("/dev/full", dir.file("metrics.jsonl"));
  MetricsLog log(dir.path(), tiny_model(ModelKind::gpt), kCpu, "fp32", kPeak, false);
  const std::string e = testing::error_message([&] { log.record(step_record(1, 3.0, 3.0, 0.0), false); });
  EXPECT_NE(e.find(dir.file("metrics.jsonl")), std::string::npos) << e;
  EXPECT_NE(e.find("No space left on device"), std::string::npos) << e;
}

TEST(MetricsLog, GpuPeaksComeFromTheTableByNameAndPrecision) {
  EXPECT_EQ(gpu_peak_tflops("NVIDIA H100 80GB HBM3", "bf16"), 989);
  EXPECT_EQ(gpu_peak_tflops("NVIDIA H100 80GB HBM3", "fp32"), 67);
  EXPECT_EQ(gpu_peak_tflops("NVIDIA H100 PCIe", "fp16"), 756) << "the PCIe card before the SXM one";
  EXPECT_EQ(gpu_peak_tflops("NVIDIA A100-SXM4-40GB", "fp16"), 312);
  EXPECT_EQ(gpu_peak_tflops("NVIDIA A10G", "fp32"), 31.2);
  EXPECT_EQ(gpu_peak_tflops("cpu (2 threads)", "fp32"), 0) << "unknown: no MFU";
  const size_t rss = host_rss_bytes();  // read first: the peak never falls, the resident size may grow meanwhile
  EXPECT_GT(rss, 0u);
  EXPECT_GE(host_peak_rss_bytes(), rss);
}

}  // namespace
}  // namespace pretrain::metrics_test
