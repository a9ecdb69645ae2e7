// BERT and GPT-2 forward and backward (see model.h). One transformer layer serves both: GPT-2 runs
// it pre-LayerNorm and causal, BERT post-LayerNorm with the padding mask. Shapes: B batch, T
// sequence, N = B·T rows, C hidden, NH heads, hs = C/NH, I intermediate, V vocabulary, P max
// predictions, M = B·P prediction slots.
#include "trainer/model.h"

#include <cmath>
#include <map>

#include "common/counter_rng.h"
#include "common/error.h"

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

double train_flops_per_sample(const ModelConfig& c, int64_t T, double masked) {
  const double C = double(c.hidden), L = double(c.layers), I = double(c.intermediate), V = double(c.vocab_size);
  const double layer_matmuls = 4 * C * C + 2 * C * I;  // qkv, projection, fc, fc projection
  double flops = 6 * double(T) * L * layer_matmuls + 12 * L * C * double(T) * double(T);
  if (c.kind == ModelKind::gpt) return flops + 6 * double(T) * C * V;  // tied LM head
  return flops + 6 * (C * C + 2 * C) + 6 * masked * (C * C + C * V);  // pooler + NSP, MLM head
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

std::vector<ParamInfo> param_layout(const ModelConfig& c) {
  std::vector<ParamInfo> out;
  int64_t offset = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    out.push_back({name, std::move(shape), offset, n, is_decayed(name)});
    offset += n;
  };
  const int64_t C = c.hidden, I = c.intermediate, V = c.vocab_size;
  if (c.kind == ModelKind::gpt) {
    add("transformer.wte.weight", {V, C});
    add("transformer.wpe.weight", {c.max_positions, C});
    for (int l = 0; l < c.layers; ++l) {
      const LayerNames n = layer_names(c.kind, l);
      add(n.ln1_w, {C}), add(n.ln1_b, {C});
      add(n.qkv_w, {3 * C, C}), add(n.qkv_b, {3 * C});
      add(n.proj_w, {C, C}), add(n.proj_b, {C});
      add(n.ln2_w, {C}), add(n.ln2_b, {C});
      add(n.fc_w, {I, C}), add(n.fc_b, {I});
      add(n.fcproj_w, {C, I}), add(n.fcproj_b, {C});
    }
    add("transformer.ln_f.weight", {C});
    add("transformer.ln_f.bias", {C});
    return out;
  }
  add("bert.embeddings.word_embeddings.weight", {V, C});
  add("bert.embeddings.position_embeddings.weight", {c.max_positions, C});
  add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, C});
  add("bert.embeddings.LayerNorm.weight", {C});
  add("bert.embeddings.LayerNorm.bias", {C});
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = cat("bert.encoder.layer.", l, ".attention.self.");
    const LayerNames n = layer_names(c.kind, l);
    add(p + "query.weight", {C, C}), add(p + "key.weight", {C, C}), add(p + "value.weight", {C, C});
    add(p + "query.bias", {C}), add(p + "key.bias", {C}), add(p + "value.bias", {C});
    add(n.proj_w, {C, C}), add(n.proj_b, {C});
    add(n.ln1_w, {C}), add(n.ln1_b, {C});
    add(n.fc_w, {I, C}), add(n.fc_b, {I});
    add(n.fcproj_w, {C, I}), add(n.fcproj_b, {C});
    add(n.ln2_w, {C}), add(n.ln2_b, {C});
  }
  add("bert.pooler.dense.weight", {C, C});
  add("bert.pooler.dense.bias", {C});
  add("cls.predictions.transform.dense.weight", {C, C});
  add("cls.predictions.transform.dense.bias", {C});
  add("cls.predictions.transform.LayerNorm.weight", {C});
  add("cls.predictions.transform.LayerNorm.bias", {C});
  add("cls.predictions.bias", {V});
  add("cls.seq_relationship.weight", {2, C});
  add("cls.seq_relationship.bias", {2});
  return out;
}

// Keys for dropout masks: one per (step key, layer, site), so no two tensors share a mask.
enum Site : uint64_t { kSiteEmbed = 0, kSiteAttnProbs = 1, kSiteAttnOut = 2, kSiteMlpOut = 3 };
uint64_t site_key(uint64_t key, int64_t layer, Site site) {
  return key == 0 ? 0 : mix64(key ^ mix64(uint64_t(layer + 1) * 16 + site));
}

}  // namespace

