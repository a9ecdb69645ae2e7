#include "trainer/hf_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"

namespace pretrain {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// HF's GPT-2 keeps these as Conv1D, [in, out]; we (and nanoGPT) keep [out, in].
bool is_conv1d(const std::string& name) {
  for (const char* tail : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
    if (ends_with(name, tail)) return true;
  return false;
}

bool is_vocabulary_rows(const std::string& name) {
  return name == "bert.embeddings.word_embeddings.weight" || name == "cls.predictions.bias" ||
         name == "transformer.wte.weight";
}

HostTensor transposed(const HostTensor& t) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  HostTensor out{{cols, rows}, std::vector<float>(t.data.size())};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out.data[size_t(c * rows + r)] = t.data[size_t(r * cols + c)];
  return out;
}

// The first `rows` rows; past the tensor's own rows, zeros.
HostTensor with_rows(const HostTensor& t, int64_t rows) {
  int64_t row_size = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) row_size *= t.shape[i];
  HostTensor out{t.shape, std::vector<float>(size_t(rows * row_size), 0.0f)};
  out.shape[0] = rows;
  std::copy_n(t.data.begin(), size_t(std::min(rows, t.shape[0]) * row_size), out.data.begin());
  return out;
}

// One config.json field against the model's: the flag that sets ours is named in the message.
struct Field {
  const char* key;
  int64_t ours;
  const char* flag;
};

void check_fields(const json& cfg, const std::string& source, const std::vector<Field>& fields) {
  for (const Field& f : fields) {
    if (!cfg.contains(f.key) || !cfg[f.key].is_number_integer())
      throw Error(Where{source}, cat("\"", f.key, "\" is missing or not an integer (the model has ", f.ours, ")"));
    const int64_t theirs = json_integer<int64_t>(cfg[f.key]);
    if (theirs != f.ours)
      throw Error(Where{source}, cat("\"", f.key, "\" is ", theirs, ", the model's is ", f.ours, " (", f.flag, ")"));
  }
}

void check_string(const json& cfg, const std::string& source, const char* key, const std::set<std::string>& accepted,
                  const std::string& ours) {
  const std::string theirs = cfg.value(key, std::string());
  if (!accepted.count(theirs))
    throw Error(Where{source}, cat("\"", key, "\" is \"", theirs, "\"; this trainer's model uses ", ours));
}

void check_eps(const json& cfg, const std::string& source, const char* key, float ours) {
  const double theirs = cfg.value(key, -1.0);
  if (std::abs(theirs - double(ours)) > 1e-3 * double(ours))
    throw Error(Where{source}, cat("\"", key, "\" is ", theirs, ", the model's LayerNorm epsilon is ", ours));
}

// config.json against the model; returns the checkpoint's vocabulary (≤ the model's, which may pad it).
int64_t check_config(const json& cfg, const std::string& source, const ModelConfig& c) {
  if (!cfg.is_object()) throw Error(Where{source}, "expected a JSON object (BertConfig or GPT2Config)");
  const int64_t vocab = json_integer_or<int64_t>(cfg, "vocab_size", 0);
  if (vocab <= 0 || vocab > c.vocab_size)
    throw Error(Where{source}, cat("\"vocab_size\" is ", vocab, ", the model has ", c.vocab_size,
                                   " rows (the shards' vocabulary, or --vocab-size)"));
  if (c.kind == ModelKind::bert) {
    check_string(cfg, source, "model_type", {"bert"}, "\"bert\" (this is bert_pretrain)");
    check_fields(cfg, source,
                 {{"hidden_size", c.hidden, "--hidden / --model"},
                  {"num_hidden_layers", c.layers, "--layers / --model"},
                  {"num_attention_heads", c.heads, "--heads / --model"},
                  {"intermediate_size", c.intermediate, "4 × --hidden"},
                  {"max_position_embeddings", c.max_positions, "--max-positions"},
                  {"type_vocab_size", c.type_vocab_size, "BERT's 2 segments"}});
    check_string(cfg, source, "hidden_act", {"gelu"}, "\"gelu\" (erf)");
    check_eps(cfg, source, "layer_norm_eps", c.ln_eps);
  } else {
    check_string(cfg, source, "model_type", {"gpt2"}, "\"gpt2\" (this is gpt_pretrain)");
    json with_inner = cfg;
    if (!with_inner.contains("n_inner") || with_inner["n_inner"].is_null()) with_inner["n_inner"] = 4 * json_integer_or<int64_t>(cfg, "n_embd", 0);
    check_fields(with_inner, source,
                 {{"n_embd", c.hidden, "--hidden / --model"},
                  {"n_layer", c.layers, "--layers / --model"},
                  {"n_head", c.heads, "--heads / --model"},
                  {"n_inner", c.intermediate, "4 × --hidden"},
                  {"n_positions", c.max_positions, "--max-positions"}});
    check_string(cfg, source, "activation_function", {"gelu_new", "gelu_pytorch_tanh"}, "\"gelu_new\" (tanh)");
    check_eps(cfg, source, "layer_norm_epsilon", c.ln_eps);
  }
  return vocab;
}

// A float setting as config.json should show it: 1e-12, 0.1 (its shortest decimal), not the
// double nearest the float (9.999999960041972e-13).
double shortest(float f) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", double(f));
  return std::strtod(text, nullptr);
}

}  // namespace

bool is_hf_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) || !ends_with(path, ".safetensors");
}

