// The CPU backend (trainer/backend.h): device memory (zero-filled, aligned, counted, copied),
// the GEMMs (row-major with either operand transposed, alpha and beta, padded leading dimensions,
// batches, the bias and GELU epilogues, bf16 / fp16 operand rounding) against their definitions
// in double precision, the sums of squares the norms take, and what the backend says when asked
// for CUDA where there is none: a build without CUDA refuses at every entry point, with one
// message (backend_nocuda.cpp); a CUDA build on a machine without a GPU refuses to open it.
// The CUDA backend itself runs in tests/gpu.
#include "trainer/backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/error.h"
#include "expect_close.h"
#include "fixtures.h"
#include "test_util.h"
#include "trainer/reference.h"

namespace pretrain::backend_test {
namespace {

using namespace kernels;
using testing::error_message;
using testing::expect_close;
using testing::random_floats;

const Device kCpu{};

TEST(Backend, PrecisionNamesParseBackAndOthersAreRefused) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) EXPECT_EQ(parse_precision(precision_name(p)), p);
  try {
    parse_precision("fp8");
    ADD_FAILURE() << "fp8 accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--precision: expected fp32, bf16 or fp16, got 'fp8'");
  }
}

TEST(Backend, TheCpuDeviceIsNamedByItsThreads) {
  const Device one = open_device("cpu", 0);  // no thread count: one thread
  EXPECT_FALSE(one.cuda);
  EXPECT_EQ(one.threads, 1);
  EXPECT_EQ(one.name, "cpu (1 thread)");
  const Device two = open_device("cpu", 2);
  EXPECT_EQ(two.threads, 2);
  EXPECT_EQ(two.name, "cpu (2 threads)");
  EXPECT_THROW(open_device("tpu", 1), UsageError);
  EXPECT_THROW(open_device("cuda:x", 1), UsageError);
}

// Asked for a GPU it cannot use, open_device says why before touching anything: this binary has
// no CUDA, or this machine no GPU.
TEST(Backend, CudaWithoutAGpuIsAClearError) {
  const DeviceReport here = query_devices();
  if (!here.gpus.empty()) GTEST_SKIP() << "a GPU is here: tests/gpu open it";
  const std::string e = error_message([] { open_device("cuda", 1); });
  if (here.built_with_cuda)
    EXPECT_NE(e.find("--device cuda: no usable GPU here ("), std::string::npos) << e;
  else
    EXPECT_NE(e.find("--device cuda: this binary was built without CUDA"), std::string::npos) << e;
}

// A build without CUDA (backend_nocuda.cpp) answers every CUDA entry point with one message,
// should a CUDA device ever reach them, instead of touching a null stream.
TEST(Backend, ABuildWithoutCudaRefusesEveryCudaEntryPoint) {
  if (query_devices().built_with_cuda) GTEST_SKIP() << "this build has the CUDA backend";
  Device gpu;
  gpu.cuda = true;
  float host[4] = {1, 2, 3, 4}, out[4] = {};
  const std::string want = "this build has no CUDA backend (configure with nvcc present)";
  EXPECT_EQ(error_message([&] { device_alloc(gpu, 16); }), want);
  EXPECT_EQ(error_message([&] { device_zero(gpu, host, 16); }), want);
  EXPECT_EQ(error_message([&] { copy_to_device(gpu, out, host, 16); }), want);
  EXPECT_EQ(error_message([&] { copy_to_host(gpu, out, host, 16); }), want);
  EXPECT_EQ(error_message([&] { synchronize(gpu); }), want);
  EXPECT_EQ(error_message([&] { gemm(gpu, false, false, 2, 2, 1, 1.0f, host, 1, host, 2, 0.0f, out, 2); }), want);
  EXPECT_EQ(error_message([&] { launch(gpu, 4, Scale{out, host, 2.0f}); }), want);
  EXPECT_EQ(out[0], 0.0f) << "nothing ran";
  close_device(gpu);  // closing what never opened is no error
}