// ---------------------------------------------------------------- activations
struct Model::Plan {
  struct LayerWeights {
    float *qkv_w, *qkv_b, *proj_w, *proj_b, *ln1_w, *ln1_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b, *ln2_w, *ln2_b;
  };
  struct LayerActs {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *probs, *probs_drop, *att, *res1, *ln2, *ln2_mean, *ln2_rstd, *fch,
        *fch_gelu, *res2;
  };
  std::vector<LayerWeights> lw, lg;  // weights and gradients of each layer
  int64_t B = 0, T = 0, P = 0;
  DeviceBuffer<float> arena;
  DeviceBuffer<int32_t> ints;
  std::vector<LayerActs> acts;
  float *emb, *emb_mean, *emb_rstd, *x0, *lnf, *lnf_mean, *lnf_rstd, *logits, *losses;  // GPT and shared
  float *mlm_h, *mlm_t, *mlm_tg, *mlm_ln, *mlm_mean, *mlm_rstd, *mlm_logits, *mlm_losses;
  float *cls_h, *pool_pre, *pool, *nsp_logits, *nsp_losses;
  float *dx, *d_a, *d_b, *d_c, *d_fch, *d_qkv, *d_probs, *d_m1, *d_m2, *d_cls, *d_pool;
  // --recompute: one layer's GELU output and attention probabilities (before and after dropout),
  // refilled by the backward pass instead of kept for every layer.
  float *gelu_scratch, *probs_scratch, *probs_drop_scratch;
  int32_t *mlm_rows, *mlm_targets, *cls_rows;
  std::vector<float> kept_logits;
  int64_t lm_rows = 0;  // GPT: rows of logits computed at once (the LM head runs in chunks of them)
};

// GPT's logits are tokens × vocabulary: 1.6 GB in fp32 for 8 sequences of 1024 tokens of GPT-2,
// more than the rest of a small model's activations. The LM head, its loss and its backward pass
// are row by row, so they run on chunks of rows that keep at most kLogitsChunk floats of logits.
// Chunks cost the CPU 5–10% of a GPT tiny step (the wte gradient is read and written once per
// chunk), so only logits past 512 MiB are cut; the GEMMs stay thousands of rows tall.
constexpr int64_t kLogitsChunk = int64_t{1} << 27;
int64_t Model::lm_head_rows(int64_t N) const {
  const int64_t rows = lm_rows_ > 0 ? lm_rows_ : std::max<int64_t>(1, kLogitsChunk / config_.vocab_size);
  return std::min(rows, N);
}

void Model::plan_for(int64_t B, int64_t T, int64_t P) {
  Plan& p = *plan_;
  if (p.B == B && p.T == T && p.P == P && p.arena.get()) return;
  const int64_t C = config_.hidden, I = config_.intermediate, V = config_.vocab_size, NH = config_.heads;
  const int64_t N = B * T, M = B * P, L = config_.layers;
  const bool bert = config_.kind == ModelKind::bert;
  // Two passes over the same list: count, then hand out pointers into one allocation.
  float* base = nullptr;
  int64_t used = 0;
  auto take = [&](int64_t n) { float* r = base ? base + used : nullptr; used += (n + 63) / 64 * 64; return r; };
  auto carve = [&] {
    used = 0;
    p.acts.assign(size_t(L), {});
    p.emb = take(N * C), p.emb_mean = take(N), p.emb_rstd = take(N), p.x0 = take(N * C);
    for (auto& a : p.acts) {
      a.ln1 = take(N * C), a.ln1_mean = take(N), a.ln1_rstd = take(N), a.qkv = take(N * 3 * C);
      a.probs = recompute_ ? nullptr : take(B * NH * T * T);
      a.probs_drop = config_.attention_dropout > 0 && !recompute_ ? take(B * NH * T * T) : nullptr;
      a.att = take(N * C), a.res1 = take(N * C), a.ln2 = take(N * C), a.ln2_mean = take(N), a.ln2_rstd = take(N);
      a.fch = take(N * I), a.fch_gelu = recompute_ ? nullptr : take(N * I), a.res2 = take(N * C);
    }
    p.gelu_scratch = recompute_ ? take(N * I) : nullptr;
    p.probs_scratch = recompute_ ? take(B * NH * T * T) : nullptr;
    p.probs_drop_scratch = recompute_ && config_.attention_dropout > 0 ? take(B * NH * T * T) : nullptr;
    if (!bert) {
      p.lm_rows = lm_head_rows(N);
      p.lnf = take(N * C), p.lnf_mean = take(N), p.lnf_rstd = take(N), p.logits = take(p.lm_rows * V), p.losses = take(N);
    } else {
      p.mlm_h = take(M * C), p.mlm_t = take(M * C), p.mlm_tg = take(M * C), p.mlm_ln = take(M * C);
      p.mlm_mean = take(M), p.mlm_rstd = take(M), p.mlm_logits = take(M * V), p.mlm_losses = take(M);
      p.cls_h = take(B * C), p.pool_pre = take(B * C), p.pool = take(B * C), p.nsp_logits = take(B * 2);
      p.nsp_losses = take(B), p.d_m1 = take(M * C), p.d_m2 = take(M * C), p.d_cls = take(B * C), p.d_pool = take(B * C);
    }
    p.dx = take(N * C), p.d_a = take(N * C), p.d_b = take(N * C), p.d_c = take(N * C);
    p.d_fch = take(N * I), p.d_qkv = take(N * 3 * C), p.d_probs = take(B * NH * T * T);
  };
  p.arena.reset();
  carve();
  p.arena = DeviceBuffer<float>(device_, size_t(used));
  base = p.arena.get();
  carve();
  p.ints = DeviceBuffer<int32_t>(device_, size_t(2 * M + B));
  p.mlm_rows = p.ints.get(), p.mlm_targets = p.ints.get() + M, p.cls_rows = p.ints.get() + 2 * M;
  std::vector<int32_t> cls(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) cls[size_t(b)] = int32_t(b * T);
  if (B) copy_to_device(device_, p.cls_rows, cls.data(), cls.size() * sizeof(int32_t));
  p.B = B, p.T = T, p.P = P;
}