json hf_config(const ModelConfig& c, int64_t vocab, const std::map<std::string, int64_t>& special_ids) {
  auto id_of = [&](std::initializer_list<const char*> names) -> json {
    for (const char* n : names)
      if (auto it = special_ids.find(n); it != special_ids.end()) return it->second;
    return nullptr;
  };
  if (c.kind == ModelKind::bert)
    return {{"architectures", {"BertForPreTraining"}},
            {"model_type", "bert"},
            {"vocab_size", vocab},
            {"hidden_size", c.hidden},
            {"num_hidden_layers", c.layers},
            {"num_attention_heads", c.heads},
            {"intermediate_size", c.intermediate},
            {"hidden_act", "gelu"},
            {"hidden_dropout_prob", shortest(c.hidden_dropout)},
            {"attention_probs_dropout_prob", shortest(c.attention_dropout)},
            {"max_position_embeddings", c.max_positions},
            {"type_vocab_size", c.type_vocab_size},
            {"initializer_range", 0.02},
            {"layer_norm_eps", shortest(c.ln_eps)},
            {"pad_token_id", id_of({"[PAD]", "pad"})},
            {"position_embedding_type", "absolute"},
            {"torch_dtype", "float32"}};
  const json eod = id_of({"<|endoftext|>", "eod", "eos"});
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", vocab},
          {"n_embd", c.hidden},
          {"n_layer", c.layers},
          {"n_head", c.heads},
          {"n_inner", c.intermediate},
          {"n_positions", c.max_positions},
          {"n_ctx", c.max_positions},
          {"activation_function", "gelu_new"},
          {"resid_pdrop", shortest(c.hidden_dropout)},
          {"embd_pdrop", shortest(c.hidden_dropout)},
          {"attn_pdrop", shortest(c.attention_dropout)},
          {"layer_norm_epsilon", shortest(c.ln_eps)},
          {"initializer_range", 0.02},
          {"bos_token_id", eod},
          {"eos_token_id", eod},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

std::map<std::string, HostTensor> to_hf_tensors(const ModelConfig& config, std::map<std::string, HostTensor> ours,
                                                int64_t vocab) {
  std::map<std::string, HostTensor> out;
  for (auto& [name, t] : ours) {
    if (is_vocabulary_rows(name) && t.shape[0] != vocab) t = with_rows(t, vocab);
    if (config.kind == ModelKind::gpt && is_conv1d(name)) t = transposed(t);
    out.emplace(name, std::move(t));
  }
  return out;
}

std::map<std::string, HostTensor> from_hf_tensors(const ModelConfig& config, std::map<std::string, HostTensor> hf) {
  std::map<std::string, HostTensor> out;
  for (auto& [given, t] : hf) {
    std::string name = given;
    // TF-era BERT checkpoints (bert-base-uncased's own) name LayerNorm's parameters gamma and beta.
    if (ends_with(name, "LayerNorm.gamma")) name.replace(name.size() - 5, 5, "weight");
    if (ends_with(name, "LayerNorm.beta")) name.replace(name.size() - 4, 4, "bias");
    if (config.kind == ModelKind::gpt && is_conv1d(name) && t.shape.size() == 2) t = transposed(t);
    if (is_vocabulary_rows(name) && !t.shape.empty() && t.shape[0] < config.vocab_size) t = with_rows(t, config.vocab_size);
    out.emplace(std::move(name), std::move(t));
  }
  return out;
}

void write_hf_model(const std::string& dir, const ModelConfig& config, const std::map<std::string, HostTensor>& ours,
                    int64_t vocab, const std::map<std::string, int64_t>& special_ids) {
  make_dirs(dir);
  write_file_atomic(path_join(dir, "config.json"), hf_config(config, vocab, special_ids).dump(2) + "\n");
  write_safetensors(path_join(dir, "model.safetensors"), to_hf_tensors(config, ours, vocab), {{"format", "pt"}});
}

std::map<std::string, HostTensor> read_hf_model(const std::string& dir, const ModelConfig& config) {
  const std::string config_path = path_join(dir, "config.json");
  if (!file_exists(config_path))
    throw Error(Where{dir}, "not a Hugging Face model directory: config.json is missing");
  json cfg;
  try {
    cfg = json::parse(read_file(config_path));
  } catch (const json::exception& e) {
    throw Error(Where::at_offset(config_path, 0), cat("expected JSON: ", e.what()));
  }
  check_config(cfg, config_path, config);

  std::map<std::string, HostTensor> hf;
  const std::string single = path_join(dir, "model.safetensors"), index = path_join(dir, "model.safetensors.index.json");
  if (file_exists(single)) {
    hf = read_safetensors(single);
  } else if (file_exists(index)) {
    // save_pretrained shards models past its max_shard_size; the index maps each tensor to its file.
    std::set<std::string> files;
    try {
      for (const auto& [tensor, file] : json::parse(read_file(index)).at("weight_map").items()) files.insert(file.get<std::string>());
    } catch (const json::exception& e) {
      throw Error(Where::at_offset(index, 0), cat("expected {\"weight_map\": {tensor: file}}: ", e.what()));
    }
    for (const std::string& f : files) hf.merge(read_safetensors(path_join(dir, f)));
  } else {
    throw Error(Where{dir}, "no model.safetensors (save_pretrained writes it unless safe_serialization=False; "
                            "pytorch_model.bin is not read)");
  }
  return from_hf_tensors(config, std::move(hf));
}

std::map<std::string, HostTensor> read_init_weights(const std::string& path, const ModelConfig& config) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_hf_model(path, config);
  return read_safetensors(path);
}

}  // namespace pretrain
