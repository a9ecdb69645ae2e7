// BERT and GPT-2 forward and backward (see model.h). One transformer layer serves both: GPT-2 runs
// it pre-LayerNorm and causal, BERT post-LayerNorm with the padding mask. Shapes: B batch, T
// sequence, N = B·T rows, C hidden, NH heads, hs = C/NH, I intermediate, V vocabulary, P max
// predictions, M = B·P prediction slots.
//
// Tensor parallel (Megatron-LM): a rank holds NH/tp heads (Cl = C/tp columns of q, k and v), I/tp
// of the MLP and Vp/tp vocabulary rows. Column-parallel linears (qkv, fc) read the whole input and
// write their columns; row-parallel ones (attention output, fc projection) write partial sums that
// are reduced over the group, their bias added once (by rank 0, before the reduction). The
// replicated regions between them (LayerNorm, dropout, residual) hold all N rows on every rank, or
// with sequence parallelism R = N/tp rows each: then the inputs of column-parallel linears are
// all-gathered and the partial sums reduce-scattered instead of all-reduced.
//
// Pipeline parallel: the rank holds the layers of its chunks, the embeddings on the first stage and
// the heads on the last. The activations of one micro-batch of one chunk (an Acts) live from its
// forward to its backward, so the schedule's peak decides how many sets are carved.
#include "trainer/model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/counter_rng.h"
#include "common/error.h"
#include "trainer/parallel/layers.h"
#include "trainer/parallel/tensor_group.h"

namespace pretrain {

using namespace kernels;

// ---------------------------------------------------------------- configuration
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

int64_t count_predictions(const int32_t* positions, int64_t B, int64_t P) {
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < P && positions[b * P + p] != 0; ++p) ++n;
  return n;
}

int64_t count_instances(const Device& d, const int32_t* labels, int64_t n) {
  std::vector<int32_t> h(static_cast<size_t>(n));
  if (n) copy_to_host(d, h.data(), labels, h.size() * sizeof(int32_t));
  return std::count_if(h.begin(), h.end(), [](int32_t v) { return v >= 0; });
}

double train_flops_per_sample(const ModelConfig& c, int64_t T, double masked, double instances) {
  const double C = double(c.hidden), L = double(c.layers), I = double(c.intermediate), V = double(c.vocab_size);
  const double layer_matmuls = 4 * C * C + 2 * C * I;  // qkv, projection, fc, fc projection
  double flops = 6 * double(T) * L * layer_matmuls + 12 * L * C * double(T) * double(T);
  if (c.kind == ModelKind::gpt) return flops + 6 * double(T) * C * V;  // tied LM head
  return flops + 6 * instances * (C * C + 2 * C) + 6 * masked * (C * C + C * V);  // pooler + NSP, MLM head
}

