// Attention without the T × T matrix in memory, forward and backward, over the fused QKV layout
// (ops/attention_layout.h): out = dropout(softmax(scale · Q·Kᵀ + mask)) · V per (sequence, head).
//
// Three implementations behind one interface (class Attention, one per device and model):
//  - CPU: the flash-attention algorithm itself, as the reference (cpu:: below). The forward walks
//    key tiles keeping each query's running max m, Σ exp l and output accumulator, rescaled when
//    the max grows (the tiled online softmax), and saves lse = m + log l per query; the backward
//    recomputes each tile's probabilities from lse (exp(s − lse)) and forms dV, dP, dS, dQ, dK tile
//    by tile, with D = Σ dO · O per query in place of Σ P · dP. No T × T buffer on either pass.
//    Tested against the unfused ops in double (scores GEMM, masked softmax, values GEMM and their
//    gradients) on BERT's padding mask, GPT's causal mask and a packed row's block-diagonal mask
//    (tests/trainer/attention_test.cpp).
//  - CUDA, cuDNN's fused SDPA (attention_cudnn.cpp, through cudnn-frontend; flash attention on
//    Hopper): bf16 in and out, fp32 statistics; GPT's causal mask as cuDNN's causal mask; BERT's
//    padding (input_mask, real tokens first) as cuDNN's padding mask from per-row sequence lengths;
//    packed rows' block-diagonal mask as an additive bias tensor [B, 1, T, T] of 0 / −10000 built
//    from the sequence ids; attention dropout by cuDNN's Philox RNG (seed, offset).
//  - CUDA fallback (attention_cuda.cu): batched GEMMs over all (sequence, head) pairs, one call
//    each (cuBLAS pointer arrays, attention_layout.h), around ops/softmax.h's kernel, with the
//    [B, NH, T, T] matrices in a scratch the object owns (one layer at a time: the backward
//    recomputes the probabilities instead of keeping them per layer). It takes fp32 and bf16 and
//    anything cuDNN refuses (a sequence length or head size it cannot take, no libcudnn at run
//    time, cuDNN before 9): the object says why once, on stderr, and falls back; never a crash.
//
// Semantics shared by all three, from trainer/kernels.h: masked keys get the additive −10000 of
// Google's BERT (kernels::key_mask_score: padding keys, other instances' keys); causal keys j > i
// get probability 0 exactly. One difference: with cuDNN's padding mask a padding query's output
// (and lse) is 0, where the others have it attend every real key; nothing real reads a padding
// query (its keys are masked for real queries, its row gets no loss gradient), so every real
// output and every gradient agree; the tests compare real rows.
// Dropout: keep with probability 1 − p, kept values scaled by 1/(1 − p). The CPU and the fallback
// draw the mask from kernels::dropout_keep (a counter hash of (seed, offset) and the element's
// index ((b · NH + h) · T + i) · T + j: the same mask on both, bit for bit); cuDNN from its Philox
// stream: the same distribution, not the same bits, and the tests check the keep rate and scaling
// statistically. GPT runs with p = 0 (nanoGPT's attention dropout off).
// Determinism: the CPU and the fallback give the same bits run to run; cuDNN's backward is asked
// for its deterministic algorithm (no atomics in dQ), which it offers without a bias tensor: with
// packed rows (bias) Options::deterministic sends the call to the fallback instead.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/kernels.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

enum class AttentionMask {
  none,
  padding,  // key_mask = input_mask [B, T], 1 for real tokens, which come first (BERT, unpacked)
  packed,   // key_mask = sequence_ids [B, T], instance k's tokens k ≥ 1, padding 0 (packed rows)
  causal,   // GPT; key_mask null
};

struct AttentionShape {
  int64_t B = 0, T = 0, NH = 0, HS = 0;
  AttentionMask mask = AttentionMask::none;
  float scale = 1.0f;    // 1/sqrt(HS) in both models
  float dropout = 0.0f;  // attention-probability dropout
};

template <typename T>
struct AttentionForward {
  AttentionShape s;
  T* out;                  // [B, T, NH, HS]
  float* lse;              // [B, NH, T]: log Σ_j exp(scale · q·k_j + mask) per query (the backward's)
  const T* qkv;            // [B, T, 3, NH, HS]
  const int32_t* key_mask;  // [B, T] per s.mask; null for none and causal
  uint64_t seed = 0, offset = 0;  // the dropout RNG's key: new per call (step, layer)
};

template <typename T>
struct AttentionBackward {
  AttentionShape s;
  T* dqkv;                 // [B, T, 3, NH, HS], written
  const T* dout;           // [B, T, NH, HS]
  const T* out;            // the forward's
  const float* lse;        // the forward's
  const T* qkv;
  const int32_t* key_mask;
  uint64_t seed = 0, offset = 0;  // the forward's
};

// The dropout mask of element (b, h, i, j) on the CPU and the fallback: kernels::dropout_keep of
// this key and index ((b · NH + h) · T + i) · T + j.
PRETRAIN_HD inline uint64_t attention_dropout_key(uint64_t seed, uint64_t offset) {
  return kernels::mix64(seed ^ kernels::mix64(offset + 0x6a09e667f3bcc909ULL));
}

class Attention {
 public:
  struct Options {
    bool use_cudnn = true;      // false: the fallback only
    bool deterministic = true;  // cuDNN only where its backward is deterministic (see above)
    int64_t tile = 64;          // the CPU's query and key tile
  };
  explicit Attention(const Device& d) : Attention(d, Options{}) {}
  Attention(const Device& d, Options options);
  ~Attention();
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  template <typename T>
  void forward(const AttentionForward<T>& a);
  template <typename T>
  void backward(const AttentionBackward<T>& a);
  // What the last call ran: "cpu flash", "cudnn" or "batched gemm"; and the warnings given so far.
  const std::string& last_path() const { return last_path_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  struct Impl;  // the CUDA side's state (attention_cuda.cu); null on the CPU

 private:
  const Device& device_;
  Options options_;
  Impl* impl_ = nullptr;  // owned: attention_destroy (attention_cuda.cu)
  std::string last_path_;
  std::vector<std::string> warnings_;
};

namespace cpu {

template <typename T>
void attention_forward(const AttentionForward<T>& a, int64_t tile);
template <typename T>
void attention_backward(const AttentionBackward<T>& a, int64_t tile);

}  // namespace cpu
}  // namespace pretrain::ops
