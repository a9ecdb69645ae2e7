// The Model's activation arena (model.h's private Plan and Acts, shared by model_plan.cpp, which
// carves them, and model_passes.cpp / model_heads.cpp, which run on them). Shapes: B batch, T
// sequence, N = B·T rows, R = the region's rows (N, or N / tensor under sequence parallelism),
// C hidden, Cl = C / tensor, NH heads of this rank, I intermediate of this rank, V vocabulary rows
// of this rank, M = B·P prediction slots, S = B·K NSP slots.
#pragma once
#include <cstdint>
#include <vector>

#include "trainer/model.h"
#include "trainer/tensor_parallel/layers.h"

namespace pretrain {

// One micro-batch's activations of one model chunk, kept from its forward to its backward.
struct Model::Acts {
  struct Layer {
    float *ln1, *ln1_mean, *ln1_rstd, *in_full, *qkv, *probs, *probs_drop, *att, *res1, *ln2, *ln2_mean, *ln2_rstd,
        *mlp_full, *fch, *fch_gelu, *res2;
  };
  int64_t first = 0;      // the local index (into layout_.layers) of the chunk's first layer
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

}  // namespace pretrain
