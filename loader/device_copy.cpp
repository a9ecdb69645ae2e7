// The CPU backend (aligned host memory; the widen step runs right away on the calling thread) and
// the output layout both backends share.
#include "loader/device_copy.h"

#include <cstdlib>
#include <new>

namespace pretrain {

namespace {
size_t align64(size_t n) { return (n + 63) & ~size_t(63); }
}  // namespace

OutputLayout OutputLayout::make(const SlotLayout& slot, size_t id_size, bool staging) {
  OutputLayout o;
  o.id_size = id_size;
  const size_t bs = size_t(slot.batch_size) * size_t(slot.seq_len) * id_size;
  const size_t bp = size_t(slot.batch_size) * size_t(slot.max_predictions) * id_size;
  size_t at = 0;
  auto take = [&](size_t bytes) { size_t here = at; at += align64(bytes); return here; };
  if (slot.kind == ModelKind::bert) {
    o.input_ids = take(bs);
    o.segment_ids = take(bs);
    o.input_mask = take(bs);
    o.mlm_labels = take(bs);
    o.masked_lm_positions = take(bp);
    o.masked_lm_ids = take(bp);
    const size_t bk = size_t(slot.batch_size) * size_t(slot.nsp_slots()) * id_size;
    o.next_sentence_labels = take(bk);
    if (slot.max_pack > 0) {
      o.position_ids = take(bs);
      o.sequence_ids = take(bs);
      o.next_sentence_positions = take(bk);
    }
  } else {
    o.tokens = take(bs);
    o.targets = take(bs);
  }
  if (staging) o.staging = take(slot.bytes);
  o.bytes = at;
  return o;
}

namespace {

class CpuBackend final : public DeviceBackend {
 public:
  int device() const override { return -1; }
  bool needs_staging() const override { return false; }
  uint8_t* alloc_host(size_t bytes) override { return allocate(bytes); }
  void free_host(uint8_t* p) override { std::free(p); }
  uint8_t* alloc_device(size_t bytes) override { return allocate(bytes); }
  void free_device(uint8_t* p) override { std::free(p); }

  void copy(const CopyJob& job) override {
    if (job.out->id_size == 8) run(widen_args<int64_t>(*job.slot, *job.out, job.rows, job.host, job.device));
    else run(widen_args<int32_t>(*job.slot, *job.out, job.rows, job.host, job.device));
  }
  void wait_host_free(int) override {}
  void wait_ready(int, void*) override {}
  void consumed(int, void*) override {}

 private:
  static uint8_t* allocate(size_t bytes) {
    void* p = std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095));
    if (!p) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  template <typename T>
  static void run(const WidenArgs<T>& a) {
    const int64_t tokens = a.rows * a.seq_len;
    if (a.out_tokens) {
      for (int64_t i = 0; i < tokens; ++i) widen_gpt_element(a, i);
      return;
    }
    for (int64_t i = 0; i < tokens; ++i) widen_bert_tokens(a, i);
    for (int64_t i = 0; i < a.rows * a.max_predictions; ++i) widen_bert_predictions(a, i);
  }
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace pretrain
