// BERT (Google/NVIDIA: post-LayerNorm, erf GELU, MLM head on the masked positions only, NSP head)
// and GPT-2 (pre-LayerNorm, causal, tanh GELU, tied LM head), in llm.c's manner: one arena of
// parameters, one of gradients (same layout), one of activations, and an explicit forward and
// backward per layer. Every op comes from trainer/kernels.h, every GEMM from trainer/backend.h,
// the linears and the tensor group's collectives from trainer/tensor_parallel/.
//
// A Model may be one rank's part of a larger one (ModelShard): tensor parallel cuts every layer's
// matrices (Megatron's column- and row-parallel linears, the vocabulary-parallel embedding and
// cross-entropy), pipeline parallel gives the rank some of the layers, in one chunk or, for the
// interleaved schedule, several. Parameters keep their reference names; each ParamInfo says how
// the whole tensor is cut, so checkpoints hold whole tensors whatever the layout.
//
// The Model's jobs live in files of their own: model_config (presets, FLOPs), model_params (names,
// shards, initial values), model_plan (the activation arena), model_passes (embeddings, the
// transformer layer, forward and backward of a chunk), model_heads (BERT's MLM and NSP heads,
// GPT's LM head); model.cpp puts them together.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/model_config.h"
#include "trainer/model_params.h"

namespace pretrain {

// One micro-batch, as device pointers to int32 tensors (the loader's Batch).
struct ModelInputs {
  int64_t B = 0, T = 0;
  const int32_t* ids = nullptr;
  // BERT
  const int32_t* types = nullptr;  // segment ids [B, T]
  // Attention mask [B, T]: input_mask (1: token, 0: padding), or a packed batch's sequence_ids
  // (a query of instance k sees only the keys of instance k; padding sees every token).
  const int32_t* mask = nullptr;
  const int32_t* positions = nullptr;  // position_ids [B, T] (packed); null: the column index
  int64_t P = 0;                   // max predictions
  const int32_t* mlm_positions = nullptr;  // [B, P]
  const int32_t* mlm_ids = nullptr;        // [B, P]
  // NSP: K instances per row (1 unpacked), their [CLS] positions [B, K] (null: position 0) and
  // labels [B, K] (−1: no instance, ignored).
  int64_t K = 1;
  const int32_t* nsp_positions = nullptr;
  const int32_t* nsp_labels = nullptr;
  // GPT
  const int32_t* targets = nullptr;  // [B, T]
  // What the mean losses divide by: the MLM predictions (BERT) or tokens (GPT), and the NSP
  // samples (instances, when packed), of the whole step — every micro-batch on every rank — so that the gradients the ranks
  // sum are those of one big batch. 0: this micro-batch's own count.
  double lm_denominator = 0, nsp_denominator = 0;
};

// This micro-batch's share of the step's mean losses (its loss sums over the denominators), so
// adding the shares of every micro-batch and rank gives the step's losses.
struct Losses {
  double total = 0;    // what is minimised: BERT mlm + nsp, GPT lm
  double mlm = 0, nsp = 0;
  int64_t predictions = 0;  // BERT: masked positions that counted; GPT: tokens
  int64_t correct = 0;      // BERT, forward only (evaluation): predictions whose target has the largest logit
};

// Predictions of a BERT batch as NVIDIA's run_pretraining.py counts them (kernels::MaskedPositions):
// per sample, the positions before the first 0. `positions` is [B, P] host memory.
int64_t count_predictions(const int32_t* positions, int64_t B, int64_t P);
// The instances among n NSP slots on the device: labels ≥ 0 (a packed row's empty slots are −1).
int64_t count_instances(const Device& d, const int32_t* labels, int64_t n);

class Model {
 public:
  Model(const ModelConfig& config, const Device& device, const ModelShard& shard = {});
  // A model that holds no memory: its parameter list and activation plans only, for what --plan
  // prints before a launch (planned_activation_bytes works; nothing else may be called).
  struct Unallocated {};
  Model(const ModelConfig& config, const ModelShard& shard, Unallocated);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const Device& device() const { return device_; }
  const ModelShard& shard() const { return shard_; }
  int64_t chunks() const { return int64_t(shard_.chunks.size()); }
  // Rows of the activations passed between pipeline stages: B·T, or B·T / tensor under sequence
  // parallelism (each tensor rank passes its rows); × hidden floats.
  int64_t stage_rows(int64_t B, int64_t T) const;
  const std::vector<ParamInfo>& params() const { return layout_.params; }
  const ParamInfo& param(const std::string& name) const;
  int64_t num_parameters() const { return layout_.numel; }
  float* weights() const { return weights_.get(); }
  float* grads() const { return grads_.get(); }

  // Initialises the weights as the references do: BERT truncated normal (σ 0.02, cut at 2σ),
  // GPT-2 normal (σ 0.02; residual projections σ 0.02/sqrt(2·layers)); biases 0, LayerNorm (1, 0).
  // A function of the seed only.
  void init_weights(uint64_t seed);
  void zero_grads();

  // Forward on one micro-batch; with `backward`, adds the gradients of loss_scale × total loss to
  // grads(). dropout_key 0 turns dropout off (evaluation, tests). keep_logits keeps a copy of the
  // logits for logits() (the loss overwrites them with their gradient).
  Losses step(const ModelInputs& in, bool backward, float loss_scale, uint64_t dropout_key, bool keep_logits = false);
  // The kept logits of the last step: GPT [B·T, V]; BERT MLM [B·P, V] then NSP [B·K, 2].
  std::vector<float> logits() const;

