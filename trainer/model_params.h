// The model's parameters: their names and layouts (those of the reference implementations, so
// exported weights load there as they are: HF's BertForPreTraining for BERT, nn.Linear [out, in];
// nanoGPT's GPT for GPT-2, HF's GPT2LMHeadModel after transposing its Conv1D weights), how tensor
// and pipeline parallelism cut them into one rank's shard, and their initial values.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainer/model_config.h"

namespace pretrain {

// How tensor parallel cuts a whole tensor into the group's shards: not at all (a replica on every
// rank), by rows (column-parallel weights and biases, vocabulary rows, padded with zero rows past
// the real vocabulary), by columns (row-parallel weights), or as three row blocks cut alike (GPT's
// fused query/key/value weight and bias, so each rank keeps whole heads of all three).
enum class Split { none, rows, columns, qkv_rows };

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // this rank's shard
  int64_t offset = 0, numel = 0;  // in elements, into the parameter (and gradient) arenas
  bool decay = true;              // weight decay applies (not to biases and LayerNorm)
  std::vector<int64_t> full_shape;  // the whole tensor's, as checkpoints hold it
  Split split = Split::none;
  int64_t full_index = 0;  // position in the whole model's parameter list (its initialisation stream)
  // Counts toward global norms on this rank: a replica only on tensor rank 0; the last pipeline
  // stage's copy of the word embeddings never (the first stage's counts).
  bool counted = true;
  // Under sequence parallelism each tensor rank sees some rows only: the gradients of the
  // LayerNorms and row-parallel biases in those regions are partial sums over the tensor group.
  bool sequence_partial = false;
  // The last pipeline stage's copy of the tied word embeddings (pipeline > 1); same name.
  bool tied_copy = false;
};

class TensorGroup;

// This rank's part of the model. The default is the whole model.
struct ModelShard {
  int tensor_rank = 0, tensor_size = 1;
  bool sequence_parallel = false;
  TensorGroup* tensor = nullptr;  // collectives over the tensor group (needed when tensor_size > 1)
  // The layers [begin, end) of each model chunk this rank runs (one chunk, or one per virtual
  // stage); empty: all layers in one chunk.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  bool embeddings = true;  // the first chunk starts with the embeddings (pipeline stage 0)
  bool heads = true;       // the last chunk ends with the heads (the last stage)
};

// Megatron pads the vocabulary to a multiple of 128 × tensor so every shard is whole and aligned;
// the padded ids' logits are left out of the softmax, so the padding changes no result.
int64_t padded_vocab(int64_t vocab, int tensor_size);

// Rows of the (padded) vocabulary each tensor rank holds, and the first id of this rank's.
struct VocabularyShard {
  int64_t vocab = 0;  // real ids; those past it (padding) are left out of the softmax
  int64_t rows = 0;   // this rank's rows
  int64_t begin = 0;  // its first id
  static VocabularyShard of(int64_t vocab, const ModelShard& s);
};

// The parameter list of the whole model (names, whole shapes, cuts), in arena order.
std::vector<ParamInfo> whole_model_params(const ModelConfig& c);
// Tensor rank `rank`'s shard of a whole tensor (whole: p.full_shape, shard: p.shape), and back:
// its part of the whole written from its shard (padding rows past the whole are dropped).
void take_shard(const ParamInfo& p, const float* whole, float* shard, int rank, int size);
void put_shard(const ParamInfo& p, const float* shard, float* whole, int rank, int size);

// The names of one transformer layer's tensors. BERT's query, key and value are three tensors
// laid out back to back, so qkv_w names the first, the [3C, C] matrix of one fused GEMM (and
// qkv_b the [3C] bias).
struct LayerNames {
  std::string qkv_w, qkv_b, proj_w, proj_b, ln1_w, ln1_b, fc_w, fc_b, fcproj_w, fcproj_b, ln2_w, ln2_b;
};
LayerNames layer_names(ModelKind kind, int64_t layer);
// The tied word embeddings: GPT's wte, BERT's word_embeddings (the MLM decoder's weight too).
std::string word_embeddings_name(ModelKind kind);

// One rank's parameters, in arena order: the embeddings (first stage), the layers of each chunk,
// the heads (last stage) and the last stage's copy of the tied word embeddings (pipeline > 1);
// with the arena range each part's gradients occupy, which data parallel reduces as the backward
// pass finishes them. Throws UsageError when the tensor size does not divide the heads or the MLP.
struct ShardParams {
  std::vector<ParamInfo> params;
  int64_t numel = 0;
  std::vector<int64_t> layers;  // the global indices of the layers this rank holds, chunk by chunk
  std::vector<std::pair<int64_t, int64_t>> layer_ranges;  // [begin, end) of each, by its index in `layers`
  std::pair<int64_t, int64_t> embeddings{0, 0}, heads{0, 0};
};
ShardParams shard_params(const ModelConfig& c, const ModelShard& s);  // s.chunks must be set

// The initial weights of one rank's parameters, in their arena layout, as the references draw
// them: BERT truncated normal (σ 0.02, cut at 2σ), GPT-2 normal (σ 0.02; residual projections
// σ 0.02/sqrt(2·layers)); biases 0, LayerNorm (1, 0). Each whole tensor is drawn from its own
// stream (its index in the whole model), then cut: a function of the seed only, whatever the layout.
std::vector<float> initial_weights(const ModelConfig& c, const ModelShard& s, const ShardParams& params, uint64_t seed);

}  // namespace pretrain
