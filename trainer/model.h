// BERT (Google/NVIDIA: post-LayerNorm, erf GELU, MLM head on the masked positions only, NSP head)
// and GPT-2 (pre-LayerNorm, causal, tanh GELU, tied LM head), in llm.c's manner: one arena of
// parameters, one of gradients (same layout), one of activations, and an explicit forward and
// backward per layer. Every op comes from trainer/kernels.h, every GEMM from trainer/backend.h.
//
// Parameter names and layouts are those of the reference implementations, so exported weights
// load there as they are: HF's BertForPreTraining for BERT (nn.Linear [out, in]), nanoGPT's GPT for
// GPT-2 (HF's GPT2LMHeadModel after transposing its Conv1D weights).
//
// A Model may be one rank's part of a larger one (ModelShard): tensor parallel cuts every layer's
// matrices (Megatron's column- and row-parallel linears, the vocabulary-parallel embedding and
// cross-entropy), pipeline parallel gives the rank some of the layers, in one chunk or, for the
// interleaved schedule, several. Parameters keep their reference names; each ParamInfo says how
// the whole tensor is cut, so checkpoints hold whole tensors whatever the layout.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/model_kind.h"
#include "trainer/backend.h"

namespace pretrain {

struct ModelConfig {
  ModelKind kind = ModelKind::bert;
  std::string name = "custom";
  int64_t layers = 2, hidden = 128, heads = 2, intermediate = 512;
  int64_t vocab_size = 0, max_positions = 512, type_vocab_size = 2;
  float hidden_dropout = 0.1f, attention_dropout = 0.1f;
  float ln_eps = 1e-12f;

  int64_t head_size() const { return hidden / heads; }
  // BERT: tiny (2×128), mini (4×256), small (4×512), medium (8×512), base (12×768), large
  // (24×1024), as Google's BERT release names them. GPT: tiny (2×128), 124M, 350M, 774M, 1.5B.
  static ModelConfig preset(ModelKind kind, const std::string& name);
  static std::vector<std::string> preset_names(ModelKind kind);
  void validate() const;  // throws UsageError
  std::string describe() const;  // "bert base: 12 layers, hidden 768, 12 heads, vocab 30522"
};

// How tensor parallel cuts a whole tensor into the group's shards: not at all (a replica on every
// rank), by rows (column-parallel weights and biases, vocabulary rows, padded with zero rows past
// the real vocabulary), by columns (row-parallel weights), or as three row blocks cut alike (GPT's
// fused query/key/value weight and bias, so each rank keeps whole heads of all three).
enum class Split { none, rows, columns, qkv_rows };

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // this rank's shard
  int64_t offset = 0, numel = 0;  // in floats, into the parameter (and gradient) arena
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
  const std::vector<ParamInfo>& params() const { return params_; }
  const ParamInfo& param(const std::string& name) const;
  int64_t num_parameters() const { return num_params_; }
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
  struct Plan;
  struct Acts;
  void lay_out(bool allocate);  // the parameter list and, when allocating, the arenas
  void plan_for(int64_t B, int64_t T, int64_t P, int64_t K, const std::vector<int>& slots);
  size_t carve(Plan& p, float* base, int64_t B, int64_t T, int64_t P, int64_t K, const std::vector<int>& slots) const;
  void forward_layer(Acts& a, int64_t l, const ModelInputs& in, uint64_t key, const float* x);
  void backward_layer(Acts& a, int64_t l, const ModelInputs& in, uint64_t key, const float* x, const float* dout,
                      float* dinp);
  const float* attention_probs(Acts& a, int64_t l, const ModelInputs& in, uint64_t key);
  void attention_forward(Acts& a, int64_t l, const ModelInputs& in, uint64_t key);
  void attention_backward(Acts& a, int64_t l, const ModelInputs& in, uint64_t key, const float* datt, float* dqkv);
  void embed_forward(Acts& a, const ModelInputs& in, uint64_t key);
  void embed_backward(Acts& a, const ModelInputs& in, uint64_t key, float* dx);
  Losses bert_heads(Acts& a, const ModelInputs& in, const float* xL, bool backward, float loss_scale, bool keep_logits);
  Losses gpt_heads(Acts& a, const ModelInputs& in, const float* xL, bool backward, float loss_scale, bool keep_logits);
  float* w(const std::string& name) const;
  float* g(const std::string& name) const;
  const float* chunk_x(const Acts& a, int c, int64_t layer) const;

  ModelConfig config_;
  Device device_;
  ModelShard shard_;
  VocabularyShard vocab_;  // this rank's rows of the (padded) vocabulary
  const VocabularyShard& vocab() const { return vocab_; }
  std::vector<ParamInfo> params_;
  int64_t num_params_ = 0;
  DeviceBuffer<float> weights_, grads_;
  std::unique_ptr<Plan> plan_;
  bool recompute_ = false;
  int64_t lm_rows_ = 0;
  int64_t lm_head_rows(int64_t N) const;
  GradsReady grads_ready_;
  // Arena offsets, for the gradient buckets: per layer this rank holds (by its index in layers_) the
  // range of its parameters; the embeddings' and the heads' ranges.
  std::vector<int64_t> layers_;  // the global layer indices this rank holds, chunk by chunk
  std::vector<std::pair<int64_t, int64_t>> layer_range_;
  std::pair<int64_t, int64_t> embed_range_{0, 0}, head_range_{0, 0};
  void notify(int64_t begin, int64_t end) const {
    if (grads_ready_ && end > begin) grads_ready_(begin, end);
  }
};

// FLOPs of one training step (forward + backward) on one sample, PaLM's appendix B count:
// 6 × (matmul parameters touched per token) per token plus 12 · layers · hidden · seq for
// attention's score and value products; BERT's MLM head (dense + decoder) counts on masked
// positions only. `masked` = average masked positions per sample; `instances` = NSP heads per
// sample (a packed row of seq_len tokens runs the pooler and NSP head once per instance it holds).
double train_flops_per_sample(const ModelConfig& c, int64_t seq_len, double masked, double instances = 1);

// The parameter list of the whole model (names, whole shapes, cuts), in arena order.
std::vector<ParamInfo> whole_model_params(const ModelConfig& c);
// Tensor rank `rank`'s shard of a whole tensor (whole: p.full_shape, shard: p.shape), and back:
// its part of the whole written from its shard (padding rows past the whole are dropped).
void take_shard(const ParamInfo& p, const float* whole, float* shard, int rank, int size);
void put_shard(const ParamInfo& p, const float* shard, float* whole, int rank, int size);

}  // namespace pretrain
