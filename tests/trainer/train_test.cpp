// The training loop (trainer/train.h) in this process, on a tiny GPT and an llm.c shard written
// here: the command line's options and their checks; the refusals run_training makes before it
// trains, each naming the option and the numbers; a short run's metrics.jsonl, whose learning
// rates are the schedule's, its config line, checkpoint and export; a run that diverges stops at
// the step whose loss is not finite, naming the first tensor that is not; --plan prints without
// data. (The tools end to end, resume after a kill and the parallel layouts: tests/e2e.)
#include "trainer/train.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/llmc.h"
#include "test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/safetensors.h"

namespace pretrain::train_test {
namespace {

using ::testing::internal::CaptureStdout;
using ::testing::internal::GetCapturedStdout;
using pretrain::testing::TempDir;

constexpr int64_t kVocab = 64;

// An llm.c shard of 2,048 tokens cycling through the vocabulary with a stride, and the manifest
// beside it that names its tokenizer's kind and vocabulary size, as make-pretraining-shards would.
std::string write_shards(const TempDir& dir) {
  const std::string shards = dir.file("shards");
  make_dirs(shards);
  LlmcWriter writer(path_join(shards, "train.bin"));
  for (int64_t i = 0; i < 2048; ++i) writer.add((i * 7 + i / 64) % kVocab);
  writer.commit();
  Manifest m;
  m.format = kFormatLlmc;
  m.tokenizer.kind = "bpe";
  m.tokenizer.vocab_size = kVocab;
  m.shards.push_back(Manifest::describe(shards, "train.bin", 2048));
  m.write(path_join(shards, kManifestName));
  return shards;
}

// A 2-layer GPT of hidden 32 on 16-token samples, 4 a step, 3 steps, its log in log_dir.
TrainOptions tiny_run(const std::string& shards, const std::string& log_dir) {
  TrainOptions o;
  o.kind = ModelKind::gpt;
  o.model.hidden = 32, o.model.max_positions = 32;
  o.data.sources = {shards};
  o.data.batch_size = 4, o.data.seq_len = 16, o.data.workers = 1;
  o.optimizer.lr = 1e-3, o.optimizer.warmup_steps = 1;
  o.schedule_name = "cosine";
  o.run.max_steps = 3;
  o.run.log_dir = log_dir;
  o.run.peak_tflops = 1;  // no sgemm measured for the MFU
  o.run.seed = 5;
  return o;
}

std::vector<nlohmann::json> metrics(const std::string& log_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path_join(log_dir, "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// What UsageError run_training throws for these options, or "(no error)".
std::string usage_error(TrainOptions o) {
  try {
    CaptureStdout();
    run_training(std::move(o));
  } catch (const UsageError& e) {
    GetCapturedStdout();
    return e.what();
  }
  GetCapturedStdout();
  return "(no error)";
}

TEST(TrainOptions, TheCommandLineFillsTheOptionsAndChecksThem) {
  auto parsed = [](ModelKind kind, const std::string& line) {
    CLI::App app;
    TrainOptions o;
    o.kind = kind;
    add_train_options(app, o);
    app.parse(line);
    return o;
  };
  const TrainOptions o = parsed(ModelKind::gpt,
                                "--data a --data b --model tiny --layers 4 --seq-len 64 --batch-size 3 --grad-accum 2 "
                                "--lr 0.5 --warmup 7 --lr-schedule linear --tensor-model-parallel-size 2 "
                                "--pipeline-parallel 2 --virtual-stages 2 --sequence-parallel --zero 1 --recompute");
  EXPECT_EQ(o.data.sources, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.model.layers, 4);
  EXPECT_EQ(o.data.seq_len, 64);
  EXPECT_EQ(o.data.batch_size, 3);
  EXPECT_EQ(o.data.grad_accum, 2);
  EXPECT_EQ(o.optimizer.lr, 0.5);
  EXPECT_EQ(o.optimizer.warmup_steps, 7);
  EXPECT_EQ(o.schedule_name, "linear");
  EXPECT_EQ(o.parallel.tensor, 2) << "Megatron's name for --tensor-parallel";
  EXPECT_EQ(o.parallel.pipeline, 2);
  EXPECT_EQ(o.parallel.virtual_stages, 2);
  EXPECT_TRUE(o.parallel.sequence_parallel);
  EXPECT_EQ(o.parallel.zero, 1);
  EXPECT_TRUE(o.model.recompute);
  EXPECT_EQ(parsed(ModelKind::bert, "--dynamic-masking --max-predictions 20").plan.max_predictions, 20);
  for (const char* bad : {"--batch-size 0", "--grad-accum -1", "--max-steps 0", "--zero 2", "--tensor-parallel 0",
                          "--eval-iters -1", "--eval-interval -5"})
    EXPECT_THROW(parsed(ModelKind::gpt, bad), CLI::ValidationError) << bad;
  EXPECT_THROW(parsed(ModelKind::gpt, "--dynamic-masking"), CLI::ExtrasError) << "BERT's alone";
  EXPECT_THROW(parsed(ModelKind::gpt, "--max-predictions 20"), CLI::ExtrasError) << "BERT's alone";
}

// Each refused before a step runs, naming the option and what it conflicts with.
TEST(RunTraining, RefusesWhatCannotTrainNamingWhy) {
  TempDir dir;
  const std::string shards = write_shards(dir);
  const TrainOptions ok = tiny_run(shards, "");
  TrainOptions o = ok;
  o.data.sources.clear();
  EXPECT_EQ(usage_error(o), "--data is required (the shards to train on)");
  o = ok, o.run.precision = "fp8";
  EXPECT_EQ(usage_error(o), "--precision: expected fp32, bf16 or fp16, got 'fp8'");
  o = ok, o.schedule_name = "step";
  EXPECT_NE(usage_error(o).find("--lr-schedule"), std::string::npos);
  o = ok, o.run.resume = true;
  EXPECT_EQ(usage_error(o), "--resume needs --checkpoint-dir");
  o = ok, o.model.vocab_size = 50;
  EXPECT_EQ(usage_error(o), "--vocab-size 50 is smaller than the shards' vocabulary (64 ids in the manifest)");
  o = ok, o.data.seq_len = 33;
  EXPECT_EQ(usage_error(o), "the sequence length 33 exceeds the model's 32 positions (--max-positions)");
  o = ok, o.model.preset = "huge";
  EXPECT_NE(usage_error(o).find("unknown GPT model 'huge'"), std::string::npos);
  o = ok, o.eval.interval = 2;
  EXPECT_NE(usage_error(o).find("--eval-interval 2: no held-out data"), std::string::npos);
}

// Three steps: one metrics object each, with the cosine schedule's learning rate after one
// warmup step; the config line; a checkpoint at the end and the exported weights.
TEST(RunTraining, AShortRunLogsEachStepAtTheSchedulesRate) {
  TempDir dir;
  TrainOptions o = tiny_run(write_shards(dir), dir.file("logs"));
  o.run.checkpoint_dir = dir.file("ckpt");
  o.run.export_path = dir.file("out.safetensors");
  CaptureStdout();
  EXPECT_EQ(run_training(o), 0);
  const std::string out = GetCapturedStdout();
  EXPECT_NE(out.find("config: {"), std::string::npos) << out;
  EXPECT_NE(out.find("\"global_batch\":4"), std::string::npos) << out;
  EXPECT_NE(out.find("\"model_parameters\":"), std::string::npos) << out;
  EXPECT_NE(out.find("memory: rank 0 (tensor 0, data 0, stage 0): "), std::string::npos) << out;

  const auto steps = metrics(dir.file("logs"));
  ASSERT_EQ(steps.size(), 3u);
  OptimizerConfig schedule;
  schedule.lr = 1e-3, schedule.warmup_steps = 1, schedule.total_steps = 3, schedule.schedule = LrSchedule::cosine;
  for (int64_t step = 1; step <= 3; ++step) {
    const nlohmann::json& m = steps[size_t(step - 1)];
    EXPECT_EQ(m["step"], step);
    EXPECT_DOUBLE_EQ(m["lr"].get<double>(), learning_rate(schedule, step)) << "step " << step;
    EXPECT_TRUE(std::isfinite(m["loss"].get<double>()));
    EXPECT_EQ(m["samples"], 4);
    EXPECT_EQ(m["tokens"], 64);
  }
  EXPECT_NEAR(steps[0]["loss"].get<double>(), std::log(double(kVocab)), 0.5) << "a fresh model guesses uniformly";
  EXPECT_EQ(latest_checkpoint(dir.file("ckpt")), path_join(dir.file("ckpt"), "step-00000003"));
  const auto weights = read_safetensors(dir.file("out.safetensors"));
  EXPECT_EQ(weights.at("transformer.wte.weight").shape, (std::vector<int64_t>{kVocab, 32}));
}

// A learning rate that blows the weights up: step 1 trains, step 2's loss is not finite, and the
// error says so, naming a tensor of the model (its gradient, or its weights) that holds the first
// NaN or Inf.
TEST(RunTraining, ADivergingRunStopsNamingTheStepAndTheTensor) {
  TempDir dir;
  TrainOptions o = tiny_run(write_shards(dir), dir.file("logs"));
  o.optimizer.lr = 1e30, o.optimizer.warmup_steps = 0, o.optimizer.max_grad_norm = 0;
  CaptureStdout();
  const std::string e = testing::error_message([&] { run_training(o); });
  GetCapturedStdout();
  const std::string first = "; first non-finite tensor: ";
  ASSERT_NE(e.find(first), std::string::npos) << e;
  EXPECT_EQ(e.rfind("step 2: the loss is ", 0), 0u) << e;
  std::string tensor = e.substr(e.find(first) + first.size());
  if (tensor.rfind("gradient of ", 0) == 0) tensor = tensor.substr(12);
  ModelConfig c = ModelConfig::preset(ModelKind::gpt, "tiny");
  c.hidden = 32, c.intermediate = 128, c.max_positions = 32, c.vocab_size = kVocab;
  std::set<std::string> names;
  for (const ParamInfo& p : whole_model_params(c)) names.insert(p.name);
  EXPECT_TRUE(names.count(tensor)) << "'" << tensor << "' is no tensor of the model: " << e;
  EXPECT_EQ(metrics(dir.file("logs")).size(), 1u) << "step 1 was logged, step 2 not";
}

// --plan needs no data: the plan of the layout, printed, and nothing trained.
TEST(RunTraining, PlanPrintsTheLayoutWithoutData) {
  TrainOptions o;
  o.kind = ModelKind::gpt;
  o.plan.on = true;
  o.model.max_positions = 64;
  o.data.seq_len = 64;
  o.parallel.pipeline = 2;
  CaptureStdout();
  EXPECT_EQ(run_training(o), 0);
  const std::string out = GetCapturedStdout();
  EXPECT_NE(out.find("plan: gpt tiny: 2 layers, hidden 128, 2 heads, intermediate 512, vocab 50257"), std::string::npos)
      << out;
  EXPECT_NE(out.find("2 ranks = tensor 1 × pipeline 2 × data 1"), std::string::npos) << out;
  EXPECT_NE(out.find("seq 64"), std::string::npos) << out;
}

}  // namespace
}  // namespace pretrain::train_test
