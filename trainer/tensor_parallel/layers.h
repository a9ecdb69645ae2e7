// Megatron-LM's tensor-parallel layers (megatron/core/tensor_parallel/layers.py, mappings.py,
// cross_entropy.py), written once over the backend's ops and a TensorGroup, and the plain linear,
// LayerNorm and dropout layers of one rank they are cut from or sit between. The model
// (trainer/model_passes.cpp, model_heads.cpp) builds its transformer from these; they know nothing
// of the grid, the pipeline or data parallelism (trainer/parallel/, which uses the model);
// tests/trainer/layers_mpi_test.cpp checks each against the single-rank layer, forward and
// backward, at tensor 2 and 4.
//
// A region is what the replicated parts of the model (LayerNorm, dropout, residual) hold: all N
// rows on every rank, or under sequence parallelism R = N/t rows per rank. A split layer reads or
// writes whole rows of its own columns, so between a region and a split layer sit Megatron's
// conjugate operators: gather_rows (identity, or all-gather under sequence parallelism) before a
// column-parallel layer, reduce_rows (all-reduce, or reduce-scatter) after a row-parallel one; the
// backward passes swap them.
#pragma once
#include <cstdint>

#include "trainer/backend.h"
#include "trainer/model_params.h"

namespace pretrain {

// ---------------------------------------------------------------- one rank's building blocks
// out[N, OC] = inp[N, IC] · Wᵀ + b (W is [OC, IC], as nn.Linear keeps it); the bias rides in the
// GEMM's epilogue.
void linear(const Device& d, float* out, const float* inp, const float* W, const float* b, int64_t N, int64_t IC,
            int64_t OC);
// pre = inp · Wᵀ + b, out = GELU(pre): one GEMM with a bias + GELU epilogue for the tanh form
// (cuBLASLt has that one), a GEMM and GeluForward for erf.
void linear_gelu(const Device& d, float* out, float* pre, kernels::Gelu act, const float* inp, const float* W,
                 const float* b, int64_t N, int64_t IC, int64_t OC);
// db[C] += Σ_r dout[r] over N rows, in kernels.h's two passes through `scratch`
// (bias_scratch_floats(N, C) floats of device memory, left undefined).
inline int64_t bias_scratch_floats(int64_t N, int64_t C) { return kernels::row_chunks(N) * C; }
void bias_backward(const Device& d, float* db, const float* dout, int64_t N, int64_t C, float* scratch);
// dinp (= or += with accumulate; skipped when null) dout · W; dW += doutᵀ · inp; db += Σ dout
// (through `scratch`, bias_scratch_floats(N, OC) floats).
void linear_backward(const Device& d, float* dinp, bool accumulate, float* dW, float* db, const float* dout,
                     const float* inp, const float* W, int64_t N, int64_t IC, int64_t OC, float* scratch);
// LayerNorm over rows of C: out = (x − mean) · rstd · w + b, keeping mean and rstd [N].
void layernorm(const Device& d, float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
               int64_t N, int64_t C, float eps);
// dinp (= or += with accumulate) the input gradient; dw, db += the parameter gradients, through
// `scratch` (2 · bias_scratch_floats(N, C) floats: dw's partial sums, then db's).
void layernorm_backward(const Device& d, float* dinp, bool accumulate, float* dw, float* db, const float* dout,
                        const float* inp, const float* w, const float* mean, const float* rstd, int64_t N, int64_t C,
                        float* scratch);
// In place, n elements: dropout with probability p under `key` (kernels::Dropout; key 0 or p 0:
// nothing). offset: the index of x[0] in the whole tensor, so every layout draws the same mask.
// The backward pass is the same call on the gradient.
void dropout(const Device& d, float* x, int64_t n, uint64_t key, float p, int64_t offset = 0);

// ---------------------------------------------------------------- region ↔ whole rows
// The whole N rows (× C) of a region: all-gathered into `full` under sequence parallelism, the
// region itself otherwise.
const float* gather_rows(const Device& d, const ModelShard& s, const float* region, float* full, int64_t N, int64_t C);
// Where a row-parallel product goes before reduce_rows: whole-row scratch under sequence
// parallelism, the region itself otherwise (reduced in place there).
inline float* partial_target(const ModelShard& s, float* region, float* full) {
  return s.sequence_parallel ? full : region;
}
// The group's sum of N rows of partial products, into the region: a reduce-scatter under sequence
// parallelism, an all-reduce otherwise, nothing at tensor 1.
void reduce_rows(const Device& d, const ModelShard& s, float* partial, float* region, int64_t N, int64_t C);

// ---------------------------------------------------------------- split linears
// Column-parallel linear: W holds this rank's OCl = OC/t rows of the whole [OC, IC] weight, b its
// OCl biases. out[N, OCl] = X · Wᵀ + b, X the whole rows of the region (gathered into `full` under
// sequence parallelism); with gelu_out, out is the pre-activation and gelu_out its GELU. Returns X,
// which the backward pass reads.
const float* column_parallel_forward(const Device& d, const ModelShard& s, float* out, const float* region,
                                     float* full, const float* W, const float* b, int64_t N, int64_t IC, int64_t OCl,
                                     float* gelu_out = nullptr, kernels::Gelu act = kernels::Gelu::tanh);
// From dout [N, OCl]: dW, db += this rank's parts; dregion (= the group's sum of dout · W, the
// region's rows of it) — `scratch` holds N × IC partial sums under sequence parallelism.
void column_parallel_backward(const Device& d, const ModelShard& s, float* dregion, float* scratch, float* dW,
                              float* db, const float* dout, const float* X, const float* W, int64_t N, int64_t IC,
                              int64_t OCl, float* bias_scratch);
// Row-parallel linear: W holds this rank's ICl = IC/t columns of the whole [OC, IC] weight, X
// [N, ICl] the matching columns of the input; b is whole and added once (by rank 0, before the
// reduction). region = the group's sum of X · Wᵀ (+ b); `scratch` holds N × OC partial sums under
// sequence parallelism.
void row_parallel_forward(const Device& d, const ModelShard& s, float* region, float* scratch, const float* X,
                          const float* W, const float* b, int64_t N, int64_t ICl, int64_t OC);
// From the region's dout: dX [N, ICl] = dout · W; dW += doutᵀ · X; db += Σ dout over the whole
// rows (so it is whole on every rank). `full` holds the gathered dout under sequence parallelism.
void row_parallel_backward(const Device& d, const ModelShard& s, float* dX, const float* dregion, float* full,
                           float* dW, float* db, const float* X, const float* W, int64_t N, int64_t ICl, int64_t OC,
                           float* bias_scratch);

// ---------------------------------------------------------------- the vocabulary split
// The embedding tables a rank reads: its vocabulary rows of `words`; positions (and token types)
// whole, added by rank 0 only, so the group's sum counts them once.
struct EmbeddingTables {
  const float *words = nullptr, *positions = nullptr, *types = nullptr;
};
struct EmbeddingGrads {
  float *words = nullptr, *positions = nullptr, *types = nullptr;
};
// The per-token inputs of an embedding lookup, N rows each: ids, token types (null: none) and
// position_ids (null: each row's column, r mod T; a packed batch's restart at every instance).
struct EmbeddingInputs {
  const int32_t *ids = nullptr, *types = nullptr, *positions = nullptr;
};
// Vocabulary-parallel embedding: region = the group's sum of each rank's lookups (the ids outside
// its rows look up zeros), + positions (+ types) — N rows of ids over T positions. `scratch` holds
// N × C partial sums under sequence parallelism.
void vocab_parallel_embedding_forward(const Device& d, const ModelShard& s, const VocabularyShard& v, float* region,
                                      float* scratch, const EmbeddingInputs& in, const EmbeddingTables& tables,
                                      int64_t N, int64_t T, int64_t C);
// The embedding backward's scratch (kernels::EmbedGroup): the rows grouped by where they land
// and the segments of the big groups (ints), and the segments' sums (floats). A table of N rows
// has at most N groups, and its groups of more than kRowChunk rows at most 2·N/kRowChunk segments.
struct EmbeddingScratch {
  float* partial = nullptr;   // embedding_scratch_floats(N, C), device memory
  int32_t* index = nullptr;   // embedding_scratch_ints(N), device memory
};
inline int64_t embedding_segments(int64_t N) { return 3 * 2 * kernels::row_chunks(N); }
inline int64_t embedding_scratch_floats(int64_t N, int64_t C) { return embedding_segments(N) * C; }
inline int64_t embedding_scratch_ints(int64_t N) {
  return 3 * N + 2 * embedding_segments(N) + 3 * N * int64_t(sizeof(kernels::EmbedGroup) / sizeof(int32_t));
}
// From the region's dout (gathered into `full` under sequence parallelism): the rows of this
// rank's ids, positions and types accumulate into the gradients (positions and types are whole on
// every rank). The groups are made on the host from the ids, types and positions (copied back:
// 4 bytes a token), as llm.c's encoder_backward buckets its tokens.
void vocab_parallel_embedding_backward(const Device& d, const ModelShard& s, const VocabularyShard& v,
                                       const EmbeddingGrads& grads, const float* dregion, float* full,
                                       const EmbeddingInputs& in, int64_t N, int64_t T, int64_t C,
                                       const EmbeddingScratch& scratch);

// Vocabulary-parallel cross-entropy over n rows of this rank's logits [n, v.rows]: losses[n] and,
// in place, the logits' gradient (× dloss). Targets < 0 are ignored. The whole logits never exist
// on one rank: the row max, the target logit and Σ exp are reduced over the group (Σ exp in double,
// so every layout rounds it alike). `scratch` holds 4n floats at tensor > 1.
void vocab_parallel_cross_entropy(const Device& d, const ModelShard& s, const VocabularyShard& v, float* logits,
                                  float* losses, const int32_t* targets, int64_t n, float dloss, float* scratch);
// Of the n rows whose target is ≥ 0, how many give their target the largest logit of the row (the
// real vocabulary's; a tie counts as right): the MLM accuracy of an evaluation. Reads the logits
// before vocab_parallel_cross_entropy overwrites them; the row max and target logit are reduced
// over the tensor group. `scratch`: 2n floats on the device.
int64_t vocab_parallel_correct(const Device& d, const ModelShard& s, const VocabularyShard& v, const float* logits,
                               const int32_t* targets, int64_t n, float* scratch);

}  // namespace pretrain
