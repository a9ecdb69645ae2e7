// trainer/ops/multi_tensor_optimizer.h on CUDA against its CPU path (CTest label "gpu"; skips
// without a device): AdamW and LAMB for three steps over an arena of tensors from 3 elements to
// several chunks, with clipping below the norm, the bf16 working copy, and a NaN gradient that
// must change nothing. Tolerances: the global norm's chunk sums are trees on the GPU and loops on
// the CPU (double: ~1e-15 relative); the element updates are the same float expressions, which
// nvcc may contract into FMAs: a few units of 2⁻²⁴ per step. The working copy must be the bf16
// rounding of the GPU's own fp32 weights, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops_fixtures.h"
#include "trainer/ops/multi_tensor_optimizer.h"

namespace pretrain::gpu_multi_tensor_optimizer_test {
namespace {

using namespace ops_testing;

class MultiTensorOptimizerGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};

std::vector<ops::OptTensor> arena(int64_t& n) {
  std::vector<ops::OptTensor> t;
  n = 0;
  for (int64_t size : {3, 768, 768 * 3072, 50304 * 64, 1, 40000}) {
    t.push_back({n, size, size > 768, true});
    n += size;
  }
  return t;
}

void run(bool lamb) {
  SCOPED_TRACE(lamb ? "lamb" : "adamw");
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  int64_t n = 0;
  const auto tensors = arena(n);
  const auto w0 = random_tensor<float>(static_cast<size_t>(n), 900, 0.5f);
  std::vector<float> w = w0, m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f), u(static_cast<size_t>(n));
  std::vector<bf16> working(static_cast<size_t>(n));
  std::vector<double> norms(2 * tensors.size());
  auto gw = upload(gpu, w0);
  auto gm = upload(gpu, m);
  auto gv = upload(gpu, v);
  auto gu = upload(gpu, u);
  auto gworking = poisoned<bf16>(gpu, size_t(n));
  DeviceBuffer<double> gnorms(gpu, norms.size());
  DeviceBuffer<ops::OptimizerScalars> gs(gpu, 1);
  ops::MultiTensorOptimizer mc(cpu, tensors), mg(gpu, tensors);
  const ops::ClipRule rule = lamb ? ops::ClipRule::apex_lamb : ops::ClipRule::torch;
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_tensor<float>(static_cast<size_t>(n), 910 + uint32_t(t), 0.01f);
    auto gg = upload(gpu, g);
    const ops::AdamHyper h{1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, float(1 - std::pow(0.9, t)), float(1 - std::pow(0.999, t))};
    ops::OptimizerScalars s;
    mc.grad_norm(g.data(), &s), mc.clip(&s, 0.5, 1.0, rule);
    mg.grad_norm(gg.get(), gs.get()), mg.clip(gs.get(), 0.5, 1.0, rule);
    if (!lamb) {
      mc.adamw(w.data(), m.data(), v.data(), g.data(), working.data(), h, &s);
      mg.adamw(gw.get(), gm.get(), gv.get(), gg.get(), gworking.get(), h, gs.get());
    } else {
      mc.lamb_stage1(u.data(), m.data(), v.data(), w.data(), g.data(), h, &s);
      mc.lamb_norms(w.data(), u.data(), norms.data());
      mc.lamb_stage2(w.data(), u.data(), working.data(), norms.data(), 1e-3, 0.01f, &s);
      mg.lamb_stage1(gu.get(), gm.get(), gv.get(), gw.get(), gg.get(), h, gs.get());
      mg.lamb_norms(gw.get(), gu.get(), gnorms.get());
      mg.lamb_stage2(gw.get(), gu.get(), gworking.get(), gnorms.get(), 1e-3, 0.01f, gs.get());
    }
    const ops::OptimizerScalars sg = gs.to_host()[0];
    EXPECT_NEAR(sg.norm, s.norm, 1e-12 * s.norm) << "step " << t;
    EXPECT_NEAR(sg.clip, s.clip, 1e-12) << "step " << t;
    EXPECT_LT(s.clip, 1.0) << "the case clips";
  }
  const double tol = 64 * 0x1p-24;
  PRETRAIN_EXPECT_ERRORS(errors(gw.to_host(), to_double(w), 1e-3), tol, tol, "weights");
  PRETRAIN_EXPECT_ERRORS(errors(gm.to_host(), to_double(m), 1e-6), tol, tol, "m");
  PRETRAIN_EXPECT_ERRORS(errors(gv.to_host(), to_double(v), 1e-9), tol, tol, "v");
  const auto wg = gw.to_host();
  const auto bg = gworking.to_host();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bg[size_t(i)].bits, bf16::from_float(wg[size_t(i)]).bits) << i;
  // A NaN gradient: the device reads finite = 0 and nothing moves.
  auto bad = random_tensor<float>(static_cast<size_t>(n), 999, 0.01f);
  bad[size_t(n / 3)] = NAN;
  auto gbad = upload(gpu, bad);
  mg.grad_norm(gbad.get(), gs.get()), mg.clip(gs.get(), 1.0, 1.0, rule);
  mg.adamw(gw.get(), gm.get(), gv.get(), gbad.get(), gworking.get(), {1e-3f, 0.9f, 0.999f, 1e-6f, 0.f, 0.5f, 0.5f}, gs.get());
  EXPECT_EQ(gs.to_host()[0].finite, 0);
  EXPECT_EQ(0, std::memcmp(wg.data(), gw.to_host().data(), wg.size() * sizeof(float)));
  close_device(gpu);
}

TEST_F(MultiTensorOptimizerGpu, AdamWMatchesTheCpu) { run(false); }
TEST_F(MultiTensorOptimizerGpu, LambMatchesTheCpu) { run(true); }

}  // namespace
}  // namespace pretrain::gpu_multi_tensor_optimizer_test
