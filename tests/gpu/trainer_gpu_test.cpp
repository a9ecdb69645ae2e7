// The trainer's CUDA backend against its CPU backend (CTest label "gpu"; skips without a device):
// the same tiny BERT and GPT, weights and batch, in fp32, bf16 and fp16 GEMM modes (the CPU
// emulates the reduced ones by rounding the GEMM operands, kernels::RoundOperand).
//
// What is compared, and why so:
// - The loss at every step (three AdamW steps, then three LAMB steps from fresh weights).
// - Every parameter's gradient at the FIRST step of each, where both backends hold the same
//   weights; later steps' gradients are of weights that already differ (below). Per tensor, the
//   error is taken relative to max(max |cpu gradient|, kFloor × the largest gradient of the whole
//   model): some gradients are mathematically zero (attention's key bias: softmax ignores a
//   per-row constant) or nearly (query and key weights at initialisation), and their own largest
//   element is rounding noise, so dividing by it alone compares noise with noise.
// - The weights after the optimizer steps, element by element. Adam's update is lr · m̂/√v̂, a
//   normalised gradient: for an element whose gradient is near zero (within what the gradient
//   comparison allows) the two backends may step in opposite directions, up to lr each way per
//   step (|m̂|/√v̂ ≤ 1.0013 over the first steps; LAMB's trust ratio is ≤ 1 for these weights),
//   so those elements may differ by 2.02 · lr · steps; an element whose gradient g is well
//   resolved differs by at most that times 2·δ/|g| (δ: the gradient's allowed error).
// The test still fails on a real bug: the ops of trainer/kernels.h are the same in every
// precision, and in fp32 they are held to 1e-4 of each tensor's scale with a floor of 1e-6 of the
// model's largest gradient, far below the O(1) relative error a wrong kernel gives the tensors it
// feeds (a bias, LayerNorm or embedding reduction, the softmax backward through the query and key
// weights); a wrong GEMM mode or layout shows as O(1) errors in bf16 and fp16 too; a wrong
// optimizer step (bias correction, trust ratio) moves the well-resolved weights by ≥ lr, beyond
// their allowance.
// Each run prints the worst errors per precision (stdout), so tolerances can be sized on data.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
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

double max_abs(const float* x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(x[i])));
  return m;
}