  // The pipeline's pieces of step(). Activations of `slots` micro-batches per chunk are kept at
  // once (the schedule's peak); slot s of chunk c holds one micro-batch from its forward to its
  // backward. prepare() plans them for micro-batches of B × T (P predictions, K NSP slots per row).
  void prepare(int64_t B, int64_t T, int64_t P, const std::vector<int>& slots, int64_t K = 1);
  // Where chunk c's input goes for slot s (stage_rows × hidden floats) when the chunk has no
  // embeddings: the previous stage's activations are received into it.
  float* chunk_input(int c, int slot);
  // Forward of chunk c on one micro-batch. Returns its output (stage_rows × hidden, valid until the
  // slot's backward) for the next stage, or, for the chunk with the heads, nullptr after computing
  // the losses into *losses and, with backward, the heads' gradients and the gradient of the
  // chunk's output, kept in the slot for backward_chunk.
  const float* forward_chunk(int c, int slot, const ModelInputs& in, uint64_t key, bool backward, float loss_scale,
                             Losses* losses);
  // Backward of chunk c: dout is the gradient of its output (ignored for the chunk with the heads).
  // Returns the gradient of its input for the previous stage (valid until the next backward), or
  // nullptr for the chunk with the embeddings.
  const float* backward_chunk(int c, int slot, const ModelInputs& in, const float* dout, uint64_t key);

  // Called during the backward pass with each range [begin, end) of the parameter arena whose
  // gradients are final, from the arena's end to its start: the heads, the layers from the last,
  // the embeddings. Data parallel uses it to reduce buckets while the backward pass goes on. Empty:
  // not called (earlier micro-batches of an accumulating step).
  using GradsReady = std::function<void(int64_t begin, int64_t end)>;
  void set_grads_ready(GradsReady f) { grads_ready_ = std::move(f); }

  // --recompute: the GELU outputs and the attention probabilities (Megatron's selective
  // recomputation: the B·heads·T² tensors that dominate activation memory at long sequences) are
  // not kept per layer but recomputed in the backward pass, with the same bits.
  void set_recompute(bool on);
  size_t activation_bytes() const;  // of the current plan (after the first step)
  // GPT: rows of logits the LM head computes at once (0: as many as fit 512 MiB).
  void set_lm_head_rows(int64_t rows);
  // Activation bytes a plan for B × T (P predictions, K NSP slots per row) with these slots per chunk
  // would take, without allocating anything (what --plan prints).
  size_t planned_activation_bytes(int64_t B, int64_t T, int64_t P, const std::vector<int>& slots, int64_t K = 1) const;

 private:
  struct Plan;  // the activation arena and the pointers carved from it (model_plan.h)
  struct Acts;
  void lay_out(bool allocate);  // the parameter list and, when allocating, the arenas
  // model_plan.cpp
  void plan_for(int64_t B, int64_t T, int64_t P, int64_t K, const std::vector<int>& slots);
  size_t carve(Plan& p, float* base, int64_t B, int64_t T, int64_t P, int64_t K, const std::vector<int>& slots) const;
  int64_t lm_head_rows(int64_t N) const;
  // model_passes.cpp
  void forward_layer(Acts& a, int64_t l, const ModelInputs& in, uint64_t key, const float* x);
  void backward_layer(Acts& a, int64_t l, const ModelInputs& in, uint64_t key, const float* x, const float* dout,
                      float* dinp);
  const float* attention_probs(Acts& a, int64_t l, const ModelInputs& in, uint64_t key);
  void attention_forward(Acts& a, int64_t l, const ModelInputs& in, uint64_t key);
  void attention_backward(Acts& a, int64_t l, const ModelInputs& in, uint64_t key, const float* datt, float* dqkv);
  void embed_forward(Acts& a, const ModelInputs& in, uint64_t key);
  void embed_backward(Acts& a, const ModelInputs& in, uint64_t key, float* dx);
  const float* chunk_x(const Acts& a, int c, int64_t layer) const;
  // model_heads.cpp
  Losses bert_heads(Acts& a, const ModelInputs& in, const float* xL, bool backward, float loss_scale, bool keep_logits);
  Losses gpt_heads(Acts& a, const ModelInputs& in, const float* xL, bool backward, float loss_scale, bool keep_logits);

  float* w(const std::string& name) const;
  float* g(const std::string& name) const;
  const VocabularyShard& vocab() const { return vocab_; }
  void notify(int64_t begin, int64_t end) const {
    if (grads_ready_ && end > begin) grads_ready_(begin, end);
  }

  ModelConfig config_;
  Device device_;
  ModelShard shard_;
  VocabularyShard vocab_;  // this rank's rows of the (padded) vocabulary
  // This rank's parameters in arena order, the layers it holds and each part's arena range (for
  // the gradient buckets).
  ShardParams layout_;
  DeviceBuffer<float> weights_, grads_;
  std::unique_ptr<Plan> plan_;
  bool recompute_ = false;
  int64_t lm_rows_ = 0;
  GradsReady grads_ready_;
};

}  // namespace pretrain