// ---------------------------------------------------------------- parameters
namespace {

struct LayerNames {
  std::string qkv_w, qkv_b, proj_w, proj_b, ln1_w, ln1_b, fc_w, fc_b, fcproj_w, fcproj_b, ln2_w, ln2_b;
};

LayerNames layer_names(ModelKind kind, int l) {
  if (kind == ModelKind::gpt) {
    const std::string p = cat("transformer.h.", l, ".");
    return {p + "attn.c_attn.weight", p + "attn.c_attn.bias", p + "attn.c_proj.weight", p + "attn.c_proj.bias",
            p + "ln_1.weight",        p + "ln_1.bias",        p + "mlp.c_fc.weight",    p + "mlp.c_fc.bias",
            p + "mlp.c_proj.weight",  p + "mlp.c_proj.bias",  p + "ln_2.weight",        p + "ln_2.bias"};
  }
  // BERT's query, key and value are three tensors laid out back to back, so the first is the
  // [3C, C] matrix of one fused GEMM (and their biases the [3C] bias).
  const std::string p = cat("bert.encoder.layer.", l, ".");
  return {p + "attention.self.query.weight",      p + "attention.self.query.bias",
          p + "attention.output.dense.weight",    p + "attention.output.dense.bias",
          p + "attention.output.LayerNorm.weight", p + "attention.output.LayerNorm.bias",
          p + "intermediate.dense.weight",        p + "intermediate.dense.bias",
          p + "output.dense.weight",              p + "output.dense.bias",
          p + "output.LayerNorm.weight",          p + "output.LayerNorm.bias"};
}

bool is_decayed(const std::string& name) {
  const bool bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
  const bool norm = name.find("LayerNorm") != std::string::npos || name.find(".ln_") != std::string::npos;
  return !bias && !norm;
}

}  // namespace

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
    for (int l = 0; l < c.layers; ++l) {
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
  for (int l = 0; l < c.layers; ++l) {
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

namespace {

bool is_vocabulary(const std::string& name) {
  return name == "transformer.wte.weight" || name == "bert.embeddings.word_embeddings.weight" ||
         name == "cls.predictions.bias";
}

// Which part of the whole model a parameter belongs to: -1 embeddings, a layer index, or -2 heads.
int64_t param_owner(const ModelConfig& c, const std::string& name) {
  for (const char* prefix : {"transformer.h.", "bert.encoder.layer."}) {
    const std::string p = prefix;
    if (name.compare(0, p.size(), p) == 0) return std::stoll(name.substr(p.size()));
  }
  if (name.find("embeddings") != std::string::npos || name == "transformer.wte.weight" ||
      name == "transformer.wpe.weight")
    return -1;
  (void)c;
  return -2;
}

}  // namespace

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

// ---------------------------------------------------------------- building blocks
namespace {

void layernorm(const Device& d, float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
               int64_t N, int64_t C, float eps) {
  launch(d, N, LayerNormForward{out, mean, rstd, inp, w, b, C, eps});
}

// dinp (= or +=) the input gradient; dw, db += the parameter gradients, through `scratch`
// (2 · bias_scratch_floats(N, C) floats: dw's partial sums, then db's).
void layernorm_backward(const Device& d, float* dinp, bool accumulate, float* dw, float* db, const float* dout,
                        const float* inp, const float* w, const float* mean, const float* rstd, int64_t N, int64_t C,
                        float* scratch) {
  launch(d, row_chunks(N) * C, LayerNormParamPartials{scratch, dout, inp, mean, rstd, N, C});
  launch(d, C, AddColumnPartials{dw, scratch, row_chunks(N), C});
  launch(d, C, AddColumnPartials{db, scratch + row_chunks(N) * C, row_chunks(N), C});
  launch(d, N, LayerNormBackward{dinp, dout, inp, w, mean, rstd, C, accumulate});
}

void dropout(const Device& d, float* x, int64_t n, uint64_t key, float p, int64_t offset = 0) {
  if (key != 0 && p > 0) launch(d, n, Dropout{x, x, key, p, offset});
}


double sum_losses(const Device& d, const float* losses, int64_t n) {
  std::vector<float> h(static_cast<size_t>(n));
  if (n) copy_to_host(d, h.data(), losses, h.size() * sizeof(float));
  double s = 0;
  for (float v : h) s += v;
  return s;
}

}  // namespace

namespace {
// Keys for dropout masks: one per (step key, layer, site), so no two tensors share a mask.
enum Site : uint64_t { kSiteEmbed = 0, kSiteAttnProbs = 1, kSiteAttnOut = 2, kSiteMlpOut = 3 };
uint64_t site_key(uint64_t key, int64_t layer, Site site) {
  return key == 0 ? 0 : mix64(key ^ mix64(uint64_t(layer + 1) * 16 + site));
}
}  // namespace

// ---------------------------------------------------------------- activations
struct Model::Acts {
  struct Layer {
    float *ln1, *ln1_mean, *ln1_rstd, *in_full, *qkv, *probs, *probs_drop, *att, *res1, *ln2, *ln2_mean, *ln2_rstd,
        *mlp_full, *fch, *fch_gelu, *res2;
  };
  int64_t first = 0;      // the local index (into layers_) of the chunk's first layer
  float* x_in = nullptr;  // [R, C]: the chunk's input, received from the previous stage
  float *emb = nullptr, *emb_mean = nullptr, *emb_rstd = nullptr, *x0 = nullptr;  // the embeddings' chunk
  std::vector<Layer> layers;
  float* d_out = nullptr;  // [R, C]: the heads' gradient of the chunk's output
};

struct Model::Plan {
  struct LayerWeights {
    float *qkv_w, *qkv_b, *proj_w, *proj_b, *ln1_w, *ln1_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b, *ln2_w, *ln2_b;
  };
  std::vector<LayerWeights> lw, lg;  // weights and gradients of each layer this rank holds
  int64_t B = 0, T = 0, P = 0, K = 1;
  std::vector<int> slots;
  bool planned = false;  // the activations are carved for (B, T, P, K, slots)
  size_t carved = 0;     // floats of the arena this plan uses
  DeviceBuffer<float> arena;  // the largest plan's size: a smaller one is carved out of it
  DeviceBuffer<int32_t> ints;
  std::vector<std::vector<Acts>> acts;  // [chunk][slot]
  // Scratch that one forward or backward op uses and leaves (shared by every slot).
  float *full_a, *full_b;  // [N, C]: gathered inputs and partial sums (sequence / tensor parallel)
  float *lnf, *lnf_mean, *lnf_rstd, *logits, *losses, *ce;  // GPT's head
  float *mlm_h, *mlm_t, *mlm_tg, *mlm_ln, *mlm_mean, *mlm_rstd, *mlm_logits, *mlm_losses;
  float *cls_h, *pool_pre, *pool, *nsp_logits, *nsp_losses;
  float *dx, *d_a, *d_b, *d_c, *d_att, *d_fch, *d_qkv, *d_probs, *d_m1, *d_m2, *d_cls, *d_pool;
  // --recompute: one layer's GELU output and attention probabilities (before and after dropout),
  // refilled by the backward pass instead of kept for every layer.
  float *gelu_scratch, *probs_scratch, *probs_drop_scratch;
  // The partial sums of the column reductions (bias, LayerNorm and embedding gradients): one op's
  // at a time, sized for the largest (reduce_floats).
  float* reduce;
  EmbeddingScratch embed;  // reduce, and the embedding groups after the MLM and NSP rows in ints
  int32_t *mlm_rows, *mlm_targets, *cls_rows;
  std::vector<float> kept_logits;
  bool keep_logits = false;
  int64_t lm_rows = 0;  // GPT: rows of logits computed at once (the LM head runs in chunks of them)
};

// GPT's logits are tokens × vocabulary: 1.6 GB in fp32 for 8 sequences of 1024 tokens of GPT-2,
// more than the rest of a small model's activations. The LM head, its loss and its backward pass
// are row by row, so they run on chunks of rows that keep at most kLogitsChunk floats of logits.
// Chunks cost the CPU 5–10% of a GPT tiny step (the wte gradient is read and written once per
// chunk), so only logits past 512 MiB are cut; the GEMMs stay thousands of rows tall.
constexpr int64_t kLogitsChunk = int64_t{1} << 27;
int64_t Model::lm_head_rows(int64_t N) const {
  const int64_t rows = lm_rows_ > 0 ? lm_rows_ : std::max<int64_t>(1, kLogitsChunk / vocab_.rows);
  return std::min(rows, N);
}

int64_t Model::stage_rows(int64_t B, int64_t T) const {
  return shard_.sequence_parallel ? B * T / shard_.tensor_size : B * T;
}

// Hands out the plan's pointers from `base` (or only counts, with base null); returns the floats.
size_t Model::carve(Plan& p, float* base, int64_t B, int64_t T, int64_t P, int64_t K,
                    const std::vector<int>& slots) const {
  const int64_t tp = shard_.tensor_size, C = config_.hidden, Cl = C / tp, I = config_.intermediate / tp;
  const int64_t NH = config_.heads / tp, V = vocab_.rows;
  const int64_t N = B * T, R = stage_rows(B, T), M = B * P, S = B * K;  // S: NSP slots
  const bool bert = config_.kind == ModelKind::bert, sp = shard_.sequence_parallel;
  const bool split = tp > 1;  // partial sums and gathers need whole-row buffers
  int64_t used = 0;
  auto take = [&](int64_t n) { float* r = base ? base + used : nullptr; used += (n + 63) / 64 * 64; return r; };
  p.acts.assign(shard_.chunks.size(), {});
  for (size_t c = 0; c < shard_.chunks.size(); ++c) {
    const int64_t layers = shard_.chunks[c].second - shard_.chunks[c].first;
    const int64_t first = c == 0 ? 0 : [&] {
      int64_t f = 0;
      for (size_t k = 0; k < c; ++k) f += shard_.chunks[k].second - shard_.chunks[k].first;
      return f;
    }();
    for (int s = 0; s < slots[c]; ++s) {
      Acts a;
      a.first = first;
      if (c == 0 && shard_.embeddings) {
        a.emb = bert ? take(R * C) : nullptr, a.emb_mean = bert ? take(R) : nullptr;
        a.emb_rstd = bert ? take(R) : nullptr, a.x0 = take(R * C);
      } else {
        a.x_in = take(R * C);
      }
      a.layers.resize(size_t(layers));
      for (auto& l : a.layers) {
        l.ln1 = take(R * C), l.ln1_mean = take(R), l.ln1_rstd = take(R);
        l.in_full = sp ? take(N * C) : nullptr, l.qkv = take(N * 3 * Cl);
        l.probs = recompute_ ? nullptr : take(B * NH * T * T);
        l.probs_drop = config_.attention_dropout > 0 && !recompute_ ? take(B * NH * T * T) : nullptr;
        l.att = take(N * Cl), l.res1 = take(R * C), l.ln2 = take(R * C), l.ln2_mean = take(R), l.ln2_rstd = take(R);
        l.mlp_full = sp ? take(N * C) : nullptr;
        l.fch = take(N * I), l.fch_gelu = recompute_ ? nullptr : take(N * I), l.res2 = take(R * C);
      }
      if (c + 1 == shard_.chunks.size() && shard_.heads) a.d_out = take(R * C);
      p.acts[c].push_back(std::move(a));
    }
  }
  p.full_a = split ? take(N * C) : nullptr, p.full_b = split ? take(N * C) : nullptr;
  p.gelu_scratch = recompute_ ? take(N * I) : nullptr;
  p.probs_scratch = recompute_ ? take(B * NH * T * T) : nullptr;
  p.probs_drop_scratch = recompute_ && config_.attention_dropout > 0 ? take(B * NH * T * T) : nullptr;
  if (shard_.heads && !bert) {
    p.lm_rows = lm_head_rows(N);
    p.lnf = take(R * C), p.lnf_mean = take(R), p.lnf_rstd = take(R), p.logits = take(p.lm_rows * V);
    p.losses = take(N), p.ce = split ? take(4 * p.lm_rows) : nullptr;  // vocab_parallel_cross_entropy's
  } else if (shard_.heads) {
    p.mlm_h = take(M * C), p.mlm_t = take(M * C), p.mlm_tg = take(M * C), p.mlm_ln = take(M * C);
    p.mlm_mean = take(M), p.mlm_rstd = take(M), p.mlm_logits = take(M * V), p.mlm_losses = take(M);
    p.ce = split ? take(4 * M) : nullptr;
    p.cls_h = take(S * C), p.pool_pre = take(S * C), p.pool = take(S * C), p.nsp_logits = take(S * 2);
    p.nsp_losses = take(S), p.d_m1 = take(M * C), p.d_m2 = take(M * C), p.d_cls = take(S * C), p.d_pool = take(S * C);
  }
  p.dx = take(R * C), p.d_a = take(R * C), p.d_b = take(R * C), p.d_c = take(N * C), p.d_att = take(N * Cl);
  p.d_fch = take(N * I), p.d_qkv = take(N * 3 * Cl), p.d_probs = take(B * NH * T * T);
  // The largest column reduction: a linear's bias over N rows (qkv, the MLP, the projections),
  // a LayerNorm's two over R, the embeddings' segments, BERT's heads over M and S rows (the MLM
  // bias is vocabulary wide).
  const int64_t reduce = std::max({bias_scratch_floats(N, std::max({3 * Cl, I, C})), 2 * bias_scratch_floats(R, C),
                                   embedding_scratch_floats(N, C), bias_scratch_floats(M, V),
                                   2 * bias_scratch_floats(M, C), bias_scratch_floats(S, C)});
  p.reduce = take(reduce);
  return size_t(used);
}

namespace {
// The int32 scratch: the MLM rows and targets of M slots, the NSP rows of S slots, the embedding
// backward's groups of N rows.
size_t planned_ints(int64_t M, int64_t S, int64_t N) { return size_t(2 * M + S + embedding_scratch_ints(N)); }
}  // namespace

void Model::plan_for(int64_t B, int64_t T, int64_t P, int64_t K, const std::vector<int>& slots) {
  Plan& p = *plan_;
  if (p.B == B && p.T == T && p.P == P && p.K == K && p.slots == slots && p.planned) return;
  if (slots.size() != shard_.chunks.size()) throw Error("model: one slot count per chunk expected");
  if (shard_.sequence_parallel && (B * T) % shard_.tensor_size != 0)
    throw UsageError(cat("--sequence-parallel: batch × sequence (", B, " × ", T, ") is not a multiple of --tensor-parallel ",
                         shard_.tensor_size));
  const int64_t M = B * P;
  // A smaller step (a shorter bin of LDDL-binned batches, a short last batch) is carved out of the
  // arena it fits in: planned once for the largest, steps of other lengths allocate nothing.
  const size_t need = carve(p, nullptr, B, T, P, K, slots);
  if (p.arena.size() < need) {
    p.arena.reset();
    p.arena = DeviceBuffer<float>(device_, need);
  }
  carve(p, p.arena.get(), B, T, P, K, slots);
  p.carved = need;
  if (p.ints.size() < planned_ints(M, B * K, B * T)) p.ints = DeviceBuffer<int32_t>(device_, planned_ints(M, B * K, B * T));
  // The NSP rows come from each step's next_sentence_positions (bert_heads fills them).
  p.mlm_rows = p.ints.get(), p.mlm_targets = p.ints.get() + M, p.cls_rows = p.ints.get() + 2 * M;
  p.embed = {p.reduce, p.ints.get() + 2 * M + B * K};
  p.B = B, p.T = T, p.P = P, p.K = K, p.slots = slots, p.planned = true;
}

size_t Model::planned_activation_bytes(int64_t B, int64_t T, int64_t P, const std::vector<int>& slots,
                                       int64_t K) const {
  Plan scratch;
  return carve(scratch, nullptr, B, T, P, K, slots) * sizeof(float) + planned_ints(B * P, B * K, B * T) * sizeof(int32_t);
}

void Model::prepare(int64_t B, int64_t T, int64_t P, const std::vector<int>& slots, int64_t K) {
  plan_for(B, T, P, K, slots);
}

float* Model::chunk_input(int c, int slot) { return plan_->acts.at(size_t(c)).at(size_t(slot)).x_in; }

void Model::set_recompute(bool on) {
  if (on != recompute_) plan_->B = -1;  // the next step carves the activations again
  recompute_ = on;
}

void Model::set_lm_head_rows(int64_t rows) {
  lm_rows_ = rows;
  plan_->B = -1;
}

size_t Model::activation_bytes() const { return plan_->carved * sizeof(float); }

// ---------------------------------------------------------------- construction
Model::Model(const ModelConfig& config, const ModelShard& shard, Unallocated)
    : config_(config), shard_(shard), plan_(new Plan) {
  lay_out(false);
}

Model::Model(const ModelConfig& config, const Device& device, const ModelShard& shard)
    : config_(config), device_(device), shard_(shard), plan_(new Plan) {
  lay_out(true);
}

void Model::lay_out(bool allocate) {
  config_.validate();
  const int tp = shard_.tensor_size;
  if (tp < 1 || shard_.tensor_rank < 0 || shard_.tensor_rank >= tp) throw UsageError("model: bad tensor rank");
  if (config_.heads % tp != 0)
    throw UsageError(cat("--tensor-parallel ", tp, " does not divide the model's ", config_.heads, " attention heads"));
  if (config_.intermediate % tp != 0)
    throw UsageError(cat("--tensor-parallel ", tp, " does not divide the MLP's ", config_.intermediate, " columns"));
  if (tp > 1 && !shard_.tensor && allocate) throw Error("model: tensor parallel needs the tensor group");
  if (shard_.chunks.empty()) shard_.chunks = {{0, config_.layers}};
  vocab_ = VocabularyShard::of(config_.vocab_size, shard_);

  // This rank's parameters, in arena order: embeddings, the layers of each chunk, heads, and the
  // last stage's copy of the tied word embeddings.
  std::map<int64_t, int64_t> layer_slot;
  for (const auto& [b, e] : shard_.chunks)
    for (int64_t l = b; l < e; ++l) layer_slot[l] = int64_t(layers_.size()), layers_.push_back(l);
  const std::vector<ParamInfo> whole = whole_model_params(config_);
  std::vector<std::vector<ParamInfo>> by_layer(layers_.size());
  std::vector<ParamInfo> embed, heads;
  const std::string wte_name = config_.kind == ModelKind::gpt ? "transformer.wte.weight" : "bert.embeddings.word_embeddings.weight";
  for (ParamInfo p : whole) {
    if (p.split == Split::rows) p.shape[0] = is_vocabulary(p.name) ? vocab_.rows : p.shape[0] / tp;
    if (p.split == Split::qkv_rows) p.shape[0] /= tp;
    if (p.split == Split::columns) p.shape[1] /= tp;
    p.numel = 1;
    for (int64_t d : p.shape) p.numel *= d;
    p.counted = p.split != Split::none || shard_.tensor_rank == 0;
    p.sequence_partial = shard_.sequence_parallel && p.split == Split::none &&
                         (p.name.find("LayerNorm") != std::string::npos || p.name.find("ln_") != std::string::npos) &&
                         p.name.find("cls.predictions") == std::string::npos;
    const int64_t owner = param_owner(config_, p.name);
    if (owner == -1 && shard_.embeddings) embed.push_back(p);
    if (owner == -2 && shard_.heads) heads.push_back(p);
    if (owner >= 0 && layer_slot.count(owner)) by_layer[size_t(layer_slot[owner])].push_back(p);
    if (p.name == wte_name && shard_.heads && !shard_.embeddings) {  // the head's tied decoder
      p.tied_copy = true, p.counted = false;
      heads.push_back(p);
    }
  }
  int64_t offset = 0;
  auto place = [&](std::vector<ParamInfo>& list) {
    const int64_t begin = offset;
    for (ParamInfo& p : list) p.offset = offset, offset += p.numel, params_.push_back(p);
    return std::make_pair(begin, offset);
  };
  embed_range_ = place(embed);
  for (auto& l : by_layer) layer_range_.push_back(place(l));
  head_range_ = place(heads);
  num_params_ = offset;
  if (num_params_ == 0) throw UsageError("model: this rank holds no parameters");
  if (!allocate) return;
  weights_ = DeviceBuffer<float>(device_, size_t(num_params_));
  grads_ = DeviceBuffer<float>(device_, size_t(num_params_));
  for (int64_t l : layers_) {
    const LayerNames n = layer_names(config_.kind, int(l));
    auto pick = [&](auto get) {
      return Plan::LayerWeights{get(n.qkv_w), get(n.qkv_b), get(n.proj_w), get(n.proj_b), get(n.ln1_w), get(n.ln1_b),
                                get(n.fc_w),  get(n.fc_b),  get(n.fcproj_w), get(n.fcproj_b), get(n.ln2_w), get(n.ln2_b)};
    };
    plan_->lw.push_back(pick([&](const std::string& s) { return w(s); }));
    plan_->lg.push_back(pick([&](const std::string& s) { return g(s); }));
  }
}

Model::~Model() = default;

const ParamInfo& Model::param(const std::string& name) const {
  for (const ParamInfo& p : params_)
    if (p.name == name) return p;
  throw Error(cat("model has no parameter '", name, "'"));
}
float* Model::w(const std::string& name) const { return weights_.get() + param(name).offset; }
float* Model::g(const std::string& name) const { return grads_.get() + param(name).offset; }

// Each whole tensor is drawn from its own stream (its index in the whole model), then cut: the
// weights are a function of the seed only, whatever the layout.
void Model::init_weights(uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(num_params_)), whole;
  const bool bert = config_.kind == ModelKind::bert;
  for (const ParamInfo& p : params_) {
    float* out = host.data() + p.offset;
    const bool norm = p.name.find("LayerNorm") != std::string::npos || p.name.find("ln_") != std::string::npos;
    const bool bias = !is_decayed(p.name) && !norm;
    if (norm && p.name.ends_with("weight")) { std::fill(out, out + p.numel, 1.0f); continue; }
    if (norm || bias) { std::fill(out, out + p.numel, 0.0f); continue; }
    float sigma = 0.02f;
    if (!bert && p.name.ends_with("c_proj.weight")) sigma = 0.02f / std::sqrt(2.0f * float(config_.layers));
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
    take_shard(p, whole.data(), out, shard_.tensor_rank, shard_.tensor_size);
  }
  copy_to_device(device_, weights_.get(), host.data(), host.size() * sizeof(float));
}

void Model::zero_grads() { device_zero(device_, grads_.get(), size_t(num_params_) * sizeof(float)); }

// ---------------------------------------------------------------- one transformer layer
// Scores, masked softmax and dropout of layer li into its probability buffers (the layer's own, or
// with --recompute the shared scratch, which the backward pass refills with the same bits).
// Returns what multiplies the values: the probabilities after dropout. Row t of qkv is
// [q | k | v] of this rank's heads, head h at offset h·hs of each: GEMMs over heads with stride hs.
const float* Model::attention_probs(Acts& acts, int64_t li, const ModelInputs& in, uint64_t key) {
  Plan& p = *plan_;
  Acts::Layer& a = acts.layers[size_t(li - acts.first)];
  const int64_t tp = shard_.tensor_size, B = in.B, T = in.T, Cl = config_.hidden / tp, NH = config_.heads / tp;
  const int64_t hs = config_.head_size();
  const float scale = 1.0f / std::sqrt(float(hs));
  const bool bert = config_.kind == ModelKind::bert;
  float* probs = recompute_ ? p.probs_scratch : a.probs;
  for (int64_t b = 0; b < B; ++b) {
    const float* q = a.qkv + b * T * 3 * Cl;
    gemm_batched(device_, false, true, T, T, hs, scale, q, 3 * Cl, hs, q + Cl, 3 * Cl, hs, 0.0f, probs + b * NH * T * T,
                 T, T * T, NH);
  }
  launch(device_, B * NH * T, SoftmaxForward{probs, probs, bert ? in.mask : nullptr, !bert, NH, T});
  // Each tensor rank holds other heads: its own masks.
  uint64_t k = site_key(key, layers_[size_t(li)], kSiteAttnProbs);
  if (k != 0 && tp > 1) k = mix64(k ^ uint64_t(shard_.tensor_rank + 1));
  if (k == 0 || config_.attention_dropout <= 0) return probs;
  float* dropped = recompute_ ? p.probs_drop_scratch : a.probs_drop;
  launch(device_, B * NH * T * T, Dropout{dropped, probs, k, config_.attention_dropout});
  return dropped;
}

void Model::attention_forward(Acts& acts, int64_t li, const ModelInputs& in, uint64_t key) {
  Acts::Layer& a = acts.layers[size_t(li - acts.first)];
  const int64_t tp = shard_.tensor_size, B = in.B, T = in.T, Cl = config_.hidden / tp, NH = config_.heads / tp;
  const int64_t hs = config_.head_size();
  const float* probs = attention_probs(acts, li, in, key);
  for (int64_t b = 0; b < B; ++b) {
    const float* v = a.qkv + b * T * 3 * Cl + 2 * Cl;
    gemm_batched(device_, false, false, T, hs, T, 1.0f, probs + b * NH * T * T, T, T * T, v, 3 * Cl, hs, 0.0f,
                 a.att + b * T * Cl, Cl, hs, NH);
  }
}

void Model::attention_backward(Acts& acts, int64_t li, const ModelInputs& in, uint64_t key, const float* datt,
                               float* dqkv) {
  Plan& p = *plan_;
  Acts::Layer& a = acts.layers[size_t(li - acts.first)];
  const int64_t tp = shard_.tensor_size, B = in.B, T = in.T, Cl = config_.hidden / tp, NH = config_.heads / tp;
  const int64_t hs = config_.head_size();
  const float scale = 1.0f / std::sqrt(float(hs));
  const bool dropped = key != 0 && config_.attention_dropout > 0;
  const float* probs = recompute_ ? attention_probs(acts, li, in, key) : dropped ? a.probs_drop : a.probs;
  const float* softmax_out = recompute_ ? p.probs_scratch : a.probs;
  for (int64_t b = 0; b < B; ++b) {
    const float *qkv = a.qkv + b * T * 3 * Cl, *dO = datt + b * T * Cl;
    float* dP = p.d_probs + b * NH * T * T;
    gemm_batched(device_, false, true, T, T, hs, 1.0f, dO, Cl, hs, qkv + 2 * Cl, 3 * Cl, hs, 0.0f, dP, T, T * T, NH);
    gemm_batched(device_, true, false, T, hs, T, 1.0f, probs + b * NH * T * T, T, T * T, dO, Cl, hs, 0.0f,
                 dqkv + b * T * 3 * Cl + 2 * Cl, 3 * Cl, hs, NH);
  }
  if (dropped) {
    uint64_t k = site_key(key, layers_[size_t(li)], kSiteAttnProbs);
    if (tp > 1) k = mix64(k ^ uint64_t(shard_.tensor_rank + 1));
    launch(device_, B * NH * T * T, Dropout{p.d_probs, p.d_probs, k, config_.attention_dropout});
  }
  launch(device_, B * NH * T, SoftmaxBackward{p.d_probs, p.d_probs, softmax_out, T});
  for (int64_t b = 0; b < B; ++b) {
    const float* qkv = a.qkv + b * T * 3 * Cl;
    const float* dS = p.d_probs + b * NH * T * T;
    float* dq = dqkv + b * T * 3 * Cl;
    gemm_batched(device_, false, false, T, hs, T, scale, dS, T, T * T, qkv + Cl, 3 * Cl, hs, 0.0f, dq, 3 * Cl, hs, NH);
    gemm_batched(device_, true, false, T, hs, T, scale, dS, T, T * T, qkv, 3 * Cl, hs, 0.0f, dq + Cl, 3 * Cl, hs, NH);
  }
}

// GPT-2 (pre-LN): ln1 = LN(x); res1 = x + drop(proj(attn(ln1))); ln2 = LN(res1);
//                 res2 = res1 + drop(mlp(ln2)) → the layer's output.
// BERT (post-LN): res1 = x + drop(proj(attn(x))); ln1 = LN(res1); res2 = ln1 + drop(mlp(ln1));
//                 ln2 = LN(res2) → the layer's output.
// x and every LayerNorm / residual tensor hold the region's R rows; qkv, att and the MLP's hidden
// all N rows of this rank's columns.
void Model::forward_layer(Acts& acts, int64_t li, const ModelInputs& in, uint64_t key, const float* x) {
  Plan& p = *plan_;
  Acts::Layer& a = acts.layers[size_t(li - acts.first)];
  const Plan::LayerWeights& W = p.lw[size_t(li)];
  const int64_t tp = shard_.tensor_size, N = in.B * in.T, R = stage_rows(in.B, in.T), C = config_.hidden;
  const int64_t Cl = C / tp, I = config_.intermediate / tp, l = layers_[size_t(li)];
  const bool pre = config_.kind == ModelKind::gpt, sp = shard_.sequence_parallel;
  const float eps = config_.ln_eps, pd = config_.hidden_dropout;
  const int64_t row0 = sp ? shard_.tensor_rank * R * C : 0;  // the region's first element in the whole
  const Gelu act = pre ? Gelu::tanh : Gelu::erf;

  if (pre) layernorm(device_, a.ln1, a.ln1_mean, a.ln1_rstd, x, W.ln1_w, W.ln1_b, R, C, eps);
  column_parallel_forward(device_, shard_, a.qkv, pre ? a.ln1 : x, a.in_full, W.qkv_w, W.qkv_b, N, C, 3 * Cl);
  attention_forward(acts, li, in, key);
  row_parallel_forward(device_, shard_, a.res1, p.full_a, a.att, W.proj_w, W.proj_b, N, Cl, C);
  dropout(device_, a.res1, R * C, site_key(key, l, kSiteAttnOut), pd, row0);
  launch(device_, R * C, Accumulate{a.res1, x});

  float* mlp_in;
  if (pre) {
    layernorm(device_, a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, W.ln2_w, W.ln2_b, R, C, eps);
    mlp_in = a.ln2;
  } else {
    layernorm(device_, a.ln1, a.ln1_mean, a.ln1_rstd, a.res1, W.ln1_w, W.ln1_b, R, C, eps);
    mlp_in = a.ln1;
  }
  float* fch_gelu = a.fch_gelu ? a.fch_gelu : p.gelu_scratch;
  column_parallel_forward(device_, shard_, a.fch, mlp_in, a.mlp_full, W.fc_w, W.fc_b, N, C, I, fch_gelu, act);
  row_parallel_forward(device_, shard_, a.res2, p.full_a, fch_gelu, W.fcproj_w, W.fcproj_b, N, I, C);
  dropout(device_, a.res2, R * C, site_key(key, l, kSiteMlpOut), pd, row0);
  launch(device_, R * C, Accumulate{a.res2, pre ? a.res1 : a.ln1});
  if (!pre) layernorm(device_, a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, W.ln2_w, W.ln2_b, R, C, eps);
}

// x: the layer's input; dout: the gradient of its output; dinp receives its input's (dinp may be
// dout). Region tensors hold R rows; the gradients of the row-parallel linears' outputs are
// gathered to N rows, those of the column-parallel linears' inputs reduced back to the region.
void Model::backward_layer(Acts& acts, int64_t li, const ModelInputs& in, uint64_t key, const float* x,
                           const float* dout, float* dinp) {
  Plan& p = *plan_;
  Acts::Layer& a = acts.layers[size_t(li - acts.first)];
  const Plan::LayerWeights &W = p.lw[size_t(li)], &G = p.lg[size_t(li)];
  const int64_t tp = shard_.tensor_size, N = in.B * in.T, R = stage_rows(in.B, in.T), C = config_.hidden;
  const int64_t Cl = C / tp, I = config_.intermediate / tp, l = layers_[size_t(li)];
  const bool pre = config_.kind == ModelKind::gpt, sp = shard_.sequence_parallel;
  const float pd = config_.hidden_dropout;
  const int64_t row0 = sp ? shard_.tensor_rank * R * C : 0;
  const Gelu act = pre ? Gelu::tanh : Gelu::erf;
  float *d_a = p.d_a, *d_b = p.d_b;
  const uint64_t k_mlp = site_key(key, l, kSiteMlpOut), k_attn = site_key(key, l, kSiteAttnOut);
  // The row-parallel biases' gradients come from the gathered N rows, so they are whole on every
  // rank; a column-parallel input's gradient is a partial sum over the group (d_c, N rows).

  // d_a = d res2
  if (pre)
    launch(device_, R * C, Scale{d_a, dout, 1.0f});
  else
    layernorm_backward(device_, d_a, false, G.ln2_w, G.ln2_b, dout, a.res2, W.ln2_w, a.ln2_mean, a.ln2_rstd, R, C, p.reduce);
  // MLP: d_b = drop'(d res2) → d_fch → d_c = d mlp_in (partial) → reduced into d_b
  launch(device_, R * C, Scale{d_b, d_a, 1.0f});
  dropout(device_, d_b, R * C, k_mlp, pd, row0);
  float* fch_gelu = a.fch_gelu;
  if (!fch_gelu) {  // --recompute
    fch_gelu = p.gelu_scratch;
    launch(device_, N * I, GeluForward{fch_gelu, a.fch, act});
  }
  row_parallel_backward(device_, shard_, p.d_fch, d_b, p.full_a, G.fcproj_w, G.fcproj_b, fch_gelu, W.fcproj_w, N, I, C, p.reduce);
  launch(device_, N * I, GeluBackward{p.d_fch, p.d_fch, a.fch, act});
  const float* mlp_in = sp ? a.mlp_full : pre ? a.ln2 : a.ln1;
  column_parallel_backward(device_, shard_, d_b, p.d_c, G.fc_w, G.fc_b, p.d_fch, mlp_in, W.fc_w, N, C, I, p.reduce);  // d mlp_in
  // d_a = d res1
  if (pre) {
    layernorm_backward(device_, d_a, true, G.ln2_w, G.ln2_b, d_b, a.res1, W.ln2_w, a.ln2_mean, a.ln2_rstd, R, C, p.reduce);
  } else {
    launch(device_, R * C, Accumulate{d_b, d_a});  // d ln1 = the MLP's + the residual's
    layernorm_backward(device_, d_a, false, G.ln1_w, G.ln1_b, d_b, a.res1, W.ln1_w, a.ln1_mean, a.ln1_rstd, R, C, p.reduce);
  }
  // Attention: d_b = drop'(d res1) → d att → d_qkv → d attn_in (partial) → reduced
  launch(device_, R * C, Scale{d_b, d_a, 1.0f});
  dropout(device_, d_b, R * C, k_attn, pd, row0);
  row_parallel_backward(device_, shard_, p.d_att, d_b, p.full_a, G.proj_w, G.proj_b, a.att, W.proj_w, N, Cl, C, p.reduce);
  attention_backward(acts, li, in, key, p.d_att, p.d_qkv);
  const float* attn_in = sp ? a.in_full : pre ? a.ln1 : x;
  if (pre) {
    column_parallel_backward(device_, shard_, d_b, p.d_c, G.qkv_w, G.qkv_b, p.d_qkv, attn_in, W.qkv_w, N, C, 3 * Cl, p.reduce);
    launch(device_, R * C, Scale{dinp, d_a, 1.0f});
    layernorm_backward(device_, dinp, true, G.ln1_w, G.ln1_b, d_b, x, W.ln1_w, a.ln1_mean, a.ln1_rstd, R, C, p.reduce);
  } else {
    column_parallel_backward(device_, shard_, dinp, p.d_c, G.qkv_w, G.qkv_b, p.d_qkv, attn_in, W.qkv_w, N, C, 3 * Cl, p.reduce);
    launch(device_, R * C, Accumulate{dinp, d_a});
  }
}

// ---------------------------------------------------------------- embeddings
// x0 (the region's rows) = dropout(embedding) — BERT: LN(word + position + token type) first. Under
// tensor parallel each rank looks up its vocabulary rows (rank 0 adds the positions and types) and
// the sum over the group is reduced into the region.
void Model::embed_forward(Acts& a, const ModelInputs& in, uint64_t key) {
  Plan& p = *plan_;
  const int64_t N = in.B * in.T, R = stage_rows(in.B, in.T), C = config_.hidden;
  const bool bert = config_.kind == ModelKind::bert, sp = shard_.sequence_parallel;
  const int64_t row0 = sp ? shard_.tensor_rank * R * C : 0;
  const std::string e = "bert.embeddings.";
  const EmbeddingTables tables =
      bert ? EmbeddingTables{w(e + "word_embeddings.weight"), w(e + "position_embeddings.weight"),
                             w(e + "token_type_embeddings.weight")}
           : EmbeddingTables{w("transformer.wte.weight"), w("transformer.wpe.weight"), nullptr};
  float* sum = bert ? a.emb : a.x0;
  const EmbeddingInputs tokens{in.ids, bert ? in.types : nullptr, in.positions};
  vocab_parallel_embedding_forward(device_, shard_, vocab(), sum, p.full_a, tokens, tables, N, in.T, C);
  if (bert)
    layernorm(device_, a.x0, a.emb_mean, a.emb_rstd, a.emb, w(e + "LayerNorm.weight"), w(e + "LayerNorm.bias"), R, C,
              config_.ln_eps);
  dropout(device_, a.x0, R * C, site_key(key, -1, kSiteEmbed), config_.hidden_dropout, row0);
}

// dx: the gradient of x0 (the region's rows; overwritten).
void Model::embed_backward(Acts& a, const ModelInputs& in, uint64_t key, float* dx) {
  Plan& p = *plan_;
  const int64_t N = in.B * in.T, R = stage_rows(in.B, in.T), C = config_.hidden;
  const bool bert = config_.kind == ModelKind::bert, sp = shard_.sequence_parallel;
  const int64_t row0 = sp ? shard_.tensor_rank * R * C : 0;
  const std::string e = "bert.embeddings.";
  dropout(device_, dx, R * C, site_key(key, -1, kSiteEmbed), config_.hidden_dropout, row0);
  if (!bert) {
    vocab_parallel_embedding_backward(device_, shard_, vocab(),
                                      {g("transformer.wte.weight"), g("transformer.wpe.weight"), nullptr}, dx,
                                      p.full_a, {in.ids, nullptr, in.positions}, N, in.T, C, p.embed);
    return;
  }
  layernorm_backward(device_, p.d_a, false, g(e + "LayerNorm.weight"), g(e + "LayerNorm.bias"), dx, a.emb,
                     w(e + "LayerNorm.weight"), a.emb_mean, a.emb_rstd, R, C, p.reduce);
  vocab_parallel_embedding_backward(device_, shard_, vocab(),
                                    {g(e + "word_embeddings.weight"), g(e + "position_embeddings.weight"),
                                     g(e + "token_type_embeddings.weight")},
                                    p.d_a, p.full_a, {in.ids, in.types, in.positions}, N, in.T, C, p.embed);
}

// ---------------------------------------------------------------- heads
// GPT: LN_f, the LM head tied to wte (this rank's vocabulary rows), the loss; with backward the
// head's gradients and the gradient of xL into a.d_out.
Losses Model::gpt_heads(Acts& a, const ModelInputs& in, const float* xL, bool backward, float loss_scale,
                        bool keep_logits) {
  Plan& p = *plan_;
  const int64_t N = in.B * in.T, R = stage_rows(in.B, in.T), C = config_.hidden, V = vocab_.rows;
  const std::string wte_name = "transformer.wte.weight";
  float *wte = w(wte_name), *lnf_w = w("transformer.ln_f.weight"), *lnf_b = w("transformer.ln_f.bias");
  layernorm(device_, p.lnf, p.lnf_mean, p.lnf_rstd, xL, lnf_w, lnf_b, R, C, config_.ln_eps);
  const float* lnf = gather_rows(device_, shard_, p.lnf, p.full_b, N, C);
  if (keep_logits && shard_.tensor_size > 1) throw Error("model: kept logits need tensor parallel 1");
  // The LM head in chunks of rows: logits, loss (which turns the logits into their gradient), and
  // with backward the head's gradients, before the next chunk reuses the buffer.
  const double tokens = in.lm_denominator > 0 ? in.lm_denominator : double(N);
  if (keep_logits) p.kept_logits.resize(size_t(N * V));
  float* d_part = partial_target(shard_, p.d_b, p.d_c);  // d lnf: N rows of partial sums
  for (int64_t r0 = 0; r0 < N; r0 += p.lm_rows) {
    const int64_t n = std::min(p.lm_rows, N - r0);
    gemm(device_, false, true, n, V, C, 1.0f, lnf + r0 * C, C, wte, C, 0.0f, p.logits, V);
    if (keep_logits) copy_to_host(device_, p.kept_logits.data() + r0 * V, p.logits, size_t(n * V) * sizeof(float));
    vocab_parallel_cross_entropy(device_, shard_, vocab(), p.logits, p.losses + r0, in.targets + r0, n,
                                 float(loss_scale / tokens), p.ce);
    if (!backward) continue;
    gemm(device_, true, false, V, C, n, 1.0f, p.logits, V, lnf + r0 * C, C, 1.0f, g(wte_name), C);
    gemm(device_, false, false, n, C, V, 1.0f, p.logits, V, wte, C, 0.0f, d_part + r0 * C, C);
  }
  Losses out;
  out.predictions = N;
  out.total = out.mlm = sum_losses(device_, p.losses, N) / tokens;
  if (!backward) return out;
  reduce_rows(device_, shard_, d_part, p.d_b, N, C);
  layernorm_backward(device_, a.d_out, false, g("transformer.ln_f.weight"), g("transformer.ln_f.bias"), p.d_b, xL,
                     lnf_w, p.lnf_mean, p.lnf_rstd, R, C, p.reduce);
  notify(head_range_.first, head_range_.second);  // ln_f (and the tied copy of wte)
  return out;
}

// BERT: the NSP head (tanh pooler on [CLS], 2 classes) and the MLM head on the masked positions
// (dense, GELU, LayerNorm, decoder tied to the word embeddings + bias). Both read whole rows of xL,
// so every tensor rank computes them alike but for the decoder's vocabulary rows. The NSP head runs
// on S = B·K slots, each on its instance's [CLS] row (a packed row holds up to K instances; an
// empty slot's label −1 leaves it out of the loss and the gradients), so a packed batch's NSP
// losses are those of its instances run one per row.
Losses Model::bert_heads(Acts& a, const ModelInputs& in, const float* xL_region, bool backward, float loss_scale,
                         bool keep_logits) {
  Plan& p = *plan_;
  const int64_t B = in.B, T = in.T, N = B * T, R = stage_rows(B, T), C = config_.hidden, V = vocab_.rows;
  const int64_t M = B * in.P, S = B * in.K;
  const bool sp = shard_.sequence_parallel;
  const std::string e = "bert.embeddings.", t = "cls.predictions.transform.";
  const std::string wte_name = e + "word_embeddings.weight";
  float* wte = w(wte_name);
  const float* xL = gather_rows(device_, shard_, xL_region, p.full_b, N, C);
  if (keep_logits && shard_.tensor_size > 1) throw Error("model: kept logits need tensor parallel 1");
  if (in.K < 1) throw Error(cat("model: ", in.K, " NSP slots per row"));

  launch(device_, S, NspRows{p.cls_rows, in.nsp_positions, in.K, T});
  launch(device_, S, GatherRows{p.cls_h, xL, p.cls_rows, C});
  linear(device_, p.pool_pre, p.cls_h, w("bert.pooler.dense.weight"), w("bert.pooler.dense.bias"), S, C, C);
  launch(device_, S * C, TanhForward{p.pool, p.pool_pre});
  linear(device_, p.nsp_logits, p.pool, w("cls.seq_relationship.weight"), w("cls.seq_relationship.bias"), S, C, 2);

  launch(device_, M, MaskedPositions{p.mlm_rows, p.mlm_targets, in.mlm_positions, in.mlm_ids, in.P, T});
  std::vector<int32_t> targets(static_cast<size_t>(M));
  if (M) copy_to_host(device_, targets.data(), p.mlm_targets, targets.size() * sizeof(int32_t));
  int64_t count = 0;
  for (int32_t v : targets) count += v >= 0;
  launch(device_, M, GatherRows{p.mlm_h, xL, p.mlm_rows, C});
  linear_gelu(device_, p.mlm_tg, p.mlm_t, Gelu::erf, p.mlm_h, w(t + "dense.weight"), w(t + "dense.bias"), M, C, C);
  layernorm(device_, p.mlm_ln, p.mlm_mean, p.mlm_rstd, p.mlm_tg, w(t + "LayerNorm.weight"), w(t + "LayerNorm.bias"), M,
            C, config_.ln_eps);
  linear(device_, p.mlm_logits, p.mlm_ln, wte, w("cls.predictions.bias"), M, C, V);
  if (keep_logits) {
    p.kept_logits.resize(size_t(M * V + S * 2));
    copy_to_host(device_, p.kept_logits.data(), p.mlm_logits, size_t(M * V) * sizeof(float));
    copy_to_host(device_, p.kept_logits.data() + M * V, p.nsp_logits, size_t(S * 2) * sizeof(float));
  }
  const double predictions = in.lm_denominator > 0 ? in.lm_denominator : double(count);
  // The NSP mean is over instances (samples): the labels ≥ 0, B when unpacked.
  const double samples =
      in.nsp_denominator > 0 ? in.nsp_denominator : double(count_instances(device_, in.nsp_labels, S));
  // Forward only (evaluation): the MLM accuracy, before the cross-entropy overwrites the logits;
  // d_m1 (M × hidden floats, the backward pass's) is free for its 2M floats of scratch.
  const int64_t correct =
      backward ? 0 : vocab_parallel_correct(device_, shard_, vocab(), p.mlm_logits, p.mlm_targets, M, p.d_m1);
  vocab_parallel_cross_entropy(device_, shard_, vocab(), p.mlm_logits, p.mlm_losses, p.mlm_targets, M,
                               predictions > 0 ? float(loss_scale / predictions) : 0.0f, p.ce);
  launch(device_, S,
         CrossEntropy{p.nsp_logits, p.nsp_losses, in.nsp_labels, 2, samples > 0 ? float(loss_scale / samples) : 0.0f});
  Losses out;
  out.predictions = count, out.correct = correct;
  out.mlm = predictions > 0 ? sum_losses(device_, p.mlm_losses, M) / predictions : 0.0;
  out.nsp = samples > 0 ? sum_losses(device_, p.nsp_losses, S) / samples : 0.0;
  out.total = out.mlm + out.nsp;
  if (!backward) return out;

  // MLM head backward, scattered into the gradient of the last hidden states (all N rows).
  gemm(device_, true, false, V, C, M, 1.0f, p.mlm_logits, V, p.mlm_ln, C, 1.0f, g(wte_name), C);
  bias_backward(device_, g("cls.predictions.bias"), p.mlm_logits, M, V, p.reduce);
  gemm(device_, false, false, M, C, V, 1.0f, p.mlm_logits, V, wte, C, 0.0f, p.d_m1, C);
  if (shard_.tensor_size > 1) shard_.tensor->all_reduce_sum(p.d_m1, M * C);  // the vocabulary shards' sum
  layernorm_backward(device_, p.d_m2, false, g(t + "LayerNorm.weight"), g(t + "LayerNorm.bias"), p.d_m1, p.mlm_tg,
                     w(t + "LayerNorm.weight"), p.mlm_mean, p.mlm_rstd, M, C, p.reduce);
  launch(device_, M * C, GeluBackward{p.d_m2, p.d_m2, p.mlm_t, Gelu::erf});
  linear_backward(device_, p.d_m1, false, g(t + "dense.weight"), g(t + "dense.bias"), p.d_m2, p.mlm_h,
                  w(t + "dense.weight"), M, C, C, p.reduce);
  float* dfull = sp ? p.d_c : a.d_out;
  device_zero(device_, dfull, size_t(N * C) * sizeof(float));
  launch(device_, M, ScatterAddRows{dfull, p.d_m1, p.mlm_rows, p.mlm_targets, C});
  // NSP head backward, into the [CLS] rows (an empty slot's, a repeat of its row's first, skipped).
  linear_backward(device_, p.d_pool, false, g("cls.seq_relationship.weight"), g("cls.seq_relationship.bias"),
                  p.nsp_logits, p.pool, w("cls.seq_relationship.weight"), S, C, 2, p.reduce);
  launch(device_, S * C, TanhBackward{p.d_pool, p.d_pool, p.pool});
  linear_backward(device_, p.d_cls, false, g("bert.pooler.dense.weight"), g("bert.pooler.dense.bias"), p.d_pool,
                  p.cls_h, w("bert.pooler.dense.weight"), S, C, C, p.reduce);
  launch(device_, S, ScatterAddRows{dfull, p.d_cls, p.cls_rows, in.nsp_labels, C});
  if (sp) device_copy(device_, a.d_out, dfull + shard_.tensor_rank * R * C, R * C);  // every rank has all rows alike
  notify(head_range_.first, head_range_.second);  // pooler, MLM transform and bias, NSP
  return out;
}

// ---------------------------------------------------------------- chunks and whole steps
// The input of the chunk's layer li: its previous layer's output, or the chunk's input.
const float* Model::chunk_x(const Acts& a, int c, int64_t li) const {
  if (li == a.first) return c == 0 && shard_.embeddings ? a.x0 : a.x_in;
  const Acts::Layer& prev = a.layers[size_t(li - 1 - a.first)];
  return config_.kind == ModelKind::gpt ? prev.res2 : prev.ln2;
}

const float* Model::forward_chunk(int c, int slot, const ModelInputs& in, uint64_t key, bool backward,
                                  float loss_scale, Losses* losses) {
  if (in.T > config_.max_positions)
    throw UsageError(cat("sequence length ", in.T, " exceeds the model's ", config_.max_positions, " positions"));
  Acts& a = plan_->acts.at(size_t(c)).at(size_t(slot));
  if (c == 0 && shard_.embeddings) embed_forward(a, in, key);
  const int64_t end = a.first + shard_.chunks[size_t(c)].second - shard_.chunks[size_t(c)].first;
  for (int64_t li = a.first; li < end; ++li) forward_layer(a, li, in, key, chunk_x(a, c, li));
  const float* out = chunk_x(a, c, end);
  if (!(c + 1 == chunks() && shard_.heads)) return out;
  const bool keep = plan_->keep_logits;
  *losses = config_.kind == ModelKind::gpt ? gpt_heads(a, in, out, backward, loss_scale, keep)
                                           : bert_heads(a, in, out, backward, loss_scale, keep);
  return nullptr;
}

const float* Model::backward_chunk(int c, int slot, const ModelInputs& in, const float* dout, uint64_t key) {
  Plan& p = *plan_;
  Acts& a = p.acts.at(size_t(c)).at(size_t(slot));
  if (c + 1 == chunks() && shard_.heads) dout = a.d_out;
  const int64_t end = a.first + shard_.chunks[size_t(c)].second - shard_.chunks[size_t(c)].first;
  for (int64_t li = end - 1; li >= a.first; --li) {
    backward_layer(a, li, in, key, chunk_x(a, c, li), li == end - 1 ? dout : p.dx, p.dx);
    notify(layer_range_[size_t(li)].first, layer_range_[size_t(li)].second);
  }
  if (!(c == 0 && shard_.embeddings)) return p.dx;
  embed_backward(a, in, key, p.dx);
  notify(embed_range_.first, embed_range_.second);
  return nullptr;
}

Losses Model::step(const ModelInputs& in, bool backward, float loss_scale, uint64_t key, bool keep_logits) {
  if (chunks() != 1 || !shard_.embeddings || !shard_.heads)
    throw Error("Model::step runs a whole model; a pipeline stage runs forward_chunk / backward_chunk");
  plan_for(in.B, in.T, in.P, in.K, {1});
  plan_->keep_logits = keep_logits;
  Losses losses;
  forward_chunk(0, 0, in, key, backward, loss_scale, &losses);
  plan_->keep_logits = false;
  if (backward) backward_chunk(0, 0, in, nullptr, key);
  return losses;
}

std::vector<float> Model::logits() const { return plan_->kept_logits; }

}  // namespace pretrain