TEST(Backend, DeviceMemoryIsZeroedAlignedCountedAndCopied) {
  const AllocatedBytes before = device_bytes_allocated();
  float* p = static_cast<float*>(device_alloc(kCpu, 1000 * sizeof(float)));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0.0f) << i;
  EXPECT_EQ(device_bytes_allocated().now, before.now + 4000);
  EXPECT_GE(device_bytes_allocated().peak, before.now + 4000);
  const std::vector<float> x = random_floats(1000, 1);
  std::vector<float> back(1000);
  copy_to_device(kCpu, p, x.data(), 4000);
  copy_to_host(kCpu, back.data(), p, 4000);
  EXPECT_EQ(back, x);
  device_copy(kCpu, p + 500, p, 400);  // a copy kernel: the first 400 floats again at 500
  copy_to_host(kCpu, back.data(), p, 4000);
  EXPECT_TRUE(std::equal(x.begin(), x.begin() + 400, back.begin() + 500));
  EXPECT_EQ(back[900], x[900]);
  device_zero(kCpu, p, 8);
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_EQ(p[2], x[2]);
  device_free(kCpu, p);
  EXPECT_EQ(device_bytes_allocated().now, before.now);
  EXPECT_EQ(device_alloc(kCpu, 0), nullptr);  // nothing to hold, nothing counted
  EXPECT_EQ(device_bytes_allocated().now, before.now);
}

TEST(Backend, DeviceBufferOwnsItsMemory) {
  const size_t before = device_bytes_allocated().now;
  DeviceBuffer<int32_t> a(kCpu, 10);
  const std::vector<int32_t> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  a.from_host(values.data(), values.size());
  EXPECT_EQ(a.to_host(), values);
  EXPECT_EQ(device_bytes_allocated().now, before + 40);
  DeviceBuffer<int32_t> b = std::move(a);
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.to_host(), values);
  b.reset();
  EXPECT_EQ(device_bytes_allocated().now, before);
  EXPECT_TRUE(b.to_host().empty());
}

// C = alpha · op(A) · op(B) + beta · C, row-major, for each transpose pair, with leading
// dimensions wider than the rows; an empty product leaves C alone.
TEST(Backend, GemmTransposesScalesAndAccumulatesRowMajor) {
  const int64_t m = 5, n = 6, k = 7;
  for (int tr = 0; tr < 4; ++tr) {
    const bool ta = tr & 1, tb = tr & 2;
    const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
    const auto A = random_floats(size_t(lda * (ta ? k : m)), 60), B = random_floats(size_t(ldb * (tb ? n : k)), 61);
    std::vector<float> C = random_floats(size_t(ldc * m), 62);
    const std::vector<float> C0 = C;
    gemm(kCpu, ta, tb, m, n, k, 0.5f, A.data(), lda, B.data(), ldb, 2.0f, C.data(), ldc);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += double(ta ? A[size_t(p * lda + i)] : A[size_t(i * lda + p)]) *
               double(tb ? B[size_t(j * ldb + p)] : B[size_t(p * ldb + j)]);
        expect_close(0.5 * s + 2.0 * C0[size_t(i * ldc + j)], C[size_t(i * ldc + j)], 1e-5,
                     cat("ta ", ta, " tb ", tb, " C(", i, ", ", j, ")"));
      }
    EXPECT_EQ(C[size_t(n)], C0[size_t(n)]) << "the padding column between rows";
  }
  std::vector<float> C(4, 3.0f);
  gemm(kCpu, false, false, 0, 2, 2, 1.0f, nullptr, 2, nullptr, 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, std::vector<float>(4, 3.0f));
}

// Each entry of a batch is the GEMM on its own strides' operands.
TEST(Backend, BatchedGemmIsEachEntrysGemm) {
  const int64_t m = 3, n = 4, k = 5, batch = 3, sa = m * k + 2, sb = k * n + 1, sc = m * n + 3;
  const auto A = random_floats(size_t(sa * batch), 70), B = random_floats(size_t(sb * batch), 71);
  std::vector<float> C(size_t(sc * batch), 1.0f);
  gemm_batched(kCpu, false, true, m, n, k, 1.0f, A.data(), k, sa, B.data(), k, sb, 0.0f, C.data(), n, sc, batch);
  for (int64_t e = 0; e < batch; ++e) {
    std::vector<float> one(size_t(m * n));
    gemm(kCpu, false, true, m, n, k, 1.0f, A.data() + e * sa, k, B.data() + e * sb, k, 0.0f, one.data(), n);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), C.begin() + e * sc)) << "entry " << e;
    EXPECT_EQ(C[size_t(e * sc + m * n)], 1.0f) << "between entries " << e << " and " << e + 1;
  }
}