// The worst of one kind of error seen in a run, and where.
struct Worst {
  double value = 0;
  std::string where;
  void see(double v, const std::string& w) {
    if (v > value) value = v, where = w;
  }
};

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
  // Relative gradient tolerances. fp32: the backends differ in summation order only (cuBLASLt's
  // CUBLAS_COMPUTE_32F and cuBLAS's default math mode do not use TF32), k · 2⁻²⁴ ≈ 3e-5 at worst
  // for this model's widest sums. bf16: the CPU rounds every GEMM operand to bf16 (8-bit
  // significand, unit roundoff 2⁻⁸ ≈ 4e-3), while cuBLASLt's CUBLAS_COMPUTE_32F_FAST_16BF may pick
  // TF32 kernels (Nsight showed it does on an H100): the difference is the CPU's rounding, compounded
  // through the ~10 GEMMs from the loss back to the first layer. fp16: 11-bit significand (2⁻¹¹),
  // 8× finer than bf16; the backward pass runs under a loss scale, as the trainer's fp16 does, so
  // the gradients stay normal fp16 numbers instead of losing bits as subnormals.
  const double tol = precision == Precision::fp32 ? 1e-4 : precision == Precision::bf16 ? 3e-2 : 1e-2;
  // A tensor's scale is at least this fraction of the model's largest gradient (see the top).
  constexpr double kFloor = 1e-2;
  const float loss_scale = precision == Precision::fp16 ? 1024.0f : 1.0f;
  ModelConfig c = ModelConfig::preset(GetParam(), "tiny");
  c.vocab_size = 211, c.max_positions = 32, c.hidden_dropout = c.attention_dropout = 0.0f;
  Device cpu = open_device("cpu", 2), gpu = open_device("cuda:0", 1);
  cpu.gemm_precision = gpu.gemm_precision = precision;
  Model a(c, cpu), b(c, gpu);
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
  const size_t n = size_t(a.num_parameters());
  Worst worst_loss, worst_grad, worst_weight;
  constexpr int kSteps = 3;
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::lamb}) {
    const std::string opt = optimizer_name(kind);
    a.init_weights(1), b.init_weights(1);  // each optimizer starts from the same weights on both
    OptimizerConfig oc;
    oc.kind = kind, oc.lr = 1e-3;
    Optimizer oa(oc, a), ob(oc, b);
    std::vector<double> allowed_grad_error(a.params().size());  // δ per tensor, from the first step
    std::vector<float> smallest_grad(n, INFINITY);              // min over steps of |cpu gradient|
    for (int t = 1; t <= kSteps; ++t) {
      a.zero_grads(), b.zero_grads();
      const Losses la = a.step(ic, true, loss_scale, 0), lb = b.step(ig, true, loss_scale, 0);
      const double loss_error = std::fabs(la.total - lb.total) / std::fabs(la.total);
      worst_loss.see(loss_error, cat(opt, " step ", t));
      EXPECT_LE(loss_error, tol / 10) << opt << " step " << t;
      const float* ga = a.grads();
      for (size_t i = 0; i < n; ++i) smallest_grad[i] = std::min(smallest_grad[i], std::fabs(ga[i]));
      if (t == 1) {
        std::vector<float> gb(n);
        copy_to_host(gpu, gb.data(), b.grads(), gb.size() * sizeof(float));
        const double model_max = max_abs(ga, int64_t(n));
        for (size_t k = 0; k < a.params().size(); ++k) {
          const ParamInfo& p = a.params()[k];
          const double scale = std::max({max_abs(ga + p.offset, p.numel), kFloor * model_max, 1e-30});
          double err = 0;
          for (int64_t i = p.offset; i < p.offset + p.numel; ++i)
            err = std::max(err, double(std::fabs(ga[i] - gb[size_t(i)])));
          worst_grad.see(err / scale, cat(opt, " ", p.name));
          EXPECT_LE(err / scale, tol) << "gradient of " << p.name;
          allowed_grad_error[k] = tol * scale;
        }
      }
      oa.step(t, 1.0 / loss_scale), ob.step(t, 1.0 / loss_scale);
    }
    std::vector<float> wb(n);
    copy_to_host(gpu, wb.data(), b.weights(), wb.size() * sizeof(float));
    const float* wa = a.weights();
    for (size_t k = 0; k < a.params().size(); ++k) {
      const ParamInfo& p = a.params()[k];
      // In units of the loss-scaled gradients, as smallest_grad and the allowed error are.
      const double delta = allowed_grad_error[k];
      double ratio = 0;  // the worst error / allowance of the tensor's elements
      for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
        const double g = smallest_grad[size_t(i)];
        const double share = g > 2 * delta ? 2 * delta / g : 1.0;  // of the opposite-directions bound
        const double allowance = 2.02 * oc.lr * kSteps * share + 1e-6 * std::fabs(wa[i]);
        ratio = std::max(ratio, std::fabs(double(wa[i]) - wb[size_t(i)]) / allowance);
      }
      worst_weight.see(ratio, cat(opt, " ", p.name));
      EXPECT_LE(ratio, 1.0) << "weights of " << p.name << " after " << kSteps << " " << opt << " steps";
    }
  }
  std::cout << "[gpu vs cpu] " << (GetParam() == ModelKind::bert ? "bert" : "gpt") << " " << precision_name(precision)
            << ": loss " << worst_loss.value << " (" << worst_loss.where << "; tolerance " << tol / 10 << "), gradient "
            << worst_grad.value << " (" << worst_grad.where << "; tolerance " << tol << "), weights "
            << worst_weight.value << " of their allowance (" << worst_weight.where << ")" << std::endl;
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
