// The CUDA backend: each op of trainer/kernels.h runs as a grid-stride kernel on the device's
// stream (the op's body is the one the CPU backend runs and the unit tests check), GEMMs go to
// cuBLASLt with the bias / GELU epilogues fused. Nothing here is reached on a machine without a
// GPU: open_device stops first.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "common/cuda_check.h"
#include "common/error.h"
#include "trainer/backend_cuda.h"
#include "trainer/gemm_layout.h"

namespace pretrain {
namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(cat("cuBLAS ", what, ": status ", int(status)));
}

cudaStream_t stream_of(const Device& d) { return static_cast<cudaStream_t>(d.stream); }

// One cuBLASLt matmul configuration: descriptors and the algorithm the heuristic chose for a
// shape, strides, alignments and epilogue. Pointers are set per call.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false: cuBLASLt has no algorithm for it (the caller falls back)
};

// Device::blas: cuBLAS (the fallback), cuBLASLt, its workspace and the plans made so far. A model
// has a few dozen distinct GEMMs, so the heuristic runs a few dozen times per process.
struct GemmState {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = kCublasLtWorkspaceBytes;
  std::map<std::vector<int64_t>, LtPlan> plans;
};

GemmState& gemm_state(const Device& d) { return *static_cast<GemmState*>(d.blas); }

uint32_t alignment(const void* p, int64_t stride_elems, int64_t batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256;
  if (batch > 1) bits |= uint64_t(stride_elems) * sizeof(float);
  return uint32_t(bits & (~bits + 1));  // the lowest set bit: the largest power of two dividing all
}

cublasLtMatrixLayout_t lt_layout(uint64_t rows, uint64_t cols, int64_t ld, int64_t stride, int64_t batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  check(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, rows, cols, ld), "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = int32_t(batch);
    check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "batch count");
    check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "batch stride");
  }
  return layout;
}

cublasComputeType_t compute_type(const Device& d) {
  // fp32 storage throughout; bf16 / fp16 are the tensor-core compute modes that round A and B.
  // fp32 stays fp32 (no TF32): the CPU and the PyTorch references are plain fp32.
  return d.gemm_precision == Precision::bf16   ? CUBLAS_COMPUTE_32F_FAST_16BF
         : d.gemm_precision == Precision::fp16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                               : CUBLAS_COMPUTE_32F;
}

cublasOperation_t op(const ColMajorOperand& x) { return x.transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

// cuBLASLt on the column-major form of a row-major GEMM (trainer/gemm_layout.h; the bias, one per
// column of our C, is one per row of cuBLASLt's D). Returns false when cuBLASLt has no algorithm
// for this GEMM.
bool lt_matmul(const Device& d, const ColMajorGemm& g, int64_t batch, float alpha, float beta, const GemmEpilogue& ep) {
  GemmState& state = gemm_state(d);
  const cublasLtEpilogue_t epilogue = ep.gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                      : ep.bias   ? CUBLASLT_EPILOGUE_BIAS
                                                  : CUBLASLT_EPILOGUE_DEFAULT;
  const uint32_t align_a = alignment(g.a.data, g.a.stride, batch), align_b = alignment(g.b.data, g.b.stride, batch),
                 align_d = alignment(g.d, g.stride_d, batch);
  const uint32_t align_e = std::min(ep.bias ? alignment(ep.bias, 0, 1) : 256u, ep.gelu_aux ? alignment(ep.gelu_aux, 0, 1) : 256u);
  std::vector<int64_t> key{g.a.transpose, g.b.transpose, g.m, g.n, g.k, g.a.ld, g.b.ld, g.ldd, g.a.stride, g.b.stride,
                           g.stride_d, batch, int64_t(epilogue), int64_t(d.gemm_precision), align_a, align_b, align_d,
                           align_e, beta == 0.0f};
  auto [it, fresh] = state.plans.try_emplace(std::move(key));
  LtPlan& plan = it->second;
  if (fresh) {
    check(cublasLtMatmulDescCreate(&plan.desc, compute_type(d), CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = op(g.a), op_b = op(g.b);
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "transa");
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "transb");
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "epilogue");
    if (ep.gelu_aux) {
      const int64_t aux_ld = g.ldd;
      check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld), "aux ld");
    }
    plan.a = lt_layout(uint64_t(g.a.rows), uint64_t(g.a.cols), g.a.ld, g.a.stride, batch);
    plan.b = lt_layout(uint64_t(g.b.rows), uint64_t(g.b.cols), g.b.ld, g.b.stride, batch);
    plan.c = lt_layout(uint64_t(g.m), uint64_t(g.n), g.ldd, g.stride_d, batch);
  }
  if (ep.bias)
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias, sizeof ep.bias), "bias");
  if (ep.gelu_aux)
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ep.gelu_aux,
                                         sizeof ep.gelu_aux), "aux pointer");
  if (fresh) {
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t workspace = state.workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    // The defaults assume 256-byte-aligned operands; attention's per-head slices are not.
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(state.lt, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                                 pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    plan.found = status == CUBLAS_STATUS_SUCCESS && count > 0;
    if (plan.found) plan.algo = result.algo;
  }
  if (!plan.found) return false;
  check(cublasLtMatmul(state.lt, plan.desc, &alpha, g.a.data, plan.a, g.b.data, plan.b, &beta, g.d, plan.c, g.d, plan.c,
                       &plan.algo, state.workspace, state.workspace_bytes, stream_of(d)),
        "cublasLtMatmul");
  return true;
}

