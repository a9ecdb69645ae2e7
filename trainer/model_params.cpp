#include "trainer/model_params.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/counter_rng.h"
#include "common/error.h"

namespace pretrain {

namespace {

bool is_layernorm(const std::string& name) {
  return name.find("LayerNorm") != std::string::npos || name.find("ln_") != std::string::npos;
}

bool is_decayed(const std::string& name) {
  const bool bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
  return !bias && !is_layernorm(name);
}

bool is_vocabulary(const std::string& name) {
  return name == "transformer.wte.weight" || name == "bert.embeddings.word_embeddings.weight" ||
         name == "cls.predictions.bias";
}

// Which part of the whole model a parameter belongs to: -1 embeddings, a layer index, or -2 heads.
int64_t param_owner(const std::string& name) {
  for (const char* prefix : {"transformer.h.", "bert.encoder.layer."}) {
    const std::string p = prefix;
    if (name.compare(0, p.size(), p) == 0) return std::stoll(name.substr(p.size()));
  }
  if (name.find("embeddings") != std::string::npos || name == "transformer.wte.weight" ||
      name == "transformer.wpe.weight")
    return -1;
  return -2;
}

}  // namespace

LayerNames layer_names(ModelKind kind, int64_t l) {
  if (kind == ModelKind::gpt) {
    const std::string p = cat("transformer.h.", l, ".");
    return {p + "attn.c_attn.weight", p + "attn.c_attn.bias", p + "attn.c_proj.weight", p + "attn.c_proj.bias",
            p + "ln_1.weight",        p + "ln_1.bias",        p + "mlp.c_fc.weight",    p + "mlp.c_fc.bias",
            p + "mlp.c_proj.weight",  p + "mlp.c_proj.bias",  p + "ln_2.weight",        p + "ln_2.bias"};
  }
  const std::string p = cat("bert.encoder.layer.", l, ".");
  return {p + "attention.self.query.weight",      p + "attention.self.query.bias",
          p + "attention.output.dense.weight",    p + "attention.output.dense.bias",
          p + "attention.output.LayerNorm.weight", p + "attention.output.LayerNorm.bias",
          p + "intermediate.dense.weight",        p + "intermediate.dense.bias",
          p + "output.dense.weight",              p + "output.dense.bias",
          p + "output.LayerNorm.weight",          p + "output.LayerNorm.bias"};
}

std::string word_embeddings_name(ModelKind kind) {
  return kind == ModelKind::gpt ? "transformer.wte.weight" : "bert.embeddings.word_embeddings.weight";
}

VocabularyShard VocabularyShard::of(int64_t vocab, const ModelShard& s) {
  const int64_t rows = padded_vocab(vocab, s.tensor_size) / s.tensor_size;
  return {vocab, rows, rows * s.tensor_rank};
}

int64_t padded_vocab(int64_t vocab, int tensor_size) {
  if (tensor_size <= 1) return vocab;
  const int64_t m = 128 * int64_t(tensor_size);
  return (vocab + m - 1) / m * m;
}

std::vector<ParamInfo> whole_model_params(const ModelConfig& c) {
  std::vector<ParamInfo> out;
  int64_t offset = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Split split = Split::none) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    ParamInfo p;
    p.name = name, p.shape = shape, p.full_shape = shape, p.offset = offset, p.numel = n, p.decay = is_decayed(name);
    p.split = split, p.full_index = int64_t(out.size());
    out.push_back(std::move(p));
    offset += n;
  };
  const int64_t C = c.hidden, I = c.intermediate, V = c.vocab_size;
  if (c.kind == ModelKind::gpt) {
    add("transformer.wte.weight", {V, C}, Split::rows);
    add("transformer.wpe.weight", {c.max_positions, C});
    for (int64_t l = 0; l < c.layers; ++l) {
      const LayerNames n = layer_names(c.kind, l);
      add(n.ln1_w, {C}), add(n.ln1_b, {C});
      add(n.qkv_w, {3 * C, C}, Split::qkv_rows), add(n.qkv_b, {3 * C}, Split::qkv_rows);
      add(n.proj_w, {C, C}, Split::columns), add(n.proj_b, {C});
      add(n.ln2_w, {C}), add(n.ln2_b, {C});
      add(n.fc_w, {I, C}, Split::rows), add(n.fc_b, {I}, Split::rows);
      add(n.fcproj_w, {C, I}, Split::columns), add(n.fcproj_b, {C});
    }
    add("transformer.ln_f.weight", {C});
    add("transformer.ln_f.bias", {C});
    return out;
  }
  add("bert.embeddings.word_embeddings.weight", {V, C}, Split::rows);
  add("bert.embeddings.position_embeddings.weight", {c.max_positions, C});
  add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, C});
  add("bert.embeddings.LayerNorm.weight", {C});
  add("bert.embeddings.LayerNorm.bias", {C});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = cat("bert.encoder.layer.", l, ".attention.self.");
    const LayerNames n = layer_names(c.kind, l);
    // Query, key and value cut alike: the [3C/tp, C] fused matrix of a rank holds its heads of each.
    add(p + "query.weight", {C, C}, Split::rows), add(p + "key.weight", {C, C}, Split::rows);
    add(p + "value.weight", {C, C}, Split::rows);
    add(p + "query.bias", {C}, Split::rows), add(p + "key.bias", {C}, Split::rows), add(p + "value.bias", {C}, Split::rows);
    add(n.proj_w, {C, C}, Split::columns), add(n.proj_b, {C});
    add(n.ln1_w, {C}), add(n.ln1_b, {C});
    add(n.fc_w, {I, C}, Split::rows), add(n.fc_b, {I}, Split::rows);
    add(n.fcproj_w, {C, I}, Split::columns), add(n.fcproj_b, {C});
    add(n.ln2_w, {C}), add(n.ln2_b, {C});
  }
  add("bert.pooler.dense.weight", {C, C});
  add("bert.pooler.dense.bias", {C});
  add("cls.predictions.transform.dense.weight", {C, C});
  add("cls.predictions.transform.dense.bias", {C});
  add("cls.predictions.transform.LayerNorm.weight", {C});
  add("cls.predictions.transform.LayerNorm.bias", {C});
  add("cls.predictions.bias", {V}, Split::rows);
  add("cls.seq_relationship.weight", {2, C});
  add("cls.seq_relationship.bias", {2});
  return out;
}

