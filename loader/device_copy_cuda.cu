// The CUDA backend: pinned host slots, device slots from cudaMalloc, one copy stream. A copy is a
// cudaMemcpyAsync of the narrow host slot into the device slot's staging area and one widen kernel
// (loader/widen.h, the same element functions the CPU backend loops over), then events (see
// device_copy.h). Nothing here blocks the consumer: next() only orders its stream after `ready`.
#include <cuda_runtime.h>

#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/device.h"
#include "loader/device_copy.h"

namespace pretrain {

namespace {

// One launch per pass (widen.h): 0 = GPT, 1 = BERT tokens, 2 = BERT predictions.
template <typename T>
__global__ void widen_kernel(WidenArgs<T> a, int64_t n, int pass) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (pass == 0) widen_gpt_element(a, i);
    else if (pass == 1) widen_bert_tokens(a, i);
    else widen_bert_predictions(a, i);
  }
}

template <typename T>
void launch_widen(const WidenArgs<T>& a, bool bert, cudaStream_t stream) {
  auto launch = [&](int64_t n, int pass) {
    if (n <= 0) return;
    const int threads = 256;
    const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 4096));
    widen_kernel<<<blocks, threads, 0, stream>>>(a, n, pass);
    cuda_check(cudaGetLastError(), "widen kernel launch");
  };
  if (!bert) return launch(a.rows * a.seq_len, 0);
  launch(a.rows * a.seq_len, 1);
  launch(a.rows * a.max_predictions, 2);  // after pass 1 on the same stream: labels start at -1
}

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(int device, int host_slots, int device_slots, bool pinned) : device_(device), pinned_(pinned) {
    require_device("cuda:" + std::to_string(device));
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    auto make_events = [](std::vector<cudaEvent_t>& v, int n) {
      v.resize(size_t(n));
      for (auto& e : v) cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    };
    make_events(host_done_, host_slots);
    make_events(ready_, device_slots);
    make_events(consumed_, device_slots);
  }
  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    for (auto* v : {&host_done_, &ready_, &consumed_})
      for (cudaEvent_t e : *v) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }

  int device() const override { return device_; }
  bool needs_staging() const override { return true; }
  uint8_t* alloc_host(size_t bytes) override {
    void* p = nullptr;
    if (pinned_) cuda_check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    else if (!(p = std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095)))) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  // Pageable host slots (pin_memory off) make cudaMemcpyAsync synchronous: a choice for machines
  // short of pinnable memory, not for speed.
  void free_host(uint8_t* p) override { pinned_ ? (void)cudaFreeHost(p) : std::free(p); }
  uint8_t* alloc_device(size_t bytes) override {
    cudaSetDevice(device_);
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    return static_cast<uint8_t*>(p);
  }
  void free_device(uint8_t* p) override { cudaFree(p); }

  void copy(const CopyJob& job) override {
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    const int d = job.device_slot;
    cuda_check(cudaStreamWaitEvent(stream_, consumed_[size_t(d)], 0), "cudaStreamWaitEvent(consumed)");
    uint8_t* staging = job.device + job.out->staging;
    cuda_check(cudaMemcpyAsync(staging, job.host, job.slot->bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    cuda_check(cudaEventRecord(host_done_[size_t(job.host_slot)], stream_), "cudaEventRecord(host_done)");
    const bool bert = job.slot->kind == ModelKind::bert;
    if (job.out->id_size == 8) launch_widen(widen_args<int64_t>(*job.slot, *job.out, job.rows, staging, job.device), bert, stream_);
    else launch_widen(widen_args<int32_t>(*job.slot, *job.out, job.rows, staging, job.device), bert, stream_);
    cuda_check(cudaEventRecord(ready_[size_t(d)], stream_), "cudaEventRecord(ready)");
  }
  void wait_host_free(int h) override { cuda_check(cudaEventSynchronize(host_done_[size_t(h)]), "cudaEventSynchronize(host_done)"); }
  void wait_ready(int d, void* consumer) override {
    cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer), ready_[size_t(d)], 0), "cudaStreamWaitEvent(ready)");
  }
  void consumed(int d, void* consumer) override {
    cudaSetDevice(device_);
    cudaEventRecord(consumed_[size_t(d)], static_cast<cudaStream_t>(consumer));  // no throw: runs in destructors
  }

 private:
  int device_;
  bool pinned_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> host_done_, ready_, consumed_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(int device, int host_slots, int device_slots, bool pinned) {
  return std::make_unique<CudaBackend>(device, host_slots, device_slots, pinned);
}

}  // namespace pretrain
