// The CPU backend, and the dispatch to the CUDA one (trainer/backend_cuda.cu) by Device::cuda.
#include "trainer/backend.h"

#include <cblas.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "common/device.h"
#include "common/error.h"
#include "trainer/backend_cuda.h"

namespace pretrain {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "fp16") return Precision::fp16;
  throw UsageError(cat("--precision: expected fp32, bf16 or fp16, got '", name, "'"));
}

const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : p == Precision::bf16 ? "bf16" : "fp16"; }

Device open_device(const std::string& spec, int threads) {
  Device d;
  d.threads = threads > 0 ? threads : 1;
  if (spec == "cpu") {
    // OpenBLAS keeps its own thread pool: size it like oneTBB's (--threads), so the two never ask
    // for more cores than the user gave.
    openblas_set_num_threads(d.threads);
    d.name = cat("cpu (", d.threads, d.threads == 1 ? " thread)" : " threads)");
    return d;
  }
  const DeviceSpec parsed = parse_device_spec(spec);
  require_device(spec);  // a clear "no GPU here: …" before anything else is touched
  d.cuda = true;
  d.index = parsed.index;
  cuda::open(d, d.index);
  return d;
}

void close_device(Device& d) {
  if (d.cuda) cuda::close(d);
}

namespace {
// Allocations are few (arenas, a few buffers per step), so a locked map costs nothing.
struct AllocationBook {
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;
  AllocatedBytes bytes;
};
AllocationBook& book() {
  static AllocationBook b;
  return b;
}
void* booked(void* p, size_t bytes) {
  if (!p) return p;
  AllocationBook& b = book();
  std::lock_guard lock(b.mutex);
  b.sizes[p] = bytes;
  b.bytes.now += bytes;
  b.bytes.peak = std::max(b.bytes.peak, b.bytes.now);
  return p;
}
void unbooked(void* p) {
  AllocationBook& b = book();
  std::lock_guard lock(b.mutex);
  auto it = b.sizes.find(p);
  if (it == b.sizes.end()) return;
  b.bytes.now -= it->second;
  b.sizes.erase(it);
}
}  // namespace

AllocatedBytes device_bytes_allocated() {
  std::lock_guard lock(book().mutex);
  return book().bytes;
}

void* device_alloc(const Device& d, size_t bytes) {
  if (d.cuda) return booked(cuda::alloc(d, bytes), bytes);
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return booked(p, bytes);
}

void device_free(const Device& d, void* p) {
  if (p) unbooked(p);
  if (d.cuda) return cuda::free(d, p);
  std::free(p);
}

void device_zero(const Device& d, void* p, size_t bytes) {
  if (d.cuda) return cuda::zero(d, p, bytes);
  if (bytes) std::memset(p, 0, bytes);
}

void copy_to_device(const Device& d, void* dst, const void* src, size_t bytes) {
  if (d.cuda) return cuda::copy_to_device(d, dst, src, bytes);
  if (bytes) std::memcpy(dst, src, bytes);
}

void copy_to_host(const Device& d, void* dst, const void* src, size_t bytes) {
  if (d.cuda) return cuda::copy_to_host(d, dst, src, bytes);
  if (bytes) std::memcpy(dst, src, bytes);
}

void synchronize(const Device& d) {
  if (d.cuda) cuda::synchronize(d);
}

void gemm(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const GemmEpilogue& epilogue) {
  if (m == 0 || n == 0) return;
  if (!epilogue.bias && !epilogue.gelu_aux) return gemm_batched(d, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
  if (!epilogue.bias || beta != 0.0f) throw Error("gemm: an epilogue needs a bias and beta = 0");
  if (d.cuda && cuda::gemm_epilogue(d, ta, tb, m, n, k, alpha, A, lda, B, ldb, C, ldc, epilogue)) return;
  // The unfused form (the CPU, or a shape cuBLASLt has no fused kernel for): bias rows, GEMM onto
  // them, then the GELU.
  float* pre = epilogue.gelu_aux ? epilogue.gelu_aux : C;
  if (ldc != n) throw Error("gemm: an epilogue needs ldc = n");
  launch(d, m, kernels::BroadcastBias{pre, epilogue.bias, n});
  gemm_batched(d, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, 1.0f, pre, ldc, 0, 1);
  if (epilogue.gelu_aux) launch(d, m * n, kernels::GeluForward{C, pre, kernels::Gelu::tanh});
}

void gemm_batched(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                  float beta, float* C, int64_t ldc, int64_t sc, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (d.cuda) return cuda::gemm_batched(d, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
  const bool reduced = d.gemm_precision != Precision::fp32;
  std::vector<float> a_round, b_round;
  for (int64_t i = 0; i < batch; ++i) {
    const float *a = A + i * sa, *b = B + i * sb;
    int64_t la = lda, lb = ldb;
    if (reduced) {  // round each operand into a contiguous copy, then an ordinary sgemm
      const bool bf16 = d.gemm_precision == Precision::bf16;
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      a_round.resize(size_t(a_rows * a_cols)), b_round.resize(size_t(b_rows * b_cols));
      cpu_launch(a_rows * a_cols, kernels::RoundOperand{a_round.data(), a, a_cols, lda, bf16});
      cpu_launch(b_rows * b_cols, kernels::RoundOperand{b_round.data(), b, b_cols, ldb, bf16});
      a = a_round.data(), b = b_round.data(), la = a_cols, lb = b_cols;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                blasint(m), blasint(n), blasint(k), alpha, a, blasint(la), b, blasint(lb), beta, C + i * sc,
                blasint(ldc));
  }
}

double sum_squares(const Device& d, const float* x, int64_t n) { return sum_squares(d, {Tensor1d{x, n}})[0]; }

std::vector<double> sum_squares(const Device& d, const std::vector<Tensor1d>& tensors) {
  std::vector<kernels::ChunkRef> chunks;
  for (const Tensor1d& t : tensors)
    for (int64_t i = 0; i < t.n; i += kernels::kReduceChunk)
      chunks.push_back({t.x + i, std::min(kernels::kReduceChunk, t.n - i)});
  std::vector<double> sums(tensors.size(), 0.0);
  if (chunks.empty()) return sums;
  DeviceBuffer<kernels::ChunkRef> table(d, chunks.size());
  table.from_host(chunks.data(), chunks.size());
  DeviceBuffer<double> partial(d, chunks.size());
  launch(d, int64_t(chunks.size()), kernels::SumSquaresChunks{partial.get(), table.get()});
  const std::vector<double> parts = partial.to_host();
  size_t k = 0;
  for (size_t i = 0; i < tensors.size(); ++i)  // each tensor's chunks, in order: the same bits as one by one
    for (int64_t e = 0; e < tensors[i].n; e += kernels::kReduceChunk) sums[i] += parts[k++];
  return sums;
}

}  // namespace pretrain