void take_shard(const ParamInfo& p, const float* whole, float* shard, int rank, int size) {
  const int64_t rows = p.full_shape[0], cols = p.full_shape.size() > 1 ? p.full_shape[1] : 1;
  switch (p.split) {
    case Split::none:
      std::copy(whole, whole + p.numel, shard);
      return;
    case Split::rows: {  // shard rows [rank·n, (rank+1)·n); past the whole's rows (vocabulary padding): 0
      const int64_t n = p.shape[0], r0 = rank * n;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t k = 0; k < cols; ++k) shard[r * cols + k] = r0 + r < rows ? whole[(r0 + r) * cols + k] : 0.0f;
      return;
    }
    case Split::columns: {
      const int64_t n = p.shape[1];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < n; ++k) shard[r * n + k] = whole[r * cols + rank * n + k];
      return;
    }
    case Split::qkv_rows: {  // three blocks of rows/3, each cut like Split::rows
      const int64_t block = rows / 3, n = block / size;
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t r = 0; r < n; ++r)
          for (int64_t k = 0; k < cols; ++k)
            shard[(b * n + r) * cols + k] = whole[(b * block + rank * n + r) * cols + k];
      return;
    }
  }
}

void put_shard(const ParamInfo& p, const float* shard, float* whole, int rank, int size) {
  const int64_t rows = p.full_shape[0], cols = p.full_shape.size() > 1 ? p.full_shape[1] : 1;
  switch (p.split) {
    case Split::none:
      std::copy(shard, shard + p.numel, whole);
      return;
    case Split::rows: {
      const int64_t n = p.shape[0], r0 = rank * n;
      for (int64_t r = 0; r < n && r0 + r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) whole[(r0 + r) * cols + k] = shard[r * cols + k];
      return;
    }
    case Split::columns: {
      const int64_t n = p.shape[1];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < n; ++k) whole[r * cols + rank * n + k] = shard[r * n + k];
      return;
    }
    case Split::qkv_rows: {
      const int64_t block = rows / 3, n = block / size;
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t r = 0; r < n; ++r)
          for (int64_t k = 0; k < cols; ++k)
            whole[(b * block + rank * n + r) * cols + k] = shard[(b * n + r) * cols + k];
      return;
    }
  }
}

