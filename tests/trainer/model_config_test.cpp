// The model presets, their checks and the FLOPs a training step counts (trainer/model_config.h).
#include "trainer/model_config.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace pretrain::model_config_test {
namespace {

std::string usage_error(const ModelConfig& c) {
  try {
    c.validate();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelConfig, PresetsAreTheReferenceShapes) {
  const ModelConfig base = ModelConfig::preset(ModelKind::bert, "base");
  EXPECT_EQ(base.layers, 12);
  EXPECT_EQ(base.hidden, 768);
  EXPECT_EQ(base.heads, 12);
  EXPECT_EQ(base.intermediate, 3072);
  EXPECT_EQ(base.max_positions, 512);
  EXPECT_EQ(base.type_vocab_size, 2);
  EXPECT_FLOAT_EQ(base.hidden_dropout, 0.1f);
  EXPECT_FLOAT_EQ(base.ln_eps, 1e-12f);
  const ModelConfig gpt = ModelConfig::preset(ModelKind::gpt, "350M");
  EXPECT_EQ(gpt.layers, 24);
  EXPECT_EQ(gpt.hidden, 1024);
  EXPECT_EQ(gpt.heads, 16);
  EXPECT_EQ(gpt.head_size(), 64);
  EXPECT_EQ(gpt.max_positions, 1024);
  EXPECT_EQ(gpt.type_vocab_size, 0);
  EXPECT_FLOAT_EQ(gpt.hidden_dropout, 0.0f) << "nanoGPT and llm.c pretrain GPT-2 without dropout";
  EXPECT_FLOAT_EQ(gpt.ln_eps, 1e-5f);
  for (ModelKind kind : {ModelKind::bert, ModelKind::gpt})
    for (const std::string& name : ModelConfig::preset_names(kind))
      EXPECT_EQ(ModelConfig::preset(kind, name).name, name);
}

TEST(ModelConfig, AnUnknownPresetOrABadShapeIsAUsageErrorSayingWhy) {
  try {
    ModelConfig::preset(ModelKind::gpt, "124m");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown GPT model '124m' (expected one of 1.5B, 124M, 350M, 774M, tiny)"),
              std::string::npos)
        << e.what();
  }
  ModelConfig c = ModelConfig::preset(ModelKind::bert, "tiny");
  c.vocab_size = 100;
  EXPECT_EQ(usage_error(c), "(no error)");
  ModelConfig odd = c;
  odd.heads = 3;
  EXPECT_EQ(usage_error(odd), "model: hidden 128 is not a multiple of heads 3");
  ModelConfig no_vocab = c;
  no_vocab.vocab_size = 0;
  EXPECT_NE(usage_error(no_vocab).find("the vocabulary size is unknown"), std::string::npos);
  ModelConfig all_dropped = c;
  all_dropped.attention_dropout = 1.0f;
  EXPECT_EQ(usage_error(all_dropped), "model: dropout must be in [0, 1)");
}

// PaLM's count: 6 FLOPs per matmul parameter and token (forward 2, backward 4) plus attention's
// two T × T products, 12 · L · C · T per token; GPT-2 124M at 1024 tokens: 6 · (85M layer
// parameters + the 38.6M of the tied head) per token and 12 · 12 · 768 · 1024 for attention.
TEST(ModelConfig, FlopsPerSampleArePalmsCount) {
  ModelConfig gpt = ModelConfig::preset(ModelKind::gpt, "124M");
  gpt.vocab_size = 50257;
  const double T = 1024, C = 768, L = 12, V = 50257;
  EXPECT_DOUBLE_EQ(train_flops_per_sample(gpt, 1024, 0), T * (6 * (L * 12 * C * C + C * V) + 12 * L * C * T));
  EXPECT_NEAR(train_flops_per_sample(gpt, 1024, 0) / 1e12, 0.8749, 1e-4);
  // BERT: the MLM head (dense C² and decoder C·V) on the masked positions only; the pooler and
  // NSP head (C² + 2C) once per instance.
  ModelConfig bert = ModelConfig::preset(ModelKind::bert, "base");
  bert.vocab_size = 30522;
  const double Cb = 768, Lb = 12, Tb = 128, Vb = 30522, masked = 20;
  const double layers = Tb * (6 * Lb * 12 * Cb * Cb + 12 * Lb * Cb * Tb);
  EXPECT_DOUBLE_EQ(train_flops_per_sample(bert, 128, masked),
                   layers + 6 * (Cb * Cb + 2 * Cb) + 6 * masked * (Cb * Cb + Cb * Vb));
  EXPECT_DOUBLE_EQ(train_flops_per_sample(bert, 128, masked, 3) - train_flops_per_sample(bert, 128, masked),
                   2 * 6 * (Cb * Cb + 2 * Cb))
      << "a packed row runs the pooler and NSP head once per instance";
}

}  // namespace
}  // namespace pretrain::model_config_test
