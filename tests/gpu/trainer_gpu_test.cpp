// The trainer's CUDA backend against its CPU backend (CTest label "gpu"; skips without a device):
// the same tiny BERT and GPT, weights and batch give the same loss, and every parameter's gradient
// and the weights after AdamW and LAMB steps agree within 1e-4 of each tensor's largest magnitude
// (fp32 on both; cuBLAS may sum in another order than OpenBLAS), and in bf16 and fp16 GEMM modes
// against the CPU's emulation of them within 2e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/device.h"
#include "common/error.h"
#include "trainer/optimizer.h"

namespace pretrain {
namespace {

struct HostBatch {
  int64_t B = 4, T = 16, P = 4;
  std::vector<int32_t> ids, types, mask, positions, mlm_ids, nsp, targets;
  explicit HostBatch(int64_t V) {
    std::mt19937 gen(9);
    for (int64_t i = 0; i < B * T; ++i) ids.push_back(int32_t(gen() % uint64_t(V))), targets.push_back(int32_t(gen() % uint64_t(V)));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) types.push_back(t >= T / 2), mask.push_back(!(b == 2 && t >= 12));
    positions = {1, 3, 5, 0, 2, 4, 0, 0, 7, 0, 0, 0, 1, 2, 3, 9};
    for (int32_t p : positions) mlm_ids.push_back(p ? int32_t(gen() % uint64_t(V)) : 0);
    nsp = {0, 1, 0, 1};
  }
};

struct DeviceInts {
  DeviceBuffer<int32_t> buf;
  DeviceInts(const Device& d, const std::vector<int32_t>& v) : buf(d, v.size()) { buf.from_host(v.data(), v.size()); }
};

void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu, const std::string& what, double tol) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  double scale = 1e-6, err = 0;
  for (size_t i = 0; i < cpu.size(); ++i) scale = std::max(scale, double(std::fabs(cpu[i])));
  for (size_t i = 0; i < cpu.size(); ++i) err = std::max(err, double(std::fabs(cpu[i] - gpu[i])));
  EXPECT_LE(err / scale, tol) << what;
}

class TrainerGpu : public ::testing::TestWithParam<ModelKind> {
 protected:
  void check_against_cpu(Precision precision);
  void SetUp() override {
    const DeviceReport r = query_devices();
    if (!r.built_with_cuda) GTEST_SKIP() << "built without CUDA";
    if (r.gpus.empty()) GTEST_SKIP() << "no GPU here: " << r.reason;
  }
};

TEST_P(TrainerGpu, StepMatchesTheCpuBackend) {
  for (Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16}) check_against_cpu(precision);
}

void TrainerGpu::check_against_cpu(Precision precision) {
  SCOPED_TRACE(precision_name(precision));
  // fp32: the two backends differ only in summation order. bf16/fp16: both round the GEMM
  // operands the same way (RNE), but a rounding that flips early grows over three steps.
  const double tol = precision == Precision::fp32 ? 1e-4 : 2e-2;
  ModelConfig c = ModelConfig::preset(GetParam(), "tiny");
  c.vocab_size = 211, c.max_positions = 32, c.hidden_dropout = c.attention_dropout = 0.0f;
  Device cpu = open_device("cpu", 2), gpu = open_device("cuda:0", 1);
  cpu.gemm_precision = gpu.gemm_precision = precision;
  Model a(c, cpu), b(c, gpu);
  a.init_weights(1);
  b.init_weights(1);
  const HostBatch h(c.vocab_size);
  DeviceInts ids(gpu, h.ids), types(gpu, h.types), mask(gpu, h.mask), pos(gpu, h.positions), mlm(gpu, h.mlm_ids),
      nsp(gpu, h.nsp), targets(gpu, h.targets);
  ModelInputs ic, ig;
  ic.B = ig.B = h.B, ic.T = ig.T = h.T, ic.P = ig.P = h.P;
  ic.ids = h.ids.data(), ig.ids = ids.buf.get();
  if (GetParam() == ModelKind::gpt) {
    ic.targets = h.targets.data(), ig.targets = targets.buf.get();
  } else {
    ic.types = h.types.data(), ic.mask = h.mask.data(), ic.mlm_positions = h.positions.data();
    ic.mlm_ids = h.mlm_ids.data(), ic.nsp_labels = h.nsp.data();
    ig.types = types.buf.get(), ig.mask = mask.buf.get(), ig.mlm_positions = pos.buf.get();
    ig.mlm_ids = mlm.buf.get(), ig.nsp_labels = nsp.buf.get();
  }
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::lamb}) {
    OptimizerConfig oc;
    oc.kind = kind, oc.lr = 1e-3;
    Optimizer oa(oc, a), ob(oc, b);
    for (int t = 1; t <= 3; ++t) {
      a.zero_grads(), b.zero_grads();
      const Losses la = a.step(ic, true, 1.0f, 0), lb = b.step(ig, true, 1.0f, 0);
      EXPECT_NEAR(la.total, lb.total, tol / 10 * std::fabs(la.total)) << optimizer_name(kind) << " step " << t;
      const std::vector<float> ga(a.grads(), a.grads() + a.num_parameters());
      std::vector<float> gb(ga.size());
      copy_to_host(gpu, gb.data(), b.grads(), gb.size() * sizeof(float));
      for (const ParamInfo& p : a.params())
        expect_close({ga.begin() + p.offset, ga.begin() + p.offset + p.numel},
                     {gb.begin() + p.offset, gb.begin() + p.offset + p.numel}, "gradient of " + p.name, tol);
      oa.step(t), ob.step(t);
    }
    std::vector<float> wb(size_t(a.num_parameters()));
    copy_to_host(gpu, wb.data(), b.weights(), wb.size() * sizeof(float));
    expect_close({a.weights(), a.weights() + a.num_parameters()}, wb, std::string("weights after ") + optimizer_name(kind),
                 tol);
  }
}