ShardParams shard_params(const ModelConfig& c, const ModelShard& s) {
  const int tp = s.tensor_size;
  if (tp < 1 || s.tensor_rank < 0 || s.tensor_rank >= tp) throw UsageError("model: bad tensor rank");
  if (c.heads % tp != 0)
    throw UsageError(cat("--tensor-parallel ", tp, " does not divide the model's ", c.heads, " attention heads"));
  if (c.intermediate % tp != 0)
    throw UsageError(cat("--tensor-parallel ", tp, " does not divide the MLP's ", c.intermediate, " columns"));
  const VocabularyShard vocab = VocabularyShard::of(c.vocab_size, s);
  ShardParams out;
  std::map<int64_t, int64_t> layer_slot;
  for (const auto& [b, e] : s.chunks)
    for (int64_t l = b; l < e; ++l) layer_slot[l] = int64_t(out.layers.size()), out.layers.push_back(l);
  std::vector<std::vector<ParamInfo>> by_layer(out.layers.size());
  std::vector<ParamInfo> embed, heads;
  const std::string wte_name = word_embeddings_name(c.kind);
  for (ParamInfo p : whole_model_params(c)) {
    if (p.split == Split::rows) p.shape[0] = is_vocabulary(p.name) ? vocab.rows : p.shape[0] / tp;
    if (p.split == Split::qkv_rows) p.shape[0] /= tp;
    if (p.split == Split::columns) p.shape[1] /= tp;
    p.numel = 1;
    for (int64_t d : p.shape) p.numel *= d;
    p.counted = p.split != Split::none || s.tensor_rank == 0;
    p.sequence_partial = s.sequence_parallel && p.split == Split::none && is_layernorm(p.name) &&
                         p.name.find("cls.predictions") == std::string::npos;
    const int64_t owner = param_owner(p.name);
    if (owner == -1 && s.embeddings) embed.push_back(p);
    if (owner == -2 && s.heads) heads.push_back(p);
    if (owner >= 0 && layer_slot.count(owner)) by_layer[size_t(layer_slot[owner])].push_back(p);
    if (p.name == wte_name && s.heads && !s.embeddings) {  // the head's tied decoder
      p.tied_copy = true, p.counted = false;
      heads.push_back(p);
    }
  }
  auto place = [&](std::vector<ParamInfo>& list) {
    const int64_t begin = out.numel;
    for (ParamInfo& p : list) p.offset = out.numel, out.numel += p.numel, out.params.push_back(p);
    return std::make_pair(begin, out.numel);
  };
  out.embeddings = place(embed);
  for (auto& l : by_layer) out.layer_ranges.push_back(place(l));
  out.heads = place(heads);
  if (out.numel == 0) throw UsageError("model: this rank holds no parameters");
  return out;
}

std::vector<float> initial_weights(const ModelConfig& c, const ModelShard& s, const ShardParams& params, uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(params.numel)), whole;
  const bool bert = c.kind == ModelKind::bert;
  for (const ParamInfo& p : params.params) {
    float* out = host.data() + p.offset;
    const bool norm = is_layernorm(p.name);
    const bool bias = !is_decayed(p.name) && !norm;
    if (norm && p.name.ends_with("weight")) { std::fill(out, out + p.numel, 1.0f); continue; }
    if (norm || bias) { std::fill(out, out + p.numel, 0.0f); continue; }
    float sigma = 0.02f;
    if (!bert && p.name.ends_with("c_proj.weight")) sigma = 0.02f / std::sqrt(2.0f * float(c.layers));
    int64_t n = 1;
    for (int64_t d : p.full_shape) n *= d;
    whole.resize(size_t(n));
    CounterRng rng(seed, uint64_t(p.full_index), 0);
    for (int64_t k = 0; k < n; ++k) {
      double z;
      do {  // Box–Muller; BERT's truncated normal redraws beyond 2σ
        const double u1 = 1.0 - rng.random(), u2 = rng.random();
        z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      } while (bert && std::fabs(z) > 2.0);
      whole[size_t(k)] = float(z) * sigma;
    }
    take_shard(p, whole.data(), out, s.tensor_rank, s.tensor_size);
  }
  return host;
}

}  // namespace pretrain
