// Attention on CUDA (the op: attention.h): which path runs, and the fallback.
//
// The choice, per call: cuDNN's fused SDPA (attention_cudnn.cpp) for bf16 when the build has it,
// libcudnn.so.9 opens, and both of this shape's graphs build; else the fallback, with one warning
// per reason (stderr and Attention::warnings()). A shape's choice is made once, for the forward
// and the backward together, so a dropout mask is never drawn by one RNG and used by the other.
//
// The fallback: per GEMM one cublasGemmBatchedEx over all B · NH (sequence, head) pairs, its
// pointer arrays written by a kernel from attention_layout.h's offsets (no host work per step),
// fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32); around them ops/softmax.h's kernel and a
// dropout kernel drawing kernels::dropout_keep's mask (the CPU's, bit for bit). Two [B, NH, T, T]
// scratch matrices, grown on first use and kept (one layer at a time); the backward recomputes the
// probabilities (a GEMM and a softmax) rather than keep them per layer.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "trainer/gemm_layout.h"
#include "trainer/ops/attention.h"
#include "trainer/ops/attention_layout.h"
#include "trainer/ops/cuda_util.cuh"
#include "trainer/ops/softmax.h"
#if PRETRAIN_HAVE_CUDNN
#include "trainer/ops/attention_cudnn_internal.h"
#endif

namespace pretrain::ops {

struct Attention::Impl {
  const Device& d;
  Attention::Options options;
  cublasHandle_t blas = nullptr;
  char* att = nullptr;  // two [B, NH, T, T] matrices of the storage type
  size_t att_bytes = 0;
  void** pointers = nullptr;  // 3 × batch pointer-array entries
  int64_t pointer_count = 0;
  std::set<std::string> warned;
#if PRETRAIN_HAVE_CUDNN
  cudnn::Sdpa* sdpa = nullptr;
  std::string sdpa_unusable;  // why cuDNN cannot run here at all ("" while it may)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int, float, float>, bool> cudnn_takes;
#endif
  Impl(const Device& dev, const Attention::Options& o) : d(dev), options(o) {}
};

namespace cuda {
namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(cat("cuBLAS ", what, ": status ", int(status)));
}

void warn_once(Attention::Impl& im, std::vector<std::string>& warnings, const std::string& why) {
  if (!im.warned.insert(why).second) return;
  warnings.push_back(why);
  std::fprintf(stderr, "attention: %s; using batched GEMMs\n", why.c_str());
}

template <typename T>
T* grow_att(Attention::Impl& im, int64_t elements) {  // the first of the two scratch matrices
  const size_t bytes = 2 * size_t(elements) * sizeof(T);
  if (bytes > im.att_bytes) {
    cuda_check(cudaStreamSynchronize(stream_of(im.d)), "cudaStreamSynchronize");
    if (im.att) cudaFree(im.att);
    im.att = nullptr;
    cuda_check(cudaMalloc(&im.att, bytes), "cudaMalloc (attention scratch)");
    im.att_bytes = bytes;
  }
  return reinterpret_cast<T*>(im.att);
}

__global__ void pointers_kernel(void** out, const char* a, BatchedOperand oa, const char* b, BatchedOperand ob,
                                const char* c, BatchedOperand oc, int64_t batch, int64_t NH, int64_t elem) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= batch) return;
  out[e] = const_cast<char*>(a + oa.offset(e, NH) * elem);
  out[batch + e] = const_cast<char*>(b + ob.offset(e, NH) * elem);
  out[2 * batch + e] = const_cast<char*>(c + oc.offset(e, NH) * elem);
}