void Model::set_recompute(bool on) {
  if (on != recompute_) plan_->B = -1;  // the next step carves the activations again
  recompute_ = on;
}

void Model::set_lm_head_rows(int64_t rows) {
  lm_rows_ = rows;
  plan_->B = -1;
}

size_t Model::activation_bytes() const { return plan_->arena.size() * sizeof(float); }

// ---------------------------------------------------------------- construction
Model::Model(const ModelConfig& config, const Device& device) : config_(config), device_(device), plan_(new Plan) {
  config_.validate();
  params_ = param_layout(config_);
  num_params_ = params_.back().offset + params_.back().numel;
  weights_ = DeviceBuffer<float>(device_, size_t(num_params_));
  grads_ = DeviceBuffer<float>(device_, size_t(num_params_));
  for (int l = 0; l < config_.layers; ++l) {
    const LayerNames n = layer_names(config_.kind, l);
    auto pick = [&](auto get) {
      return Plan::LayerWeights{get(n.qkv_w), get(n.qkv_b), get(n.proj_w), get(n.proj_b), get(n.ln1_w), get(n.ln1_b),
                                get(n.fc_w),  get(n.fc_b),  get(n.fcproj_w), get(n.fcproj_b), get(n.ln2_w), get(n.ln2_b)};
    };
    plan_->lw.push_back(pick([&](const std::string& s) { return w(s); }));
    plan_->lg.push_back(pick([&](const std::string& s) { return g(s); }));
    // Both layouts put a layer's tensors together, the qkv weight (BERT: query) first.
    layer_begin_.push_back(param(n.qkv_w).offset);
    if (config_.kind == ModelKind::gpt) layer_begin_.back() = param(n.ln1_w).offset;
  }
  const LayerNames last = layer_names(config_.kind, int(config_.layers) - 1);
  layer_begin_.push_back(param(last.ln2_b).offset + param(last.ln2_b).numel);
  if (config_.kind == ModelKind::gpt) layer_begin_.back() = param(last.fcproj_b).offset + param(last.fcproj_b).numel;
}

Model::~Model() = default;

const ParamInfo& Model::param(const std::string& name) const {
  for (const ParamInfo& p : params_)
    if (p.name == name) return p;
  throw Error(cat("model has no parameter '", name, "'"));
}
float* Model::w(const std::string& name) const { return weights_.get() + param(name).offset; }
float* Model::g(const std::string& name) const { return grads_.get() + param(name).offset; }

void Model::init_weights(uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(num_params_));
  const bool bert = config_.kind == ModelKind::bert;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamInfo& p = params_[i];
    float* out = host.data() + p.offset;
    const bool norm = p.name.find("LayerNorm") != std::string::npos || p.name.find("ln_") != std::string::npos;
    const bool bias = !is_decayed(p.name) && !norm;
    if (norm && p.name.ends_with("weight")) { std::fill(out, out + p.numel, 1.0f); continue; }
    if (norm || bias) { std::fill(out, out + p.numel, 0.0f); continue; }
    float sigma = 0.02f;
    if (!bert && p.name.ends_with("c_proj.weight")) sigma = 0.02f / std::sqrt(2.0f * float(config_.layers));
    CounterRng rng(seed, i, 0);  // a stream per tensor: the weights are a function of the seed only
    for (int64_t k = 0; k < p.numel; ++k) {
      double z;
      do {  // Box–Muller; BERT's truncated normal redraws beyond 2σ
        const double u1 = 1.0 - rng.random(), u2 = rng.random();
        z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      } while (bert && std::fabs(z) > 2.0);
      out[k] = float(z) * sigma;
    }
  }
  copy_to_device(device_, weights_.get(), host.data(), host.size() * sizeof(float));
}

void Model::zero_grads() { device_zero(device_, grads_.get(), size_t(num_params_) * sizeof(float)); }

