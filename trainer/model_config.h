// What a model is, before any memory: BERT or GPT-2 at a size (the presets Google's BERT release
// and GPT-2 name, or the command line's overrides), and the FLOPs one sample's training step
// takes (what the logs' TFLOPs and MFU count).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/model_kind.h"

namespace pretrain {

struct ModelConfig {
  ModelKind kind = ModelKind::bert;
  std::string name = "custom";
  int64_t layers = 2, hidden = 128, heads = 2, intermediate = 512;
  int64_t vocab_size = 0, max_positions = 512, type_vocab_size = 2;
  float hidden_dropout = 0.1f, attention_dropout = 0.1f;
  float ln_eps = 1e-12f;

  int64_t head_size() const { return hidden / heads; }
  // BERT: tiny (2×128), mini (4×256), small (4×512), medium (8×512), base (12×768), large
  // (24×1024), as Google's BERT release names them. GPT: tiny (2×128), 124M, 350M, 774M, 1.5B.
  static ModelConfig preset(ModelKind kind, const std::string& name);
  static std::vector<std::string> preset_names(ModelKind kind);
  void validate() const;  // throws UsageError
  std::string describe() const;  // "bert base: 12 layers, hidden 768, 12 heads, vocab 30522"
};

// FLOPs of one training step (forward + backward) on one sample, PaLM's appendix B count:
// 6 × (matmul parameters touched per token) per token plus 12 · layers · hidden · seq for
// attention's score and value products; BERT's MLM head (dense + decoder) counts on masked
// positions only. `masked` = average masked positions per sample; `instances` = NSP heads per
// sample (a packed row of seq_len tokens runs the pooler and NSP head once per instance it holds).
double train_flops_per_sample(const ModelConfig& c, int64_t seq_len, double masked, double instances = 1);

}  // namespace pretrain
