// The cuDNN side of ops/attention.h (attention_cudnn.cpp, its masks' kernels attention_cudnn_cuda.cu), as the fallback's file calls it; built
// only with PRETRAIN_HAVE_CUDNN. Every function that can fail for a reason cuDNN gives returns
// false (or null) with the reason, so the caller warns once and falls back.
#pragma once
#include <cstdint>
#include <string>

#include "trainer/ops/attention.h"

namespace pretrain::ops::cudnn {

struct Sdpa;  // the handle, the graphs built so far, the workspace and the masks' inputs

Sdpa* sdpa_create(const Device& d, bool deterministic, std::string& why);  // null: cuDNN unusable here
void sdpa_destroy(Sdpa* sdpa);
// Builds (once per shape) the forward and backward graphs; false: cuDNN cannot take this shape.
bool sdpa_prepare(Sdpa& sdpa, const AttentionShape& s, std::string& why);
void sdpa_forward(Sdpa& sdpa, const AttentionForward<bf16>& a);
void sdpa_backward(Sdpa& sdpa, const AttentionBackward<bf16>& a);

// The masks' inputs, written on the stream (a cudaStream_t) by attention_cudnn_cuda.cu's kernels:
// each row's number of unmasked keys (padding), the block-diagonal bias of packed rows (0 or −inf,
// [B, T, T]), dropout's seed and offset as the two int64 scalars cuDNN reads.
void write_sequence_lengths(int32_t* lengths, const int32_t* key_mask, int64_t B, int64_t T, void* stream);
void write_packed_bias(bf16* bias, const int32_t* ids, int64_t B, int64_t T, void* stream);
void write_rng_state(int64_t* rng, uint64_t seed, uint64_t offset, void* stream);

}  // namespace pretrain::ops::cudnn
