// The heads on the last chunk's output (see model.h): GPT's LM head tied to the word embeddings,
// run on chunks of rows; BERT's MLM head on the masked positions and NSP head on each instance's
// [CLS]; their losses and, with backward, their gradients and the gradient of the chunk's output.
#include <algorithm>

#include "common/error.h"
#include "trainer/model_plan.h"
#include "trainer/tensor_parallel/tensor_group.h"

namespace pretrain {

using namespace kernels;

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

namespace {
double sum_losses(const Device& d, const float* losses, int64_t n) {
  std::vector<float> h(static_cast<size_t>(n));
  if (n) copy_to_host(d, h.data(), losses, h.size() * sizeof(float));
  double s = 0;
  for (float v : h) s += v;
  return s;
}
}  // namespace

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
  notify(layout_.heads.first, layout_.heads.second);  // ln_f (and the tied copy of wte)
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
  notify(layout_.heads.first, layout_.heads.second);  // pooler, MLM transform and bias, NSP
  return out;
}

std::vector<float> Model::logits() const { return plan_->kept_logits; }

}  // namespace pretrain
