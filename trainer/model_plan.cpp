// The activation arena: how many floats each micro-batch's activations and the shared scratch
// take for a shape and a pipeline schedule's slots, carved out of one allocation (or only counted,
// for --plan).
#include "trainer/model_plan.h"

#include <algorithm>

#include "common/error.h"

namespace pretrain {

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

}  // namespace pretrain
