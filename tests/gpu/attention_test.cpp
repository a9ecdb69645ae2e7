// trainer/ops/attention.h on CUDA against its CPU path (flash attention's algorithm) (CTest label
// "gpu"; skips without a device): cuDNN's fused SDPA (bf16) and the batched-GEMM fallback (fp32 and
// bf16), at BERT's shape with its padding mask and a packed row's mask, and GPT's with the causal
// mask; the output, the log-sum-exp and dqkv; the path each call took; a head size cuDNN refuses
// falling back with one warning; cuDNN's Philox dropout by its keep rate and scaling; the backward
// the same bits twice.
//
// Tolerances. The CPU computes in float from the stored inputs. cuDNN keeps the probabilities in
// bf16 for the P·V product (flash attention does), the fallback stores S and P in the storage
// type: in bf16 each is one rounding (u = 2⁻⁸) on values of the scores' size, so the outputs
// differ by a few u in the norm (inputs here have |scale · S| ≲ 3); fp32 by the sums' order only.
// Real query rows only (cuDNN's padding mask leaves padding queries at 0; see attention.h), and
// the upstream gradient is 0 on padding queries, as BERT's is.
#include <gtest/gtest.h>

#include <cstring>

#include "attention_fixtures.h"
#include "ops_fixtures.h"

namespace pretrain::gpu_attention_test {
namespace {

using namespace ops_testing;
using namespace attention_testing;

class AttentionGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};

template <typename T>
std::vector<double> real_rows_only(const AttentionShape& s, const std::vector<int32_t>& km, const std::vector<T>& x,
                                   int64_t row_width) {
  std::vector<double> out = to_double(x);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.T; ++i)
      if (!real_query(s, km, b, i))
        for (int64_t k = 0; k < row_width; ++k) out[size_t((b * s.T + i) * row_width + k)] = 0;
  return out;
}

template <typename T>
void check(AttentionShape s, bool use_cudnn, const char* want_path, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << " T=" << s.T << " HS=" << s.HS << " mask " << int(s.mask)
                                  << (use_cudnn ? " cudnn allowed" : " fallback"));
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const int64_t C = s.NH * s.HS, n_out = s.B * s.T * C, n_lse = s.B * s.NH * s.T;
  const auto km = key_mask(s);
  const auto qkv = random_tensor<T>(static_cast<size_t>(3 * n_out), seed, 0.7f);
  auto dout = random_tensor<T>(static_cast<size_t>(n_out), seed + 1);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.T; ++i)
      if (!real_query(s, km, b, i))
        for (int64_t k = 0; k < C; ++k) dout[size_t((b * s.T + i) * C + k)] = ops::from_float<T>(0.0f);
  const int32_t* kmh = km.empty() ? nullptr : km.data();
  // CPU
  std::vector<T> out(static_cast<size_t>(n_out)), dqkv(qkv.size());
  std::vector<float> lse(static_cast<size_t>(n_lse));
  ops::Attention cpu_att(cpu);
  cpu_att.forward(ops::AttentionForward<T>{s, out.data(), lse.data(), qkv.data(), kmh});
  cpu_att.backward(ops::AttentionBackward<T>{s, dqkv.data(), dout.data(), out.data(), lse.data(), qkv.data(), kmh});
  // GPU, the backward twice
  ops::Attention gpu_att(gpu, {use_cudnn, true, 64});
  auto gq = upload(gpu, qkv);
  auto gd = upload(gpu, dout);
  auto gkm = upload(gpu, km);
  auto go = poisoned<T>(gpu, size_t(n_out));
  auto gdq = poisoned<T>(gpu, qkv.size());
  auto gl = poisoned<float>(gpu, size_t(n_lse));
  const int32_t* kmd = km.empty() ? nullptr : gkm.get();
  gpu_att.forward(ops::AttentionForward<T>{s, go.get(), gl.get(), gq.get(), kmd});
  EXPECT_EQ(gpu_att.last_path(), want_path);
  gpu_att.backward(ops::AttentionBackward<T>{s, gdq.get(), gd.get(), go.get(), gl.get(), gq.get(), kmd});
  const std::vector<T> first = gdq.to_host();
  gpu_att.backward(ops::AttentionBackward<T>{s, gdq.get(), gd.get(), go.get(), gl.get(), gq.get(), kmd});
  EXPECT_EQ(0, std::memcmp(first.data(), gdq.to_host().data(), first.size() * sizeof(T))) << "dqkv differs between runs";
  const double u = kUnitRoundoff<T>, f = double(s.T) * 0x1p-24 * 8;
  const auto go_h = go.to_host();
  PRETRAIN_EXPECT_ERRORS(errors(real_rows_only(s, km, go_h, C), real_rows_only(s, km, out, C), 0.05), 4 * u + f,
                         32 * u + f, "out");
  std::vector<double> gl_real = to_double(gl.to_host()), lse_real = to_double(lse);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t i = 0; i < s.T; ++i)
        if (!real_query(s, km, b, i)) gl_real[size_t((b * s.NH + h) * s.T + i)] = lse_real[size_t((b * s.NH + h) * s.T + i)] = 0;
  PRETRAIN_EXPECT_ERRORS(errors(gl_real, lse_real, 1.0), 4 * u + f, 8 * u + f, "lse");
  PRETRAIN_EXPECT_ERRORS(errors(first, dqkv, 0.05), 6 * u + f, 64 * u + f, "dqkv");
  close_device(gpu);
}

