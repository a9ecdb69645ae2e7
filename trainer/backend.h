// Where the trainer computes: the CPU (oneTBB loops, OpenBLAS sgemm) or one CUDA device (the same
// ops launched as kernels on one stream, cuBLASLt GEMMs). The model, optimizer and checkpoint code
// call only what is here, so they are written once for both.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "trainer/kernels.h"

namespace pretrain {

// What GEMMs compute in: fp32, or bf16 / fp16 inputs with fp32 accumulation and output (the
// tensor-core modes; activations, gradients and master weights stay fp32).
enum class Precision { fp32, bf16, fp16 };
Precision parse_precision(const std::string& name);  // "fp32" | "bf16" | "fp16"; UsageError otherwise
const char* precision_name(Precision p);

// cuBLASLt's workspace per device (what NVIDIA suggests for Hopper); --plan counts it.
inline constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

struct Device {
  bool cuda = false;
  Precision gemm_precision = Precision::fp32;
  int index = 0;           // CUDA device
  void* stream = nullptr;  // cudaStream_t
  void* blas = nullptr;    // the CUDA backend's GEMM state (cuBLASLt handle, workspace, plans)
  std::string name;        // "cpu (2 threads)", "NVIDIA H100 80GB HBM3"
  int threads = 1;         // CPU: oneTBB and OpenBLAS threads
};

// "cpu", "cuda" or "cuda:N". Throws Error when the device cannot be used here (a CUDA build on a
// machine without a GPU, a CPU-only build asked for cuda).
Device open_device(const std::string& spec, int threads);
void close_device(Device& device);

// Device memory (host memory for the CPU), 256-byte aligned; zero-filled.
void* device_alloc(const Device& d, size_t bytes);
void device_free(const Device& d, void* p);
void device_zero(const Device& d, void* p, size_t bytes);
void copy_to_device(const Device& d, void* dst, const void* src, size_t bytes);
void copy_to_host(const Device& d, void* dst, const void* src, size_t bytes);
void synchronize(const Device& d);
// Bytes this process holds through device_alloc (on either backend), now and at most so far: the
// arenas the trainer allocated, what --plan predicts (the CUDA context and the cuBLASLt workspace
// are not in it).
struct AllocatedBytes {
  size_t now = 0, peak = 0;
};
AllocatedBytes device_bytes_allocated();

// What a GEMM does to its product before storing it, fused into the GEMM on CUDA (cuBLASLt
// epilogues) and run as the same kernels after sgemm on the CPU. With `bias` (n floats, one per
// column of C; beta must be 0): C = A·B + bias. With `gelu_aux` too: gelu_aux = A·B + bias (the
// pre-activation backward needs) and C = tanh-GELU of it. cuBLASLt's GELU is the tanh form only,
// so BERT's erf GELU stays a separate op.
struct GemmEpilogue {
  const float* bias = nullptr;
  float* gelu_aux = nullptr;  // ldc apart, like C
};

// C = alpha · op(A) · op(B) + beta · C, row-major, op = transpose when ta / tb; A is m×k after op.
// In bf16 / fp16 (Device::gemm_precision) A and B are rounded to that type first: cuBLASLt's
// CUBLAS_COMPUTE_32F_FAST_16BF / _16F on a GPU, kernels::RoundOperand + sgemm on the CPU.
void gemm(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const GemmEpilogue& epilogue = {});
// `batch` GEMMs, the i-th on A + i·sa, B + i·sb, C + i·sc.
void gemm_batched(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                  float beta, float* C, int64_t ldc, int64_t sc, int64_t batch);

// Runs op(i) for i in [0, n).
template <typename Op>
void cpu_launch(int64_t n, const Op& op) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i) op(i);
  });
}
template <typename Op>
void cuda_launch(const Device& d, int64_t n, const Op& op);  // instantiated for kernels.h's ops

template <typename Op>
void launch(const Device& d, int64_t n, const Op& op) {
  if (n <= 0) return;
  if (d.cuda)
    cuda_launch(d, n, op);
  else
    cpu_launch(n, op);
}

// dst = src, n floats of device memory (a copy kernel on either backend).
inline void device_copy(const Device& d, float* dst, const float* src, int64_t n) {
  if (dst != src) launch(d, n, kernels::Scale{dst, src, 1.0f});
}

// Σ x² over n elements in a fixed order (kernels::SumSquaresChunks of kReduceChunk elements,
// added in order on the host): the same bits at any thread count.
double sum_squares(const Device& d, const float* x, int64_t n);
// The same for many tensors in one launch: result i is exactly sum_squares(d, x[i], n[i]).
struct Tensor1d {
  const float* x;
  int64_t n;
};
std::vector<double> sum_squares(const Device& d, const std::vector<Tensor1d>& tensors);

// A typed buffer of device memory.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Device& d, size_t n) : device_(&d), n_(n), p_(static_cast<T*>(device_alloc(d, n * sizeof(T)))) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), n_(o.n_), p_(o.p_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) reset(), device_ = o.device_, n_ = o.n_, p_ = o.p_, o.p_ = nullptr, o.n_ = 0;
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  void reset() {
    if (p_) device_free(*device_, p_);
    p_ = nullptr, n_ = 0;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    if (n_) copy_to_host(*device_, h.data(), p_, n_ * sizeof(T));
    return h;
  }
  void from_host(const T* src, size_t n) { copy_to_device(*device_, p_, src, n * sizeof(T)); }

 private:
  const Device* device_ = nullptr;
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace pretrain
