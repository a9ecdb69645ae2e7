// trainer/gemm_layout.h: the column-major GEMM the CUDA backend hands cuBLAS and cuBLASLt for each
// row-major GEMM of ours, checked on the host (no GPU needed) by evaluating it as a column-major
// library defines it.
#include "trainer/gemm_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "fixtures.h"

namespace pretrain::gemm_layout_test {
namespace {

using testing::random_floats;

// What the CUDA launcher asks cuBLAS / cuBLASLt for (trainer/gemm_layout.h), evaluated the way a
// column-major library defines it, equals the row-major GEMM we meant: every transpose pair,
// padded leading dimensions, batches, and the bias (one per row of the library's D).
TEST(GemmLayout, ColumnMajorFormOfRowMajorGemms) {
  auto at = [](const ColMajorOperand& x, int64_t batch, int64_t i, int64_t j) {  // op(x)(i, j)
    return double(x.transpose ? x.data[batch * x.stride + j + i * x.ld] : x.data[batch * x.stride + i + j * x.ld]);
  };
  for (int tr = 0; tr < 4; ++tr) {
    const bool ta = tr & 1, tb = tr & 2;
    const int64_t m = 5, n = 7, k = 3, batch = 2;
    const int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
    const int64_t sa = lda * (ta ? k : m) + 1, sb = ldb * (tb ? n : k) + 2, sc = ldc * m;
    const auto A = random_floats(size_t(sa * batch), 50), B = random_floats(size_t(sb * batch), 51);
    const auto bias = random_floats(size_t(n), 52);
    std::vector<float> C(size_t(sc * batch));
    const ColMajorGemm g = col_major_gemm(ta, tb, m, n, k, A.data(), lda, sa, B.data(), ldb, sb, C.data(), ldc, sc);
    SCOPED_TRACE(cat("ta ", ta, " tb ", tb));
    // The layouts are consistent: op(a) is m×k, op(b) k×n, every ld covers its rows.
    EXPECT_EQ(g.a.transpose ? g.a.cols : g.a.rows, g.m);
    EXPECT_EQ(g.a.transpose ? g.a.rows : g.a.cols, g.k);
    EXPECT_EQ(g.b.transpose ? g.b.cols : g.b.rows, g.k);
    EXPECT_EQ(g.b.transpose ? g.b.rows : g.b.cols, g.n);
    EXPECT_GE(g.a.ld, g.a.rows);
    EXPECT_GE(g.b.ld, g.b.rows);
    EXPECT_GE(g.ldd, g.m);
    for (int64_t e = 0; e < batch; ++e)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          double lib = bias[size_t(i)];  // D(i, j), column-major, with the library's per-row bias
          for (int64_t p = 0; p < g.k; ++p) lib += at(g.a, e, i, p) * at(g.b, e, p, j);
          EXPECT_EQ(g.d + e * g.stride_d + i + j * g.ldd, C.data() + e * sc + j * ldc + i) << "D(i, j) is C(j, i)";
          double row_major = bias[size_t(i)];  // C(j, i) = Σ op(A)(j, p) · op(B)(p, i) + bias[i]
          for (int64_t p = 0; p < k; ++p) {
            const double a = ta ? A[size_t(e * sa + p * lda + j)] : A[size_t(e * sa + j * lda + p)];
            const double b = tb ? B[size_t(e * sb + i * ldb + p)] : B[size_t(e * sb + p * ldb + i)];
            row_major += a * b;
          }
          ASSERT_NEAR(lib, row_major, 1e-12) << "batch " << e << " C(" << j << ", " << i << ")";
        }
  }
}

}  // namespace
}  // namespace pretrain::gemm_layout_test
