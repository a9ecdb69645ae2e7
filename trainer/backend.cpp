// The CPU backend, and the dispatch to the CUDA one (trainer/backend_cuda.cu) by Device::cuda.
#include "trainer/backend.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/device.h"
#include "common/error.h"
#include "trainer/backend_cuda.h"

namespace pretrain {

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
  if (spec != "cuda" && spec.rfind("cuda:", 0) != 0)
    throw UsageError(cat("--device: expected cpu, cuda or cuda:N, got '", spec, "'"));
  require_device(spec);  // a clear "no GPU here: …" before anything else is touched
  d.cuda = true;
  d.index = spec == "cuda" ? 0 : std::atoi(spec.c_str() + 5);
  cuda::open(d, d.index);
  return d;
}

void close_device(Device& d) {
  if (d.cuda) cuda::close(d);
}

void* device_alloc(const Device& d, size_t bytes) {
  if (d.cuda) return cuda::alloc(d, bytes);
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return p;
}

void device_free(const Device& d, void* p) {
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

size_t device_memory_used(const Device& d) { return d.cuda ? cuda::memory_used(d) : 0; }

void gemm(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_batched(d, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

void gemm_batched(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                  float beta, float* C, int64_t ldc, int64_t sc, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (d.cuda) return cuda::gemm_batched(d, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                blasint(m), blasint(n), blasint(k), alpha, A + i * sa, blasint(lda), B + i * sb,
                blasint(ldb), beta, C + i * sc, blasint(ldc));
}

double sum_squares(const Device& d, const float* x, int64_t n) {
  const int64_t chunks = kernels::reduce_chunks(n);
  if (chunks == 0) return 0;
  DeviceBuffer<double> partial(d, size_t(chunks));
  launch(d, chunks, kernels::SumSquares{partial.get(), x, n});
  double s = 0;
  for (double p : partial.to_host()) s += p;
  return s;
}

}  // namespace pretrain
