// Our GEMMs are row-major; cuBLAS and cuBLASLt are column-major. A row-major matrix read as
// column-major is its transpose, so row-major C = op(A)·op(B) is the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ: the library's first operand is our B, its second our A, and its m×n result
// is our n×m C (so a bias with one value per column of C is one per row for the library). This
// mapping is the part of the CUDA GEMM launcher that can be wrong without a GPU to show it, so it
// lives here, host-only, and tests/trainer checks it against a column-major reference.
#pragma once
#include <cstdint>

namespace pretrain {

// One operand as a column-major library describes it: the stored matrix is rows × cols with
// leading dimension ld (cuBLASLt's matrix layout), used transposed or not (cuBLAS's op).
struct ColMajorOperand {
  const float* data;
  int64_t rows, cols, ld, stride;  // stride: elements between batch entries
  bool transpose;
};

// D (m × n, column-major, leading dimension ldd) = op(a) · op(b), op(a) m × k, op(b) k × n.
struct ColMajorGemm {
  int64_t m, n, k;
  ColMajorOperand a, b;
  float* d;
  int64_t ldd, stride_d;
};

// The column-major GEMM that computes row-major C (m × n) = op(A) · op(B), batch entries sa, sb,
// sc elements apart.
inline ColMajorGemm col_major_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda,
                                   int64_t sa, const float* B, int64_t ldb, int64_t sb, float* C, int64_t ldc,
                                   int64_t sc) {
  // Row-major B is (tb ? n × k : k × n) with row stride ldb: column-major, that is
  // (tb ? k × n : n × k) with leading dimension ldb, and op(B)ᵀ takes the transpose iff tb.
  const ColMajorOperand a{B, tb ? k : n, tb ? n : k, ldb, sb, tb};
  const ColMajorOperand b{A, ta ? m : k, ta ? k : m, lda, sa, ta};
  return {n, m, k, a, b, C, ldc, sc};
}

}  // namespace pretrain