template <typename Op>
__global__ void op_kernel(Op op, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) op(i);
}

}  // namespace

template <typename Op>
void cuda_launch(const Device& d, int64_t n, const Op& op) {
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 65535));
  op_kernel<<<blocks, threads, 0, stream_of(d)>>>(op, n);
  cuda_check(cudaGetLastError(), "kernel launch");
}
#define PRETRAIN_INSTANTIATE(Op) template void cuda_launch<kernels::Op>(const Device&, int64_t, const kernels::Op&);
PRETRAIN_TRAINER_KERNELS(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

namespace cuda {

void open(Device& d, int index) {
  cuda_check(cudaSetDevice(index), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  d.stream = stream;
  auto* g = new GemmState;
  d.blas = g;
  check(cublasCreate(&g->blas), "cublasCreate");
  check(cublasSetStream(g->blas, stream), "cublasSetStream");
  check(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // no TF32, as compute_type
  check(cublasLtCreate(&g->lt), "cublasLtCreate");
  cuda_check(cudaMalloc(&g->workspace, g->workspace_bytes), "cudaMalloc (cuBLASLt workspace)");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  d.name = prop.name;
}

void close(Device& d) {
  if (auto* g = static_cast<GemmState*>(d.blas)) {
    if (d.stream) cudaStreamSynchronize(stream_of(d));
    for (auto& [key, plan] : g->plans) {
      if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
      for (cublasLtMatrixLayout_t l : {plan.a, plan.b, plan.c})
        if (l) cublasLtMatrixLayoutDestroy(l);
    }
    if (g->workspace) cudaFree(g->workspace);
    if (g->lt) cublasLtDestroy(g->lt);
    if (g->blas) cublasDestroy(g->blas);
    delete g;
  }
  if (d.stream) cudaStreamDestroy(stream_of(d));
  d.blas = d.stream = nullptr;
}

void* alloc(const Device& d, size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
  cuda_check(cudaMemsetAsync(p, 0, bytes, stream_of(d)), "cudaMemsetAsync");
  return p;
}

void free(const Device& d, void* p) {
  if (!p) return;
  cudaStreamSynchronize(stream_of(d));
  cudaFree(p);
}

void zero(const Device& d, void* p, size_t bytes) {
  if (bytes) cuda_check(cudaMemsetAsync(p, 0, bytes, stream_of(d)), "cudaMemsetAsync");
}

void copy_to_device(const Device& d, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(d)), "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize");  // src may be a temporary
}

void copy_to_host(const Device& d, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(d)), "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize");
}

void synchronize(const Device& d) { cuda_check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize"); }

void gemm_batched(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                  float beta, float* C, int64_t ldc, int64_t sc, int64_t batch) {
  const ColMajorGemm g = col_major_gemm(ta, tb, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc);
  if (lt_matmul(d, g, batch, alpha, beta, {})) return;
  // cuBLAS takes every shape cuBLASLt's heuristic may decline.
  check(cublasGemmStridedBatchedEx(gemm_state(d).blas, op(g.a), op(g.b), int(g.m), int(g.n), int(g.k), &alpha, g.a.data,
                                   CUDA_R_32F, int(g.a.ld), g.a.stride, g.b.data, CUDA_R_32F, int(g.b.ld), g.b.stride,
                                   &beta, g.d, CUDA_R_32F, int(g.ldd), g.stride_d, int(batch), compute_type(d),
                                   CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

bool gemm_epilogue(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, const GemmEpilogue& epilogue) {
  if (epilogue.gelu_aux && ldc % 8 != 0) return false;  // cuBLASLt: the GELU input's ld must divide by 8
  return lt_matmul(d, col_major_gemm(ta, tb, m, n, k, A, lda, 0, B, ldb, 0, C, ldc, 0), 1, alpha, 0.0f, epilogue);
}

}  // namespace cuda
}  // namespace pretrain
