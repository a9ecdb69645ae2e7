// The "widen" step of the device copy, written once for both backends: a host slot holds ids as
// uint16 (when the vocabulary fits) and small fields as uint8; the batch the consumer sees holds
// every field as T (int32 or int64), plus the dense MLM labels and GPT's shifted targets. The CPU
// backend runs widen_*_element in a loop over the slot, the CUDA backend in a kernel on its copy
// stream (loader/device_copy_cuda.cu) — one body, so the CPU tests check the GPU path's arithmetic.
#pragma once
#include <cstdint>

#include "common/hd.h"

namespace pretrain {

// A host slot (narrow) and the batch tensors (wide), for one batch of `rows` samples. Token
// arrays are uint16 when tokens16 is set, else int32.
template <typename T>
struct WidenArgs {
  int64_t rows = 0, seq_len = 0, max_predictions = 0, token_row = 0;  // token_row: GPT seq_len + 1
  int64_t nsp_slots = 1;  // NSP labels per row: a packed slot's max_pack, else 1
  bool tokens16 = true;
  // BERT sources (slot) and destinations (batch)
  const void* input_ids = nullptr;
  const uint8_t* segment_ids = nullptr;
  const uint8_t* input_mask = nullptr;
  const uint16_t* masked_lm_positions = nullptr;
  const void* masked_lm_ids = nullptr;
  const uint8_t* next_sentence_labels = nullptr;  // int8 values (−1: a packed row's empty slot)
  const uint16_t* position_ids = nullptr;         // packed only, as the next two
  const uint8_t* sequence_ids = nullptr;
  const uint16_t* next_sentence_positions = nullptr;
  T* out_input_ids = nullptr;
  T* out_segment_ids = nullptr;
  T* out_input_mask = nullptr;
  T* out_masked_lm_positions = nullptr;
  T* out_masked_lm_ids = nullptr;
  T* out_mlm_labels = nullptr;
  T* out_next_sentence_labels = nullptr;
  T* out_position_ids = nullptr;
  T* out_sequence_ids = nullptr;
  T* out_next_sentence_positions = nullptr;
  // GPT source and destinations
  const void* tokens = nullptr;
  T* out_tokens = nullptr;
  T* out_targets = nullptr;
};

template <typename T>
PRETRAIN_HD inline T load_token(const void* base, bool tokens16, int64_t i) {
  return tokens16 ? T(static_cast<const uint16_t*>(base)[i]) : T(static_cast<const int32_t*>(base)[i]);
}

// BERT in two passes (two launches on one stream on the GPU, two loops on the CPU), so that no
// element scans a row: pass 1 widens the [B, S] tensors and sets every dense MLM label to -1; pass
// 2 widens the [B, P] tensors and writes each prediction's label at its position.
// Pass 1, element i of [0, rows * seq_len); the [B, nsp_slots] labels (and a packed row's [CLS]
// positions) ride along on the first rows · nsp_slots elements (nsp_slots ≤ seq_len).
template <typename T>
PRETRAIN_HD inline void widen_bert_tokens(const WidenArgs<T>& a, int64_t i) {
  a.out_input_ids[i] = load_token<T>(a.input_ids, a.tokens16, i);
  a.out_segment_ids[i] = T(a.segment_ids[i]);
  a.out_input_mask[i] = T(a.input_mask[i]);
  a.out_mlm_labels[i] = T(-1);
  if (a.position_ids) {
    a.out_position_ids[i] = T(a.position_ids[i]);
    a.out_sequence_ids[i] = T(a.sequence_ids[i]);
  }
  if (i < a.rows * a.nsp_slots) {
    a.out_next_sentence_labels[i] = T(int8_t(a.next_sentence_labels[i]));
    if (a.next_sentence_positions) a.out_next_sentence_positions[i] = T(a.next_sentence_positions[i]);
  }
}

// Pass 2, element i of [0, rows * max_predictions). Predictions count as NVIDIA's
// run_pretraining.py counts them: up to the first position 0 of the row (position 0 is [CLS],
// never masked), so prediction p counts when positions 0..p of its row are all non-zero.
template <typename T>
PRETRAIN_HD inline void widen_bert_predictions(const WidenArgs<T>& a, int64_t i) {
  const int64_t b = i / a.max_predictions, p = i % a.max_predictions;
  const uint16_t* positions = a.masked_lm_positions + b * a.max_predictions;
  const T id = load_token<T>(a.masked_lm_ids, a.tokens16, i);
  a.out_masked_lm_positions[i] = T(positions[p]);
  a.out_masked_lm_ids[i] = id;
  for (int64_t q = 0; q <= p; ++q)
    if (positions[q] == 0) return;
  a.out_mlm_labels[b * a.seq_len + positions[p]] = id;
}

// Element i of [0, rows * seq_len): tokens[b, s] = row[b][s], targets[b, s] = row[b][s + 1].
template <typename T>
PRETRAIN_HD inline void widen_gpt_element(const WidenArgs<T>& a, int64_t i) {
  const int64_t b = i / a.seq_len, s = i % a.seq_len;
  const int64_t src = b * a.token_row + s;
  a.out_tokens[i] = load_token<T>(a.tokens, a.tokens16, src);
  a.out_targets[i] = load_token<T>(a.tokens, a.tokens16, src + 1);
}

}  // namespace pretrain