// ---------------------------------------------------------------- building blocks
namespace {

// out[N, OC] = inp[N, IC] · Wᵀ + b (W is [OC, IC], as nn.Linear keeps it); the bias rides in the
// GEMM's epilogue.
void linear(const Device& d, float* out, const float* inp, const float* W, const float* b, int64_t N, int64_t IC, int64_t OC) {
  gemm(d, false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC, {.bias = b});
}

// pre = inp · Wᵀ + b, out = GELU(pre): one GEMM with a bias + GELU epilogue for the tanh form
// (cuBLASLt has that one), a GEMM and GeluForward for erf.
void linear_gelu(const Device& d, float* out, float* pre, Gelu act, const float* inp, const float* W, const float* b,
                 int64_t N, int64_t IC, int64_t OC) {
  if (act == Gelu::tanh) return gemm(d, false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC, {.bias = b, .gelu_aux = pre});
  linear(d, pre, inp, W, b, N, IC, OC);
  launch(d, N * OC, GeluForward{out, pre, act});
}

// dinp (= or += with accumulate) dout · W; dW += doutᵀ · inp; db += Σ dout.
void linear_backward(const Device& d, float* dinp, bool accumulate, float* dW, float* db, const float* dout,
                     const float* inp, const float* W, int64_t N, int64_t IC, int64_t OC) {
  if (dinp) gemm(d, false, false, N, IC, OC, 1.0f, dout, OC, W, IC, accumulate ? 1.0f : 0.0f, dinp, IC);
  gemm(d, true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
  launch(d, column_blocks(OC), BiasBackward{db, dout, N, OC});
}

void layernorm(const Device& d, float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
               int64_t N, int64_t C, float eps) {
  launch(d, N, LayerNormForward{out, mean, rstd, inp, w, b, C, eps});
}

// dinp (= or +=) the input gradient; dw, db += the parameter gradients.
void layernorm_backward(const Device& d, float* dinp, bool accumulate, float* dw, float* db, const float* dout,
                        const float* inp, const float* w, const float* mean, const float* rstd, int64_t N, int64_t C) {
  launch(d, column_blocks(C), LayerNormParamBackward{dw, db, dout, inp, mean, rstd, N, C});
  launch(d, N, LayerNormBackward{dinp, dout, inp, w, mean, rstd, C, accumulate});
}

void dropout(const Device& d, float* x, int64_t n, uint64_t key, float p) {
  if (key != 0 && p > 0) launch(d, n, Dropout{x, x, key, p});
}

double sum_losses(const Device& d, const float* losses, int64_t n) {
  std::vector<float> h(static_cast<size_t>(n));
  if (n) copy_to_host(d, h.data(), losses, h.size() * sizeof(float));
  double s = 0;
  for (float v : h) s += v;
  return s;
}

}  // namespace

// ---------------------------------------------------------------- one transformer layer
// Scores, masked softmax and dropout of layer l into its probability buffers (the layer's own, or
// with --recompute the shared scratch, which the backward pass refills with the same bits).
// Returns what multiplies the values: the probabilities after dropout.
const float* Model::attention_probs(int l, const ModelInputs& in, uint64_t key) {
  Plan& p = *plan_;
  Plan::LayerActs& a = p.acts[size_t(l)];
  const int64_t B = in.B, T = in.T, C = config_.hidden, NH = config_.heads, hs = config_.head_size();
  const float scale = 1.0f / std::sqrt(float(hs));
  const bool bert = config_.kind == ModelKind::bert;
  float* probs = recompute_ ? p.probs_scratch : a.probs;
  // Row t of qkv is [q | k | v], head h at offset h·hs of each: GEMMs over heads with stride hs.
  for (int64_t b = 0; b < B; ++b) {
    const float* q = a.qkv + b * T * 3 * C;
    gemm_batched(device_, false, true, T, T, hs, scale, q, 3 * C, hs, q + C, 3 * C, hs, 0.0f, probs + b * NH * T * T,
                 T, T * T, NH);
  }
  launch(device_, B * NH * T, SoftmaxForward{probs, probs, bert ? in.mask : nullptr, !bert, NH, T});
  const uint64_t k = site_key(key, l, kSiteAttnProbs);
  if (k == 0 || config_.attention_dropout <= 0) return probs;
  float* dropped = recompute_ ? p.probs_drop_scratch : a.probs_drop;
  launch(device_, B * NH * T * T, Dropout{dropped, probs, k, config_.attention_dropout});
  return dropped;
}

void Model::attention_forward(int l, const ModelInputs& in, uint64_t key) {
  Plan::LayerActs& a = plan_->acts[size_t(l)];
  const int64_t B = in.B, T = in.T, C = config_.hidden, NH = config_.heads, hs = config_.head_size();
  const float* probs = attention_probs(l, in, key);
  for (int64_t b = 0; b < B; ++b) {
    const float* v = a.qkv + b * T * 3 * C + 2 * C;
    gemm_batched(device_, false, false, T, hs, T, 1.0f, probs + b * NH * T * T, T, T * T, v, 3 * C, hs, 0.0f,
                 a.att + b * T * C, C, hs, NH);
  }
}

void Model::attention_backward(int l, const ModelInputs& in, uint64_t key, const float* datt, float* dqkv) {
  Plan& p = *plan_;
  Plan::LayerActs& a = p.acts[size_t(l)];
  const int64_t B = in.B, T = in.T, C = config_.hidden, NH = config_.heads, hs = config_.head_size();
  const float scale = 1.0f / std::sqrt(float(hs));
  const uint64_t k = site_key(key, l, kSiteAttnProbs);
  const bool dropped = k != 0 && config_.attention_dropout > 0;
  const float* probs = recompute_ ? attention_probs(l, in, key) : dropped ? a.probs_drop : a.probs;
  const float* softmax_out = recompute_ ? p.probs_scratch : a.probs;
  for (int64_t b = 0; b < B; ++b) {
    const float *qkv = a.qkv + b * T * 3 * C, *dO = datt + b * T * C;
    float* dP = p.d_probs + b * NH * T * T;
    gemm_batched(device_, false, true, T, T, hs, 1.0f, dO, C, hs, qkv + 2 * C, 3 * C, hs, 0.0f, dP, T, T * T, NH);
    gemm_batched(device_, true, false, T, hs, T, 1.0f, probs + b * NH * T * T, T, T * T, dO, C, hs, 0.0f,
                 dqkv + b * T * 3 * C + 2 * C, 3 * C, hs, NH);
  }
  if (dropped) launch(device_, B * NH * T * T, Dropout{p.d_probs, p.d_probs, k, config_.attention_dropout});
  launch(device_, B * NH * T, SoftmaxBackward{p.d_probs, p.d_probs, softmax_out, T});
  for (int64_t b = 0; b < B; ++b) {
    const float* qkv = a.qkv + b * T * 3 * C;
    const float* dS = p.d_probs + b * NH * T * T;
    float* dq = dqkv + b * T * 3 * C;
    gemm_batched(device_, false, false, T, hs, T, scale, dS, T, T * T, qkv + C, 3 * C, hs, 0.0f, dq, 3 * C, hs, NH);
    gemm_batched(device_, true, false, T, hs, T, scale, dS, T, T * T, qkv, 3 * C, hs, 0.0f, dq + C, 3 * C, hs, NH);
  }
}

// GPT-2 (pre-LN): ln1 = LN(x); res1 = x + drop(proj(attn(ln1))); ln2 = LN(res1);
//                 res2 = res1 + drop(mlp(ln2)) → the layer's output.
// BERT (post-LN): res1 = x + drop(proj(attn(x))); ln1 = LN(res1); res2 = ln1 + drop(mlp(ln1));
//                 ln2 = LN(res2) → the layer's output.
void Model::forward_layer(int l, const ModelInputs& in, uint64_t key) {
  Plan& p = *plan_;
  Plan::LayerActs& a = p.acts[size_t(l)];
  const Plan::LayerWeights& W = p.lw[size_t(l)];
  const int64_t N = in.B * in.T, C = config_.hidden, I = config_.intermediate;
  const bool pre = config_.kind == ModelKind::gpt;
  const float eps = config_.ln_eps, pd = config_.hidden_dropout;
  const float* x = l == 0 ? p.x0 : (pre ? p.acts[size_t(l) - 1].res2 : p.acts[size_t(l) - 1].ln2);
  const Gelu act = pre ? Gelu::tanh : Gelu::erf;

  if (pre) layernorm(device_, a.ln1, a.ln1_mean, a.ln1_rstd, x, W.ln1_w, W.ln1_b, N, C, eps);
  linear(device_, a.qkv, pre ? a.ln1 : x, W.qkv_w, W.qkv_b, N, C, 3 * C);
  attention_forward(l, in, key);
  linear(device_, a.res1, a.att, W.proj_w, W.proj_b, N, C, C);
  dropout(device_, a.res1, N * C, site_key(key, l, kSiteAttnOut), pd);
  launch(device_, N * C, Accumulate{a.res1, x});

  float* mlp_in;
  if (pre) {
    layernorm(device_, a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, W.ln2_w, W.ln2_b, N, C, eps);
    mlp_in = a.ln2;
  } else {
    layernorm(device_, a.ln1, a.ln1_mean, a.ln1_rstd, a.res1, W.ln1_w, W.ln1_b, N, C, eps);
    mlp_in = a.ln1;
  }
  float* fch_gelu = a.fch_gelu ? a.fch_gelu : p.gelu_scratch;
  linear_gelu(device_, fch_gelu, a.fch, act, mlp_in, W.fc_w, W.fc_b, N, C, I);
  linear(device_, a.res2, fch_gelu, W.fcproj_w, W.fcproj_b, N, I, C);
  dropout(device_, a.res2, N * C, site_key(key, l, kSiteMlpOut), pd);
  launch(device_, N * C, Accumulate{a.res2, pre ? a.res1 : a.ln1});
  if (!pre) layernorm(device_, a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, W.ln2_w, W.ln2_b, N, C, eps);
}

// dout: the gradient of the layer's output; dinp receives its input's (dinp may be dout).
void Model::backward_layer(int l, const ModelInputs& in, uint64_t key, const float* dout, float* dinp) {
  Plan& p = *plan_;
  Plan::LayerActs& a = p.acts[size_t(l)];
  const Plan::LayerWeights &W = p.lw[size_t(l)], &G = p.lg[size_t(l)];
  const int64_t N = in.B * in.T, C = config_.hidden, I = config_.intermediate;
  const bool pre = config_.kind == ModelKind::gpt;
  const float pd = config_.hidden_dropout;
  const float* x = l == 0 ? p.x0 : (pre ? p.acts[size_t(l) - 1].res2 : p.acts[size_t(l) - 1].ln2);
  const Gelu act = pre ? Gelu::tanh : Gelu::erf;
  float *d_a = p.d_a, *d_b = p.d_b, *d_c = p.d_c;
  const uint64_t k_mlp = site_key(key, l, kSiteMlpOut), k_attn = site_key(key, l, kSiteAttnOut);

  // d_a = d res2
  if (pre)
    launch(device_, N * C, Scale{d_a, dout, 1.0f});
  else
    layernorm_backward(device_, d_a, false, G.ln2_w, G.ln2_b, dout, a.res2, W.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
  // MLP: d_b = drop'(d res2) → d_fch → d_c = d mlp_in
  launch(device_, N * C, Scale{d_b, d_a, 1.0f});
  dropout(device_, d_b, N * C, k_mlp, pd);
  float* fch_gelu = a.fch_gelu;
  if (!fch_gelu) {  // --recompute
    fch_gelu = p.gelu_scratch;
    launch(device_, N * I, GeluForward{fch_gelu, a.fch, act});
  }
  linear_backward(device_, p.d_fch, false, G.fcproj_w, G.fcproj_b, d_b, fch_gelu, W.fcproj_w, N, I, C);
  launch(device_, N * I, GeluBackward{p.d_fch, p.d_fch, a.fch, act});
  const float* mlp_in = pre ? a.ln2 : a.ln1;
  linear_backward(device_, d_c, false, G.fc_w, G.fc_b, p.d_fch, mlp_in, W.fc_w, N, C, I);
  // d_a = d res1
  if (pre) {
    layernorm_backward(device_, d_a, true, G.ln2_w, G.ln2_b, d_c, a.res1, W.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
  } else {
    launch(device_, N * C, Accumulate{d_c, d_a});  // d ln1 = the MLP's + the residual's
    layernorm_backward(device_, d_a, false, G.ln1_w, G.ln1_b, d_c, a.res1, W.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
  }
  // Attention: d_b = drop'(d res1) → d_c = d att → d_qkv
  launch(device_, N * C, Scale{d_b, d_a, 1.0f});
  dropout(device_, d_b, N * C, k_attn, pd);
  linear_backward(device_, d_c, false, G.proj_w, G.proj_b, d_b, a.att, W.proj_w, N, C, C);
  attention_backward(l, in, key, d_c, p.d_qkv);
  if (pre) {
    linear_backward(device_, d_c, false, G.qkv_w, G.qkv_b, p.d_qkv, a.ln1, W.qkv_w, N, C, 3 * C);
    launch(device_, N * C, Scale{dinp, d_a, 1.0f});
    layernorm_backward(device_, dinp, true, G.ln1_w, G.ln1_b, d_c, x, W.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
  } else {
    linear_backward(device_, dinp, false, G.qkv_w, G.qkv_b, p.d_qkv, x, W.qkv_w, N, C, 3 * C);
    launch(device_, N * C, Accumulate{dinp, d_a});
  }
}

// ---------------------------------------------------------------- whole models
Losses Model::step(const ModelInputs& in, bool backward, float loss_scale, uint64_t key, bool keep_logits) {
  if (in.T > config_.max_positions)
    throw UsageError(cat("sequence length ", in.T, " exceeds the model's ", config_.max_positions, " positions"));
  return config_.kind == ModelKind::gpt ? gpt_step(in, backward, loss_scale, key, keep_logits)
                                        : bert_step(in, backward, loss_scale, key, keep_logits);
}

std::vector<float> Model::logits() const { return plan_->kept_logits; }

Losses Model::gpt_step(const ModelInputs& in, bool backward, float loss_scale, uint64_t key, bool keep_logits) {
  plan_for(in.B, in.T, 0);
  Plan& p = *plan_;
  const int64_t B = in.B, T = in.T, N = B * T, C = config_.hidden, V = config_.vocab_size, L = config_.layers;
  float *wte = w("transformer.wte.weight"), *wpe = w("transformer.wpe.weight");
  float *lnf_w = w("transformer.ln_f.weight"), *lnf_b = w("transformer.ln_f.bias");
  const uint64_t k_embed = site_key(key, -1, kSiteEmbed);

  launch(device_, N, EmbedForward{p.x0, in.ids, nullptr, wte, wpe, nullptr, T, C});
  dropout(device_, p.x0, N * C, k_embed, config_.hidden_dropout);
  for (int l = 0; l < L; ++l) forward_layer(l, in, key);
  const float* xL = p.acts[size_t(L) - 1].res2;
  layernorm(device_, p.lnf, p.lnf_mean, p.lnf_rstd, xL, lnf_w, lnf_b, N, C, config_.ln_eps);
  // The LM head in chunks of rows: logits, loss (which turns the logits into their gradient), and
  // with backward the head's gradients, before the next chunk reuses the buffer.
  const double tokens = in.lm_denominator > 0 ? in.lm_denominator : double(N);
  if (keep_logits) p.kept_logits.resize(size_t(N * V));
  for (int64_t r0 = 0; r0 < N; r0 += p.lm_rows) {
    const int64_t n = std::min(p.lm_rows, N - r0);
    gemm(device_, false, true, n, V, C, 1.0f, p.lnf + r0 * C, C, wte, C, 0.0f, p.logits, V);
    if (keep_logits) copy_to_host(device_, p.kept_logits.data() + r0 * V, p.logits, size_t(n * V) * sizeof(float));
    launch(device_, n, CrossEntropy{p.logits, p.losses + r0, in.targets + r0, V, float(loss_scale / tokens)});
    if (!backward) continue;
    gemm(device_, true, false, V, C, n, 1.0f, p.logits, V, p.lnf + r0 * C, C, 1.0f, g("transformer.wte.weight"), C);
    gemm(device_, false, false, n, C, V, 1.0f, p.logits, V, wte, C, 0.0f, p.d_b + r0 * C, C);
  }
  Losses out;
  out.predictions = N;
  out.total = out.mlm = sum_losses(device_, p.losses, N) / tokens;
  if (!backward) return out;

  device_zero(device_, p.dx, size_t(N * C) * sizeof(float));
  layernorm_backward(device_, p.dx, false, g("transformer.ln_f.weight"), g("transformer.ln_f.bias"), p.d_b, xL, lnf_w,
                     p.lnf_mean, p.lnf_rstd, N, C);
  notify(layer_begin_.back(), num_params_);  // ln_f
  for (int l = int(L) - 1; l >= 0; --l) {
    backward_layer(l, in, key, p.dx, p.dx);
    notify(layer_begin_[size_t(l)], layer_begin_[size_t(l) + 1]);
  }
  dropout(device_, p.dx, N * C, k_embed, config_.hidden_dropout);
  launch(device_, column_blocks(C), EmbedBackward{g("transformer.wte.weight"), g("transformer.wpe.weight"), nullptr,
                                                  p.dx, in.ids, nullptr, N, T, C});
  notify(0, layer_begin_[0]);  // wte (with the LM head's share) and wpe
  return out;
}

Losses Model::bert_step(const ModelInputs& in, bool backward, float loss_scale, uint64_t key, bool keep_logits) {
  plan_for(in.B, in.T, in.P);
  Plan& p = *plan_;
  const int64_t B = in.B, T = in.T, N = B * T, C = config_.hidden, V = config_.vocab_size, L = config_.layers;
  const int64_t M = B * in.P;
  const std::string e = "bert.embeddings.", t = "cls.predictions.transform.";
  float *wte = w(e + "word_embeddings.weight"), *emb_ln_w = w(e + "LayerNorm.weight");
  const uint64_t k_embed = site_key(key, -1, kSiteEmbed);

  // Embeddings: LN(word + position + token type), dropout.
  launch(device_, N, EmbedForward{p.emb, in.ids, in.types, wte, w(e + "position_embeddings.weight"),
                                  w(e + "token_type_embeddings.weight"), T, C});
  layernorm(device_, p.x0, p.emb_mean, p.emb_rstd, p.emb, emb_ln_w, w(e + "LayerNorm.bias"), N, C, config_.ln_eps);
  dropout(device_, p.x0, N * C, k_embed, config_.hidden_dropout);
  for (int l = 0; l < L; ++l) forward_layer(l, in, key);
  const float* xL = p.acts[size_t(L) - 1].ln2;

  // NSP: tanh pooler on [CLS], then a linear layer to 2 classes.
  launch(device_, B, GatherRows{p.cls_h, xL, p.cls_rows, C});
  linear(device_, p.pool_pre, p.cls_h, w("bert.pooler.dense.weight"), w("bert.pooler.dense.bias"), B, C, C);
  launch(device_, B * C, TanhForward{p.pool, p.pool_pre});
  linear(device_, p.nsp_logits, p.pool, w("cls.seq_relationship.weight"), w("cls.seq_relationship.bias"), B, C, 2);

  // MLM on the masked positions: dense, GELU, LayerNorm, decoder tied to the word embeddings + bias.
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
    p.kept_logits.resize(size_t(M * V + B * 2));
    copy_to_host(device_, p.kept_logits.data(), p.mlm_logits, size_t(M * V) * sizeof(float));
    copy_to_host(device_, p.kept_logits.data() + M * V, p.nsp_logits, size_t(B * 2) * sizeof(float));
  }
  const double predictions = in.lm_denominator > 0 ? in.lm_denominator : double(count);
  const double samples = in.nsp_denominator > 0 ? in.nsp_denominator : double(B);
  launch(device_, M, CrossEntropy{p.mlm_logits, p.mlm_losses, p.mlm_targets, V,
                                  predictions > 0 ? float(loss_scale / predictions) : 0.0f});
  launch(device_, B, CrossEntropy{p.nsp_logits, p.nsp_losses, in.nsp_labels, 2, float(loss_scale / samples)});
  Losses out;
  out.predictions = count;
  out.mlm = predictions > 0 ? sum_losses(device_, p.mlm_losses, M) / predictions : 0.0;
  out.nsp = sum_losses(device_, p.nsp_losses, B) / samples;
  out.total = out.mlm + out.nsp;
  if (!backward) return out;

  // MLM head backward, scattered into the gradient of the last hidden states.
  float* dwte = g(e + "word_embeddings.weight");
  gemm(device_, true, false, V, C, M, 1.0f, p.mlm_logits, V, p.mlm_ln, C, 1.0f, dwte, C);
  launch(device_, column_blocks(V), BiasBackward{g("cls.predictions.bias"), p.mlm_logits, M, V});
  gemm(device_, false, false, M, C, V, 1.0f, p.mlm_logits, V, wte, C, 0.0f, p.d_m1, C);
  layernorm_backward(device_, p.d_m2, false, g(t + "LayerNorm.weight"), g(t + "LayerNorm.bias"), p.d_m1, p.mlm_tg,
                     w(t + "LayerNorm.weight"), p.mlm_mean, p.mlm_rstd, M, C);
  launch(device_, M * C, GeluBackward{p.d_m2, p.d_m2, p.mlm_t, Gelu::erf});
  linear_backward(device_, p.d_m1, false, g(t + "dense.weight"), g(t + "dense.bias"), p.d_m2, p.mlm_h,
                  w(t + "dense.weight"), M, C, C);
  device_zero(device_, p.dx, size_t(N * C) * sizeof(float));
  launch(device_, M, ScatterAddRows{p.dx, p.d_m1, p.mlm_rows, p.mlm_targets, C});
  // NSP head backward, into the [CLS] rows.
  linear_backward(device_, p.d_pool, false, g("cls.seq_relationship.weight"), g("cls.seq_relationship.bias"),
                  p.nsp_logits, p.pool, w("cls.seq_relationship.weight"), B, C, 2);
  launch(device_, B * C, TanhBackward{p.d_pool, p.d_pool, p.pool});
  linear_backward(device_, p.d_cls, false, g("bert.pooler.dense.weight"), g("bert.pooler.dense.bias"), p.d_pool,
                  p.cls_h, w("bert.pooler.dense.weight"), B, C, C);
  launch(device_, B, ScatterAddRows{p.dx, p.d_cls, p.cls_rows, nullptr, C});
  notify(layer_begin_.back(), num_params_);  // pooler, MLM transform and bias, NSP

  for (int l = int(L) - 1; l >= 0; --l) {
    backward_layer(l, in, key, p.dx, p.dx);
    notify(layer_begin_[size_t(l)], layer_begin_[size_t(l) + 1]);
  }
  dropout(device_, p.dx, N * C, k_embed, config_.hidden_dropout);
  layernorm_backward(device_, p.d_a, false, g(e + "LayerNorm.weight"), g(e + "LayerNorm.bias"), p.dx, p.emb, emb_ln_w,
                     p.emb_mean, p.emb_rstd, N, C);
  launch(device_, column_blocks(C), EmbedBackward{dwte, g(e + "position_embeddings.weight"),
                                                  g(e + "token_type_embeddings.weight"), p.d_a, in.ids, in.types, N, T, C});
  notify(0, layer_begin_[0]);  // the embeddings (word embeddings with the decoder's share)
  return out;
}

}  // namespace pretrain
