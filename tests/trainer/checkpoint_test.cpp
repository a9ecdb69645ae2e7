// Checkpoints (trainer/checkpoint.h): a round trip restores weights and both AdamW moments bit
// for bit; `latest` names the newest complete one; a checkpoint of another model, a truncated
// tensor file, a damaged state.json or a `latest` naming nothing are refused with an error that
// names the file; a byte flipped or cut off in any of its files is refused by its checksum;
// imported weights of another shape, or missing one, are refused naming the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "common/file.h"
#include "fixtures.h"
#include "test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/optimizer.h"

namespace pretrain::checkpoint_test {
namespace {

using pretrain::testing::TempDir;
using pretrain::testing::tiny_model;
const Device kCpu{};

// A model with weights and moments that are not their initial values: one AdamW step on
// gradients drawn from a seed.
struct Trained {
  Model model;
  Optimizer optimizer;
  Trained(ModelKind kind, uint64_t seed) : model(tiny_model(kind), kCpu), optimizer(OptimizerConfig{}, model) {
    model.init_weights(seed);
    std::mt19937 gen{uint32_t(seed)};
    std::normal_distribution<float> normal(0.0f, 0.01f);
    for (int64_t i = 0; i < model.num_parameters(); ++i) model.grads()[i] = normal(gen);
    optimizer.step(1);
  }
};

void expect_equal(const float* a, const float* b, int64_t n, const char* what) {
  EXPECT_TRUE(std::equal(a, a + n, b)) << what;
}

class Checkpoint : public ::testing::TestWithParam<ModelKind> {};

TEST_P(Checkpoint, RoundTripRestoresWeightsMomentsAndState) {
  TempDir dir;
  Trained a(GetParam(), 3);
  const std::string path = save_checkpoint(dir.path(), 1, a.model, a.optimizer, {{"step", 1}, {"loader", "{}"}});
  ASSERT_EQ(latest_checkpoint(dir.path()).value(), path);
  Trained b(GetParam(), 4);
  const auto state = load_checkpoint(path, b.model, b.optimizer);
  EXPECT_EQ(state.at("step").get<int>(), 1);
  const int64_t n = a.model.num_parameters();
  expect_equal(a.model.weights(), b.model.weights(), n, "weights");
  expect_equal(a.optimizer.m(), b.optimizer.m(), n, "first moments");
  expect_equal(a.optimizer.v(), b.optimizer.v(), n, "second moments");
  // A later one becomes the latest; the earlier one stays whole.
  const std::string later = save_checkpoint(dir.path(), 7, b.model, b.optimizer, {{"step", 7}, {"loader", "{}"}});
  EXPECT_EQ(latest_checkpoint(dir.path()).value(), later);
  EXPECT_TRUE(file_exists(path_join(path, "state.json")));
}

TEST_P(Checkpoint, NoLatestMeansNoCheckpoint) {
  TempDir dir;
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
}

// What load_checkpoint must refuse, each with the file or the tensor named.
TEST_P(Checkpoint, RefusesAnotherModelAndDamagedFiles) {
  TempDir dir;
  Trained a(GetParam(), 3);
  const std::string path = save_checkpoint(dir.path(), 2, a.model, a.optimizer, {{"step", 2}, {"loader", "{}"}});
  // The readers' own checks, as a checkpoint from before checksums meets them (the checksums
  // would refuse the damage below first: the next test).
  std::filesystem::remove(path_join(path, "manifest.json"));
  auto refused = [&](Model& model, Optimizer& opt, const std::string& want) {
    try {
      load_checkpoint(path, model, opt);
      ADD_FAILURE() << "accepted; expected an error with '" << want << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  {  // another model: hidden 32 instead of 16
    Model other(tiny_model(GetParam(), 32), kCpu);
    Optimizer opt(OptimizerConfig{}, other);
    refused(other, opt, "the model expects");
  }
  Trained b(GetParam(), 5);
  {  // a truncated tensor file
    const std::string file = path_join(path, "optimizer.safetensors");
    const auto size = std::filesystem::file_size(file);
    std::filesystem::resize_file(file, size / 2);
    refused(b.model, b.optimizer, "optimizer.safetensors");
  }
  {  // a damaged state.json
    std::ofstream(path_join(path, "state.json")) << "{\"step\": ";
    refused(b.model, b.optimizer, "state.json");
  }
  // `latest` naming a directory that is not there.
  std::ofstream(path_join(dir.path(), "latest")) << "step-00000099\n";
  EXPECT_THROW(latest_checkpoint(dir.path()), Error);
  std::ofstream(path_join(dir.path(), "latest")) << "../../etc\n";
  EXPECT_THROW(latest_checkpoint(dir.path()), Error);
}

// Every damage the checksums must catch, whether or not the reader would notice by itself: one
// byte flipped anywhere in each file, and each file cut short.
TEST_P(Checkpoint, AFlippedOrCutByteInAnyFileIsRefusedByItsChecksum) {
  TempDir dir;
  Trained a(GetParam(), 3);
  const std::string path = save_checkpoint(dir.path(), 2, a.model, a.optimizer, {{"step", 2}, {"loader", "{}"}});
  Trained b(GetParam(), 5);
  auto refused = [&](const std::string& file, const std::string& want) {
    try {
      load_checkpoint(path, b.model, b.optimizer);
      ADD_FAILURE() << file << ": accepted; expected an error with '" << want << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path_join(path, file)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  std::mt19937_64 gen(7);
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    const std::string p = path_join(path, file), original = read_file(p);
    for (int trial = 0; trial < 20; ++trial) {
      std::string damaged = original;
      damaged[gen() % damaged.size()] ^= char(1 + gen() % 255);
      std::ofstream(p, std::ios::binary | std::ios::trunc) << damaged;
      refused(file, "expected xxh3");
    }
    std::ofstream(p, std::ios::binary | std::ios::trunc) << original.substr(0, original.size() - 1);
    refused(file, cat("expected ", original.size(), " bytes"));
    std::ofstream(p, std::ios::binary | std::ios::trunc) << original;
  }
  // The manifest itself damaged: its numbers no longer match, or it no longer parses.
  const std::string manifest = path_join(path, "manifest.json"), text = read_file(manifest);
  const size_t digit = text.find("\"xxh3\": \"") + 9;
  std::string damaged = text;
  damaged[digit] = damaged[digit] == '0' ? '1' : '0';
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << damaged;
  EXPECT_THROW(load_checkpoint(path, b.model, b.optimizer), Error);
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() / 2);
  EXPECT_THROW(load_checkpoint(path, b.model, b.optimizer), Error);
  // A checkpoint from before checksums (no manifest.json) still loads.
  std::filesystem::remove(manifest);
  EXPECT_EQ(load_checkpoint(path, b.model, b.optimizer).at("step").get<int>(), 2);
  expect_equal(a.model.weights(), b.model.weights(), a.model.num_parameters(), "weights");
}

// Weights from elsewhere (--init-from) must have every tensor at the model's whole shape; the
// error names the source and the tensor.
TEST(ImportWeights, RefusesAShapeMismatchAndAMissingTensor) {
  Model model(tiny_model(ModelKind::gpt), kCpu);
  auto weights = export_weights(model);
  weights.at("transformer.wpe.weight").shape = {8, 32};
  const std::string shape = testing::error_message([&] { import_weights(model, weights, "x.safetensors"); });
  EXPECT_NE(shape.find("x.safetensors: tensor 'transformer.wpe.weight' has shape [8×32], the model expects [16×16]"),
            std::string::npos)
      << shape;
  weights.erase("transformer.wpe.weight");
  const std::string missing = testing::error_message([&] { import_weights(model, weights, "x.safetensors"); });
  EXPECT_NE(missing.find("tensor 'transformer.wpe.weight' is missing"), std::string::npos) << missing;
}

INSTANTIATE_TEST_SUITE_P(Kinds, Checkpoint, ::testing::Values(ModelKind::bert, ModelKind::gpt),
                         [](const auto& info) { return info.param == ModelKind::bert ? "bert" : "gpt"; });

}  // namespace
}  // namespace pretrain::checkpoint_test
