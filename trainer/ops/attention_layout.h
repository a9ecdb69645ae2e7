// Where each (sequence, head)'s matrices lie for attention's batched GEMMs: the fallback path of
// ops/attention.h, one batched call per GEMM over all B · NH (sequence, head) pairs instead of one
// call per sequence (today's ~18,000 cuBLASLt calls per BERT-base step). Host code, like
// gemm_layout.h, so the indexing is tested without a GPU (tests/trainer/attention_layout_test.cpp).
//
// The tensors, C = NH · HS:
//   qkv  [B, T, 3, NH, HS]  the fused QKV projection's output (and dqkv, its gradient)
//   out  [B, T, NH, HS]     the heads' outputs side by side, the output projection's input
//   att  [B, NH, T, T]      scores, probabilities and their gradients (one scratch at a time)
// Batch entry e = b · NH + h sits at b · per_sequence + h · per_head elements from the base. One
// stride for all entries needs per_sequence = NH · per_head: att has it (T², T² · NH); the rows of
// qkv and out do not (Q's per_sequence is 3 · T · C, its per_head HS: 3 · T · C ≠ NH · HS = C), so
// no single strided-batched call can address them in place. The fallback makes one pointer-array
// batched call per GEMM (cublasGemmBatchedEx: the pointers written on the device from these
// offsets, no host work per step); strided() says when one stride would do (B = 1, or att).
#pragma once
#include <cstdint>

#include "common/hd.h"

namespace pretrain::ops {

// One operand of a batched GEMM: entry e at base + offset(e); rows ld elements apart (row-major).
struct BatchedOperand {
  int64_t per_sequence, per_head, ld;
  int64_t base;  // elements from the tensor's start to entry 0 (Q 0, K C, V 2C in qkv)
  PRETRAIN_HD int64_t offset(int64_t e, int64_t NH) const { return base + (e / NH) * per_sequence + (e % NH) * per_head; }
  // The single stride between consecutive entries, when there is one; else −1.
  int64_t strided(int64_t B, int64_t NH) const {
    if (B == 1 || per_sequence == NH * per_head) return per_head;
    if (NH == 1) return per_sequence;
    return -1;
  }
};

// Row-major C(e) = op(A(e)) · op(B(e)) (+ beta · C(e)) for e in [0, B · NH): m × n, inner k.
struct AttentionGemm {
  bool ta, tb;
  int64_t m, n, k;
  BatchedOperand a, b, c;
};

struct AttentionLayout {
  int64_t B, T, NH, HS;

  int64_t C() const { return NH * HS; }
  int64_t batch() const { return B * NH; }
  // Q (which = 0), K (1) or V (2) of entry e in qkv (and dQ, dK, dV in dqkv): T × HS, rows 3C apart.
  BatchedOperand qkv(int which) const { return {T * 3 * C(), HS, 3 * C(), which * C()}; }
  BatchedOperand out() const { return {T * C(), HS, C(), 0}; }  // T × HS, rows C apart
  BatchedOperand att() const { return {NH * T * T, T * T, T, 0}; }  // T × T

  // Forward: S = Q·Kᵀ (scaled in the softmax), O = P·V.
  AttentionGemm scores() const { return {false, true, T, T, HS, qkv(0), qkv(1), att()}; }
  AttentionGemm context() const { return {false, false, T, HS, T, att(), qkv(2), out()}; }
  // Backward: dP = dO·Vᵀ, dV = Pᵀ·dO, and from dS (the softmax's backward, scale included)
  // dQ = dS·K, dK = dSᵀ·Q. dO is in out()'s layout, dQ/dK/dV in qkv's.
  AttentionGemm dprobs() const { return {false, true, T, T, HS, out(), qkv(2), att()}; }
  AttentionGemm dvalues() const { return {true, false, T, HS, T, att(), out(), qkv(2)}; }
  AttentionGemm dqueries() const { return {false, false, T, HS, T, att(), qkv(1), qkv(0)}; }
  AttentionGemm dkeys() const { return {true, false, T, HS, T, att(), qkv(0), qkv(1)}; }
};

}  // namespace pretrain::ops
