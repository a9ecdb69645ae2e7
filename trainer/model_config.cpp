#include "trainer/model_config.h"

#include <map>

#include "common/error.h"

namespace pretrain {

ModelConfig ModelConfig::preset(ModelKind kind, const std::string& name) {
  ModelConfig c;
  c.kind = kind;
  c.name = name;
  struct Shape { int64_t layers, hidden, heads; };
  static const std::map<std::string, Shape> bert = {
      {"tiny", {2, 128, 2}},   {"mini", {4, 256, 4}},   {"small", {4, 512, 8}},
      {"medium", {8, 512, 8}}, {"base", {12, 768, 12}}, {"large", {24, 1024, 16}}};
  static const std::map<std::string, Shape> gpt = {
      {"tiny", {2, 128, 2}},     {"124M", {12, 768, 12}},  {"350M", {24, 1024, 16}},
      {"774M", {36, 1280, 20}}, {"1.5B", {48, 1600, 25}}};
  const auto& table = kind == ModelKind::bert ? bert : gpt;
  auto it = table.find(name);
  if (it == table.end()) {
    std::string names;
    for (const auto& [n, s] : table) names += (names.empty() ? "" : ", ") + n;
    throw UsageError(cat("--model: unknown ", kind == ModelKind::bert ? "BERT" : "GPT", " model '", name,
                         "' (expected one of ", names, ")"));
  }
  c.layers = it->second.layers;
  c.hidden = it->second.hidden;
  c.heads = it->second.heads;
  c.intermediate = 4 * c.hidden;
  if (kind == ModelKind::bert) {
    c.max_positions = 512;
    c.hidden_dropout = c.attention_dropout = 0.1f;
    c.ln_eps = 1e-12f;
  } else {
    c.max_positions = 1024;
    c.type_vocab_size = 0;
    c.hidden_dropout = c.attention_dropout = 0.0f;  // llm.c and nanoGPT pretrain GPT-2 without dropout
    c.ln_eps = 1e-5f;
  }
  return c;
}

std::vector<std::string> ModelConfig::preset_names(ModelKind kind) {
  if (kind == ModelKind::bert) return {"tiny", "mini", "small", "medium", "base", "large"};
  return {"tiny", "124M", "350M", "774M", "1.5B"};
}

void ModelConfig::validate() const {
  if (layers < 1 || hidden < 1 || heads < 1 || intermediate < 1)
    throw UsageError(cat("model: layers, hidden, heads and intermediate must be positive (", describe(), ")"));
  if (hidden % heads != 0) throw UsageError(cat("model: hidden ", hidden, " is not a multiple of heads ", heads));
  if (vocab_size < 2) throw UsageError("model: the vocabulary size is unknown (the shards' manifest names it)");
  if (hidden_dropout < 0 || hidden_dropout >= 1 || attention_dropout < 0 || attention_dropout >= 1)
    throw UsageError("model: dropout must be in [0, 1)");
}

std::string ModelConfig::describe() const {
  return cat(kind == ModelKind::bert ? "bert " : "gpt ", name, ": ", layers, " layers, hidden ", hidden, ", ", heads,
             " heads, intermediate ", intermediate, ", vocab ", vocab_size, ", positions ", max_positions);
}

double train_flops_per_sample(const ModelConfig& c, int64_t T, double masked, double instances) {
  const double C = double(c.hidden), L = double(c.layers), I = double(c.intermediate), V = double(c.vocab_size);
  const double layer_matmuls = 4 * C * C + 2 * C * I;  // qkv, projection, fc, fc projection
  double flops = 6 * double(T) * L * layer_matmuls + 12 * L * C * double(T) * double(T);
  if (c.kind == ModelKind::gpt) return flops + 6 * double(T) * C * V;  // tied LM head
  return flops + 6 * instances * (C * C + 2 * C) + 6 * masked * (C * C + C * V);  // pooler + NSP, MLM head
}

}  // namespace pretrain
