// BERT and GPT-2 forward and backward (see model.h): the embeddings, one transformer layer for both
// (GPT-2 runs it pre-LayerNorm and causal, BERT post-LayerNorm with the padding mask), and the
// passes of a model chunk. Shapes: B batch, T sequence, N = B·T rows, C hidden, NH heads, hs = C/NH,
// I intermediate, V vocabulary.
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
// forward to its backward, so the schedule's peak decides how many sets are carved (model_plan.cpp).
#include <cmath>

#include "common/counter_rng.h"
#include "common/error.h"
#include "trainer/model_plan.h"
#include "trainer/tensor_parallel/tensor_group.h"

namespace pretrain {

using namespace kernels;

namespace {
// Keys for dropout masks: one per (step key, layer, site), so no two tensors share a mask.
enum Site : uint64_t { kSiteEmbed = 0, kSiteAttnProbs = 1, kSiteAttnOut = 2, kSiteMlpOut = 3 };
uint64_t site_key(uint64_t key, int64_t layer, Site site) {
  return key == 0 ? 0 : mix64(key ^ mix64(uint64_t(layer + 1) * 16 + site));
}
}  // namespace

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
  uint64_t k = site_key(key, layout_.layers[size_t(li)], kSiteAttnProbs);
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
    uint64_t k = site_key(key, layout_.layers[size_t(li)], kSiteAttnProbs);
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
  const int64_t Cl = C / tp, I = config_.intermediate / tp, l = layout_.layers[size_t(li)];
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
  const int64_t Cl = C / tp, I = config_.intermediate / tp, l = layout_.layers[size_t(li)];
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
    notify(layout_.layer_ranges[size_t(li)].first, layout_.layer_ranges[size_t(li)].second);
  }
  if (!(c == 0 && shard_.embeddings)) return p.dx;
  embed_backward(a, in, key, p.dx);
  notify(layout_.embeddings.first, layout_.embeddings.second);
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

}  // namespace pretrain