// cuBLASLt against OpenBLAS on shapes the model does not reach: every transpose pair, operands one
// float off 256-byte alignment (attention's head slices), batches, and the bias / GELU epilogues
// both where cuBLASLt fuses them and where it cannot (an ld not divisible by 8 falls back).
TEST(TrainerGpuGemm, CublasLtMatchesOpenBlas) {
  const DeviceReport r = query_devices();
  if (!r.built_with_cuda || r.gpus.empty()) GTEST_SKIP() << "no GPU here";
  Device cpu = open_device("cpu", 2), gpu = open_device("cuda:0", 1);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  auto upload = [&](const std::vector<float>& v) {
    DeviceBuffer<float> b(gpu, v.size());
    b.from_host(v.data(), v.size());
    return b;
  };
  for (int64_t n : {9, 16})
    for (int tr = 0; tr < 4; ++tr)
      for (int epi = 0; epi < 3; ++epi)
        for (int64_t off : {0, 1}) {
          const bool ta = tr & 1, tb = tr & 2;
          const int64_t m = 13, k = 37, batch = epi ? 1 : 3;
          const int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n;
          const int64_t sa = lda * (ta ? k : m) + 5, sb = ldb * (tb ? n : k) + 3, sc = m * n;
          SCOPED_TRACE(cat("n ", n, " ta ", ta, " tb ", tb, " epilogue ", epi, " offset ", off));
          std::vector<float> A(size_t(off + sa * batch)), B(size_t(off + sb * batch)), bias(size_t(n + off)),
              C(size_t(off + sc * batch), 0.0f), aux(C.size(), 0.0f);
          for (auto* v : {&A, &B, &bias}) for (float& x : *v) x = normal(gen);
          DeviceBuffer<float> dA = upload(A), dB = upload(B), dbias = upload(bias), dC = upload(C), daux = upload(aux);
          GemmEpilogue ec, eg;
          if (epi >= 1) ec.bias = bias.data() + off, eg.bias = dbias.get() + off;
          if (epi == 2) ec.gelu_aux = aux.data() + off, eg.gelu_aux = daux.get() + off;
          if (epi == 0) {
            gemm_batched(cpu, ta, tb, m, n, k, 0.5f, A.data() + off, lda, sa, B.data() + off, ldb, sb, 0.0f, C.data() + off, ldc, sc, batch);
            gemm_batched(gpu, ta, tb, m, n, k, 0.5f, dA.get() + off, lda, sa, dB.get() + off, ldb, sb, 0.0f, dC.get() + off, ldc, sc, batch);
          } else {
            gemm(cpu, ta, tb, m, n, k, 0.5f, A.data() + off, lda, B.data() + off, ldb, 0.0f, C.data() + off, ldc, ec);
            gemm(gpu, ta, tb, m, n, k, 0.5f, dA.get() + off, lda, dB.get() + off, ldb, 0.0f, dC.get() + off, ldc, eg);
          }
          expect_close(C, dC.to_host(), "C", 1e-5);
          if (epi == 2) expect_close(aux, daux.to_host(), "GELU input", 1e-5);
        }
  close_device(gpu);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TrainerGpu, ::testing::Values(ModelKind::bert, ModelKind::gpt),
                         [](const auto& info) { return info.param == ModelKind::bert ? "bert" : "gpt"; });

}  // namespace
}  // namespace pretrain
