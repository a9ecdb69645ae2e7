// Where batches live and how a filled host slot becomes a batch: the CPU backend widens in place
// on the host; the CUDA backend copies the slot with cudaMemcpyAsync on its own stream and widens
// it there with the same element functions (loader/widen.h), ordered by events:
//   ready[d]      recorded after the widen kernel: next() makes the consumer's stream wait on it
//   consumed[d]   recorded on the consumer's stream when the Batch is released: the copy stream
//                 waits on it before writing device slot d again
//   host_done[h]  recorded after the memcpy: host slot h is refilled only after it
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "loader/widen.h"
#include "loader/source.h"

namespace pretrain {

// Byte offsets of the batch tensors in one device slot (every field as the id type T), and of the
// staging copy of the host slot (CUDA only).
struct OutputLayout {
  size_t input_ids = 0, segment_ids = 0, input_mask = 0, masked_lm_positions = 0, masked_lm_ids = 0,
         mlm_labels = 0, next_sentence_labels = 0, tokens = 0, targets = 0;
  size_t position_ids = 0, sequence_ids = 0, next_sentence_positions = 0;  // packed BERT
  size_t staging = 0;
  size_t bytes = 0;
  size_t id_size = 4;  // sizeof(T)

  static OutputLayout make(const SlotLayout& slot, size_t id_size, bool staging);
};

template <typename T>
WidenArgs<T> widen_args(const SlotLayout& slot, const OutputLayout& out, int64_t rows,
                        const uint8_t* src, uint8_t* dst) {
  WidenArgs<T> a;
  a.rows = rows;
  a.seq_len = slot.seq_len;
  a.max_predictions = slot.max_predictions;
  a.token_row = slot.token_row();
  a.nsp_slots = slot.nsp_slots();
  a.tokens16 = slot.token_dtype == TensorDType::u16;
  auto at = [dst](size_t offset) { return reinterpret_cast<T*>(dst + offset); };
  if (slot.kind == ModelKind::bert) {
    a.input_ids = src + slot.input_ids;
    a.segment_ids = src + slot.segment_ids;
    a.input_mask = src + slot.input_mask;
    a.masked_lm_positions = reinterpret_cast<const uint16_t*>(src + slot.masked_lm_positions);
    a.masked_lm_ids = src + slot.masked_lm_ids;
    a.next_sentence_labels = src + slot.next_sentence_labels;
    a.out_input_ids = at(out.input_ids);
    a.out_segment_ids = at(out.segment_ids);
    a.out_input_mask = at(out.input_mask);
    a.out_masked_lm_positions = at(out.masked_lm_positions);
    a.out_masked_lm_ids = at(out.masked_lm_ids);
    a.out_mlm_labels = at(out.mlm_labels);
    a.out_next_sentence_labels = at(out.next_sentence_labels);
    if (slot.max_pack > 0) {
      a.position_ids = reinterpret_cast<const uint16_t*>(src + slot.position_ids);
      a.sequence_ids = src + slot.sequence_ids;
      a.next_sentence_positions = reinterpret_cast<const uint16_t*>(src + slot.next_sentence_positions);
      a.out_position_ids = at(out.position_ids);
      a.out_sequence_ids = at(out.sequence_ids);
      a.out_next_sentence_positions = at(out.next_sentence_positions);
    }
  } else {
    a.tokens = src + slot.tokens;
    a.out_tokens = at(out.tokens);
    a.out_targets = at(out.targets);
  }
  return a;
}

struct CopyJob {
  const SlotLayout* slot = nullptr;
  const OutputLayout* out = nullptr;
  int64_t rows = 0;
  int host_slot = 0, device_slot = 0;
  const uint8_t* host = nullptr;  // the filled host slot
  uint8_t* device = nullptr;      // the device slot (OutputLayout::bytes)
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual int device() const = 0;  // -1: host memory
  virtual bool needs_staging() const = 0;
  virtual uint8_t* alloc_host(size_t bytes) = 0;
  virtual void free_host(uint8_t* p) = 0;
  virtual uint8_t* alloc_device(size_t bytes) = 0;
  virtual void free_device(uint8_t* p) = 0;
  // Makes the batch of `job` (asynchronously on CUDA).
  virtual void copy(const CopyJob& job) = 0;
  // Blocks until host slot h may be refilled (its last copy has read it).
  virtual void wait_host_free(int host_slot) = 0;
  // Orders the consumer's stream after device slot d's copy (returns at once on the host).
  virtual void wait_ready(int device_slot, void* consumer_stream) = 0;
  // The consumer is done with device slot d (as of the work queued so far on its stream).
  virtual void consumed(int device_slot, void* consumer_stream) = 0;
};

std::unique_ptr<DeviceBackend> make_cpu_backend();
// `device` is the CUDA device index. Throws Error when CUDA is not built in or no GPU is usable.
std::unique_ptr<DeviceBackend> make_cuda_backend(int device, int host_slots, int device_slots, bool pinned);

}  // namespace pretrain