AttentionShape bert(AttentionMask mask) { return {4, 128, 12, 64, mask, 0.125f, 0.0f}; }
AttentionShape gpt() { return {1, 1024, 4, 64, AttentionMask::causal, 0.125f, 0.0f}; }

TEST_F(AttentionGpu, CudnnBertPadding) { check<bf16>(bert(AttentionMask::padding), true, "cudnn", 800); }
TEST_F(AttentionGpu, CudnnGptCausal) { check<bf16>(gpt(), true, "cudnn", 810); }
TEST_F(AttentionGpu, PackedRowsTakeTheDeterministicFallback) {
  check<bf16>(bert(AttentionMask::packed), true, "batched gemm", 820);
}
TEST_F(AttentionGpu, FallbackBf16) {
  for (AttentionMask m : {AttentionMask::none, AttentionMask::padding, AttentionMask::packed})
    check<bf16>(bert(m), false, "batched gemm", 830);
  check<bf16>(gpt(), false, "batched gemm", 840);
}
TEST_F(AttentionGpu, FallbackFp32) {
  check<float>(bert(AttentionMask::padding), true, "batched gemm", 850);
  check<float>(gpt(), true, "batched gemm", 860);
}

TEST_F(AttentionGpu, AHeadSizeCudnnRefusesFallsBackWithOneWarning) {
  Device gpu = open_device("cuda:0", 1);
  AttentionShape s{2, 64, 2, 12, AttentionMask::causal, 0.3f, 0.0f};  // head size 12: not a multiple of 8
  ops::Attention att(gpu);
  auto qkv = upload(gpu, random_tensor<bf16>(static_cast<size_t>(2 * 64 * 3 * 24), 870));
  auto out = poisoned<bf16>(gpu, size_t(2 * 64 * 24));
  auto lse = poisoned<float>(gpu, size_t(2 * 2 * 64));
  for (int i = 0; i < 3; ++i) att.forward(ops::AttentionForward<bf16>{s, out.get(), lse.get(), qkv.get(), nullptr});
  EXPECT_EQ(att.last_path(), "batched gemm");
  EXPECT_LE(att.warnings().size(), 1u) << "one warning, not one per call";
  for (const bf16& x : out.to_host()) ASSERT_TRUE(std::isfinite(x.to_float()));
  close_device(gpu);
}

TEST_F(AttentionGpu, CudnnDropoutKeepsOneMinusPScaled) {
  Device gpu = open_device("cuda:0", 1);
  AttentionShape s{4, 64, 4, 64, AttentionMask::none, 1.0f, 0.1f};
  ops::Attention att(gpu);
  auto qkv = upload(gpu, dropout_probe_qkv<bf16>(s));
  auto out = poisoned<bf16>(gpu, size_t(s.B * s.T * s.NH * s.HS));
  auto lse = poisoned<float>(gpu, size_t(s.B * s.NH * s.T));
  att.forward(ops::AttentionForward<bf16>{s, out.get(), lse.get(), qkv.get(), nullptr, 5, 0});
  if (att.last_path() != "cudnn") GTEST_SKIP() << "cuDNN not used here: " << (att.warnings().empty() ? "" : att.warnings()[0]);
  expect_dropout_statistics(s, to_double(out.to_host()), 0x1p-8);
  // Another offset draws another mask.
  const auto first = out.to_host();
  att.forward(ops::AttentionForward<bf16>{s, out.get(), lse.get(), qkv.get(), nullptr, 5, 1});
  EXPECT_NE(0, std::memcmp(first.data(), out.to_host().data(), first.size() * sizeof(bf16)));
  close_device(gpu);
}

TEST_F(AttentionGpu, FallbackDropoutIsTheCpusMask) {
  AttentionShape s{2, 128, 4, 64, AttentionMask::padding, 0.125f, 0.1f};
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const auto km = key_mask(s);
  const auto qkv = random_tensor<float>(static_cast<size_t>(s.B * s.T * 3 * s.NH * s.HS), 880, 0.7f);
  std::vector<float> out(static_cast<size_t>(s.B * s.T * s.NH * s.HS)), lse(static_cast<size_t>(s.B * s.NH * s.T));
  ops::Attention(cpu).forward(ops::AttentionForward<float>{s, out.data(), lse.data(), qkv.data(), km.data(), 11, 2});
  ops::Attention att(gpu, {false, true, 64});
  auto gq = upload(gpu, qkv);
  auto gkm = upload(gpu, km);
  auto go = poisoned<float>(gpu, out.size());
  auto gl = poisoned<float>(gpu, lse.size());
  att.forward(ops::AttentionForward<float>{s, go.get(), gl.get(), gq.get(), gkm.get(), 11, 2});
  PRETRAIN_EXPECT_ERRORS(errors(go.to_host(), out, 0.05), 1e-5, 1e-4, "out with dropout");
  close_device(gpu);
}

}  // namespace
}  // namespace pretrain::gpu_attention_test