// The epilogues' preconditions: a bias, beta = 0 (tested with the epilogues below) and C without
// padding between rows (the bias rows are broadcast over m·n contiguous floats).
TEST(Backend, AnEpilogueNeedsABiasAndContiguousRows) {
  const auto a = random_floats(6, 1), b = random_floats(6, 2), bias = random_floats(2, 3);
  std::vector<float> c(12), aux(12);
  EXPECT_EQ(error_message([&] { gemm(kCpu, false, false, 2, 2, 3, 1.0f, a.data(), 3, b.data(), 2, 0.0f, c.data(), 4,
                                     {.bias = bias.data()}); }),
            "gemm: an epilogue needs ldc = n");
  EXPECT_EQ(error_message([&] { gemm(kCpu, false, false, 2, 2, 3, 1.0f, a.data(), 3, b.data(), 2, 0.0f, c.data(), 2,
                                     {.gelu_aux = aux.data()}); }),
            "gemm: an epilogue needs a bias and beta = 0");
}

TEST(Backend, SumSquaresIsExactAcrossChunks) {
  const int64_t n = 3 * kReduceChunk + 17;
  std::vector<float> x(size_t(n), 0.5f);
  EXPECT_DOUBLE_EQ(sum_squares(kCpu, x.data(), n), 0.25 * double(n));
}

TEST(Backend, SumSquaresOverManyTensorsEqualsOneByOne) {
  // Sizes on both sides of the chunk, and an empty tensor in the middle.
  const std::vector<int64_t> sizes{5, kReduceChunk, 0, 2 * kReduceChunk + 3, 1};
  std::vector<std::vector<float>> data;
  std::vector<Tensor1d> tensors;
  for (size_t i = 0; i < sizes.size(); ++i) data.push_back(random_floats(size_t(sizes[i]), 40 + uint32_t(i)));
  for (size_t i = 0; i < sizes.size(); ++i) tensors.push_back({data[i].data(), sizes[i]});
  const std::vector<double> sums = sum_squares(kCpu, tensors);
  ASSERT_EQ(sums.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sums[i], sum_squares(kCpu, data[i].data(), sizes[i])) << i;  // the same bits
    double want = 0;
    for (float x : data[i]) want += double(x) * double(x);
    expect_close(want, sums[i], 1e-12, "sum of squares");
  }
  EXPECT_TRUE(sum_squares(kCpu, std::vector<Tensor1d>{}).empty());
}

// The bias and bias + tanh-GELU epilogues (fused by cuBLASLt on a GPU) against their definition.
TEST(Backend, GemmEpiloguesAddTheBiasThenGelu) {
  const int64_t m = 6, n = 9, k = 31;
  auto a = random_floats(m * k, 21), w = random_floats(n * k, 22), bias = random_floats(n, 23);
  std::vector<float> c(m * n, 7.0f), aux(m * n, 7.0f), plain(m * n, 7.0f);
  gemm(kCpu, false, true, m, n, k, 1.0f, a.data(), k, w.data(), k, 0.0f, plain.data(), n, {.bias = bias.data()});
  gemm(kCpu, false, true, m, n, k, 1.0f, a.data(), k, w.data(), k, 0.0f, c.data(), n,
       {.bias = bias.data(), .gelu_aux = aux.data()});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias[size_t(j)];
      for (int64_t q = 0; q < k; ++q) s += double(a[size_t(i * k + q)]) * double(w[size_t(j * k + q)]);
      const size_t at = size_t(i * n + j);
      expect_close(s, plain[at], 1e-5, "bias");
      EXPECT_EQ(aux[at], plain[at]) << "the pre-activation is the bias epilogue's output";
      expect_close(reference::gelu_tanh(s), c[at], 1e-5, "gelu");
    }
  std::vector<float> out(m * n);
  EXPECT_THROW(gemm(kCpu, false, true, m, n, k, 1.0f, a.data(), k, w.data(), k, 1.0f, out.data(), n, {.bias = bias.data()}),
               Error);  // an epilogue with beta ≠ 0 would add C twice on one backend and once on the other
}

TEST(Backend, ReducedPrecisionGemmRoundsItsOperands) {
  const int64_t m = 5, n = 7, k = 33;
  auto a = random_floats(m * k, 13), b = random_floats(k * n, 14);
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    Device d;
    d.gemm_precision = p;
    std::vector<float> c(m * n, 0), want(m * n, 0);
    gemm(d, false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) {
          const float x = a[size_t(i * k + q)], y = b[size_t(q * n + j)];
          s += double(p == Precision::bf16 ? round_to_bf16(x) : round_to_fp16(x)) *
               double(p == Precision::bf16 ? round_to_bf16(y) : round_to_fp16(y));
        }
        want[size_t(i * n + j)] = float(s);
      }
    for (size_t i = 0; i < c.size(); ++i) expect_close(want[i], c[i], 1e-5, precision_name(p));
  }
}

}  // namespace
}  // namespace pretrain::backend_test