// Row-major C(e) = alpha · op(A(e)) · op(B(e)) + beta · C(e) for every (sequence, head) e, one call.
template <typename T>
void batched_gemm(Attention::Impl& im, const AttentionLayout& l, const AttentionGemm& g, const T* A, const T* B, T* C,
                  float alpha = 1.0f, float beta = 0.0f) {
  const int64_t batch = l.batch();
  if (batch > im.pointer_count) {
    cuda_check(cudaStreamSynchronize(stream_of(im.d)), "cudaStreamSynchronize");
    if (im.pointers) cudaFree(im.pointers);
    im.pointers = nullptr;
    cuda_check(cudaMalloc(&im.pointers, size_t(3 * batch) * sizeof(void*)), "cudaMalloc (attention pointers)");
    im.pointer_count = batch;
  }
  // The column-major form (gemm_layout.h): the library's first operand is our B, its second our A.
  const ColMajorGemm cm = col_major_gemm(g.ta, g.tb, g.m, g.n, g.k, nullptr, g.a.ld, 0, nullptr, g.b.ld, 0, nullptr,
                                         g.c.ld, 0);
  pointers_kernel<<<unsigned(ceil_div(batch, 128)), 128, 0, stream_of(im.d)>>>(
      im.pointers, reinterpret_cast<const char*>(B), g.b, reinterpret_cast<const char*>(A), g.a,
      reinterpret_cast<const char*>(C), g.c, batch, l.NH, int64_t(sizeof(T)));
  check_launch("attention pointers");
  const cudaDataType_t type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
  check(cublasGemmBatchedEx(im.blas, cm.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, cm.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
                            int(cm.m), int(cm.n), int(cm.k), &alpha, im.pointers, type, int(cm.a.ld), im.pointers + batch,
                            type, int(cm.b.ld), &beta, im.pointers + 2 * batch, type,
                            int(cm.ldd), int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmBatchedEx (attention)");
}

// out[x] = keep(x) ? in[x] / (1 − p) : 0 over the [B, NH, T, T] matrix; x is the CPU's index.
template <typename T>
__global__ void dropout_kernel(T* out, const T* in, int64_t n, uint64_t key, float p) {
  const float scale = 1.0f / (1.0f - p);
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < n; x += int64_t(gridDim.x) * blockDim.x)
    out[x] = kernels::dropout_keep(key, x, p) ? from_float<T>(to_float(in[x]) * scale) : from_float<T>(0.0f);
}
template <typename T>
void dropout(const Device& d, T* out, const T* in, int64_t n, uint64_t key, float p) {
  dropout_kernel<T><<<unsigned(std::min<int64_t>(ceil_div(n, 256), 132 * 32)), 256, 0, stream_of(d)>>>(out, in, n, key, p);
  check_launch("attention dropout");
}

// S = Q·Kᵀ, then P = softmax(scale · S + mask) in place (and lse when given).
template <typename T>
void probabilities(Attention::Impl& im, const AttentionLayout& l, const AttentionShape& s, const T* qkv,
                   const int32_t* key_mask, T* P, float* lse) {
  batched_gemm<T>(im, l, l.scores(), qkv, qkv, P);
  const bool rows = s.mask == AttentionMask::padding || s.mask == AttentionMask::packed;
  ops::softmax_forward(im.d, SoftmaxForward<T>{P, P, rows ? key_mask : nullptr, s.mask == AttentionMask::causal, s.scale,
                                               s.B, s.NH, s.T, lse});
}

template <typename T>
void fallback_forward(Attention::Impl& im, const AttentionForward<T>& a) {
  const AttentionShape& s = a.s;
  const AttentionLayout l{s.B, s.T, s.NH, s.HS};
  const int64_t n = s.B * s.NH * s.T * s.T;
  T* P = grow_att<T>(im, n);
  probabilities(im, l, s, a.qkv, a.key_mask, P, a.lse);
  const T* Pd = P;
  if (s.dropout > 0) dropout(im.d, P + n, P, n, attention_dropout_key(a.seed, a.offset), s.dropout), Pd = P + n;
  batched_gemm<T>(im, l, l.context(), Pd, a.qkv, a.out);
}

template <typename T>
void fallback_backward(Attention::Impl& im, const AttentionBackward<T>& a) {
  const AttentionShape& s = a.s;
  const AttentionLayout l{s.B, s.T, s.NH, s.HS};
  const int64_t n = s.B * s.NH * s.T * s.T;
  T* P = grow_att<T>(im, n);
  T* W = P + n;  // the second matrix: the dropped probabilities, then dP, then dS
  const uint64_t key = attention_dropout_key(a.seed, a.offset);
  probabilities<T>(im, l, s, a.qkv, a.key_mask, P, nullptr);
  const T* Pd = P;
  if (s.dropout > 0) dropout(im.d, W, P, n, key, s.dropout), Pd = W;
  batched_gemm<T>(im, l, l.dvalues(), Pd, a.dout, a.dqkv);           // dV = Pdᵀ·dO
  batched_gemm<T>(im, l, l.dprobs(), a.dout, a.qkv, W);              // dPd = dO·Vᵀ
  if (s.dropout > 0) dropout(im.d, W, W, n, key, s.dropout);         // dP = dropout(dPd)
  ops::softmax_backward(im.d, SoftmaxBackward<T>{W, W, P, s.scale, s.B * s.NH * s.T, s.T});  // dS
  batched_gemm<T>(im, l, l.dqueries(), W, a.qkv, a.dqkv);            // dQ = dS·K
  batched_gemm<T>(im, l, l.dkeys(), W, a.qkv, a.dqkv);               // dK = dSᵀ·Q
}

#if PRETRAIN_HAVE_CUDNN
// Whether cuDNN runs this shape (deciding, and building its graphs, on the first call).
bool cudnn_takes(Attention::Impl& im, const AttentionShape& s, std::vector<std::string>& warnings) {
  if (!im.options.use_cudnn) return false;
  if (!im.sdpa && im.sdpa_unusable.empty()) {
    im.sdpa = cudnn::sdpa_create(im.d, im.options.deterministic, im.sdpa_unusable);
    if (!im.sdpa && im.sdpa_unusable.empty()) im.sdpa_unusable = "cuDNN unusable";
  }
  if (!im.sdpa) {
    warn_once(im, warnings, "cuDNN: " + im.sdpa_unusable);
    return false;
  }
  const auto key = std::make_tuple(s.B, s.T, s.NH, s.HS, int(s.mask), s.dropout, s.scale);
  auto it = im.cudnn_takes.find(key);
  if (it == im.cudnn_takes.end()) {
    std::string why;
    const bool ok = cudnn::sdpa_prepare(*im.sdpa, s, why);
    if (!ok)
      warn_once(im, warnings, cat("cuDNN cannot take T ", s.T, ", head size ", s.HS, ", mask ", int(s.mask), ": ", why));
    it = im.cudnn_takes.emplace(key, ok).first;
  }
  return it->second;
}
#endif

}  // namespace

Attention::Impl* attention_create(const Device& d, const Attention::Options& options) {
  auto im = std::make_unique<Attention::Impl>(d, options);
  check(cublasCreate(&im->blas), "cublasCreate");
  check(cublasSetStream(im->blas, stream_of(d)), "cublasSetStream");
  check(cublasSetMathMode(im->blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // no TF32
  return im.release();
}

void attention_destroy(Attention::Impl* im) {
  if (!im) return;
  cudaStreamSynchronize(stream_of(im->d));
#if PRETRAIN_HAVE_CUDNN
  cudnn::sdpa_destroy(im->sdpa);
#endif
  if (im->att) cudaFree(im->att);
  if (im->pointers) cudaFree(im->pointers);
  if (im->blas) cublasDestroy(im->blas);
  delete im;
}

template <typename T>
std::string attention_forward(Attention::Impl& im, const AttentionForward<T>& a, std::vector<std::string>& warnings) {
#if PRETRAIN_HAVE_CUDNN
  if constexpr (std::is_same_v<T, bf16>) {
    if (cudnn_takes(im, a.s, warnings)) {
      cudnn::sdpa_forward(*im.sdpa, a);
      return "cudnn";
    }
  }
#endif
  (void)warnings;
  fallback_forward(im, a);
  return "batched gemm";
}

template <typename T>
std::string attention_backward(Attention::Impl& im, const AttentionBackward<T>& a, std::vector<std::string>& warnings) {
#if PRETRAIN_HAVE_CUDNN
  if constexpr (std::is_same_v<T, bf16>) {
    if (cudnn_takes(im, a.s, warnings)) {
      cudnn::sdpa_backward(*im.sdpa, a);
      return "cudnn";
    }
  }
#endif
  (void)warnings;
  fallback_backward(im, a);
  return "batched gemm";
}

#define PRETRAIN_INSTANTIATE(T)                                                                                        \
  template std::string attention_forward<T>(Attention::Impl&, const AttentionForward<T>&, std::vector<std::string>&); \
  template std::string attention_backward<T>(Attention::Impl&, const AttentionBackward<T>&, std::vector<std::string>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace cuda
}  // namespace pretrain::ops
