// The GPU ops of trainer/ops, each timed alone at the models' shapes (issue #47):
//   bench_kernels [--device cuda|cpu] [--op NAME|all] [--runs N] [--warmup N] [--json FILE]
// Per op: the median of --runs event-timed launches after --warmup (trainer/ops/timing.h), on fresh
// random inputs (never zeros: METHOD.md), in bf16 storage; the fewest bytes the op must move (each
// input read once, each output written once) over that time against the H200's measured copy rate
// (~4.3 TB/s, KINDS.md), and for attention its FLOPs against ~790 TFLOP/s bf16. A table on stdout,
// one JSON object per op to --json. --device cpu runs every op once on tiny shapes, so CI keeps
// this program working (the CPU ops are the references, not tuned for speed).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/cli.h"
#include "trainer/ops/attention.h"
#include "trainer/ops/bias_gelu.h"
#include "trainer/ops/classifier.h"
#include "trainer/ops/embedding_grad.h"
#include "trainer/ops/layernorm.h"
#include "trainer/ops/multi_tensor_optimizer.h"
#include "trainer/ops/softmax.h"
#include "trainer/ops/timing.h"

using namespace pretrain;
using ops::from_float;

namespace {

constexpr double kCopyBytesPerSecond = 4.3e12;  // H200, device-to-device copy (read + write), KINDS.md
constexpr double kBf16Flops = 790e12;           // H200, 8192³ bf16 matrix product on random data, KINDS.md

struct Bench {
  const Device& d;
  int warmup, runs;
  bool tiny;
  std::ofstream json;

  template <typename T>
  DeviceBuffer<T> random(size_t n, uint32_t seed, float stddev = 1.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, stddev);
    std::vector<T> h(n);
    for (auto& x : h) x = from_float<T>(normal(gen));
    DeviceBuffer<T> b(d, n);
    b.from_host(h.data(), n);
    return b;
  }
  DeviceBuffer<int32_t> ints(size_t n, int32_t lo, int32_t hi, uint32_t seed) {
    std::mt19937 gen(seed);
    std::vector<int32_t> h(n);
    for (auto& x : h) x = lo + int32_t(gen() % uint32_t(hi - lo));
    DeviceBuffer<int32_t> b(d, n);
    b.from_host(h.data(), n);
    return b;
  }

  void report(const std::string& op, const std::string& shape, double bytes, double flops,
              const std::function<void()>& fn) {
    const double ms = ops::median_ms(d, warmup, runs, fn);
    const double gbs = bytes / (ms * 1e-3) / 1e9, tflops = flops / (ms * 1e-3) / 1e12;
    std::printf("%-26s %-34s %10.4f ms %9.1f GB/s %6.1f%% of copy", op.c_str(), shape.c_str(), ms, gbs,
                100 * bytes / (ms * 1e-3) / kCopyBytesPerSecond);
    if (flops > 0) std::printf(" %8.1f TFLOP/s %5.1f%% of bf16", tflops, 100 * flops / (ms * 1e-3) / kBf16Flops);
    std::printf("\n");
    std::fflush(stdout);
    if (json.is_open())
      json << "{\"op\":\"" << op << "\",\"shape\":\"" << shape << "\",\"device\":\"" << d.name << "\",\"median_ms\":" << ms
           << ",\"bytes\":" << bytes << ",\"gb_per_s\":" << gbs << ",\"flops\":" << flops << ",\"tflops\":" << tflops
           << "}\n";
  }
};

std::string dims(std::initializer_list<int64_t> v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

void layernorm(Bench& b, int64_t N, int64_t C) {
  auto x = b.random<bf16>(static_cast<size_t>(N * C), 1), r = b.random<bf16>(static_cast<size_t>(N * C), 2), w = b.random<bf16>(static_cast<size_t>(C), 3);
  auto bias = b.random<bf16>(static_cast<size_t>(C), 4), out = b.random<bf16>(static_cast<size_t>(N * C), 5), sum = b.random<bf16>(static_cast<size_t>(N * C), 6);
  auto dout = b.random<bf16>(static_cast<size_t>(N * C), 7), dres = b.random<bf16>(static_cast<size_t>(N * C), 8), dinp = b.random<bf16>(static_cast<size_t>(N * C), 9);
  auto dw = b.random<bf16>(static_cast<size_t>(C), 10), db = b.random<bf16>(static_cast<size_t>(C), 11);
  DeviceBuffer<float> mean(b.d, size_t(N)), rstd(b.d, size_t(N)), scratch(b.d, size_t(ops::layernorm_backward_scratch(N, C)));
  const ops::LayerNormForward<bf16> f{out.get(), sum.get(), mean.get(), rstd.get(), x.get(), r.get(), w.get(), bias.get(), N, C, 1e-5f};
  b.report("layernorm_forward", dims({N, C}), 4.0 * N * C * 2, 0, [&] { ops::layernorm_forward(b.d, f); });
  const ops::LayerNormBackward<bf16> g{dinp.get(), dres.get(), dw.get(), db.get(), scratch.get(), dout.get(), sum.get(),
                                       w.get(), mean.get(), rstd.get(), N, C};
  b.report("layernorm_backward", dims({N, C}), 5.0 * N * C * 2, 0, [&] { ops::layernorm_backward(b.d, g); });
}

void softmax(Bench& b, int64_t B, int64_t NH, int64_t T, bool causal) {
  const size_t n = size_t(B * NH * T * T);
  auto s = b.random<bf16>(n, 20, 4.0f), p = b.random<bf16>(n, 21), dp = b.random<bf16>(n, 22);
  auto km = b.ints(static_cast<size_t>(B * T), 1, 2, 23);
  const ops::SoftmaxForward<bf16> f{p.get(), s.get(), causal ? nullptr : km.get(), causal, 0.125f, B, NH, T};
  b.report(causal ? "softmax_forward causal" : "softmax_forward padding", dims({B, NH, T, T}), 2.0 * double(n) * 2, 0,
           [&] { ops::softmax_forward(b.d, f); });
  const ops::SoftmaxBackward<bf16> g{s.get(), dp.get(), p.get(), 0.125f, B * NH * T, T};  // dscores over the scores
  b.report("softmax_backward", dims({B, NH, T, T}), 3.0 * double(n) * 2, 0, [&] { ops::softmax_backward(b.d, g); });
}

void bias_gelu(Bench& b, int64_t N, int64_t C, ops::Gelu kind) {
  auto x = b.random<bf16>(static_cast<size_t>(N * C), 30), bias = b.random<bf16>(static_cast<size_t>(C), 31), out = b.random<bf16>(static_cast<size_t>(N * C), 32);
  auto pre = b.random<bf16>(static_cast<size_t>(N * C), 33), dout = b.random<bf16>(static_cast<size_t>(N * C), 34), db = b.random<bf16>(static_cast<size_t>(C), 35);
  DeviceBuffer<float> scratch(b.d, size_t(ops::bias_backward_scratch(N, C)));
  const std::string name = kind == ops::Gelu::erf ? "erf" : "tanh";
  b.report("bias_gelu_forward " + name, dims({N, C}), 3.0 * N * C * 2, 0,
           [&] { ops::bias_gelu_forward(b.d, ops::BiasGeluForward<bf16>{out.get(), pre.get(), x.get(), bias.get(), N, C, kind}); });
  b.report("bias_gelu_backward " + name, dims({N, C}), 3.0 * N * C * 2, 0, [&] {
    ops::bias_gelu_backward(b.d, ops::BiasGeluBackward<bf16>{out.get(), db.get(), scratch.get(), dout.get(), pre.get(), N, C, kind});
  });
}

void classifier(Bench& b, int64_t N, int64_t V, int64_t ld) {
  auto logits = b.random<bf16>(static_cast<size_t>(N * ld), 40, 3.0f);
  auto targets = b.ints(static_cast<size_t>(N), 0, int32_t(V), 41);
  DeviceBuffer<float> losses(b.d, size_t(N));
  // Each run overwrites the logits with their gradient: the next run's input is that gradient, of
  // the same size and as random, so the timing holds.
  const ops::FusedClassifier<bf16> a{logits.get(), losses.get(), targets.get(), N, V, ld, 1.0f / float(N)};
  b.report("classifier", dims({N, V}), 2.0 * double(N) * double(ld) * 2, 0, [&] { ops::classifier_forward_backward(b.d, a); });
}

void attention(Bench& b, ops::AttentionShape s, bool cudnn, const std::string& what) {
  const int64_t C = s.NH * s.HS, n = s.B * s.T * C;
  auto qkv = b.random<bf16>(static_cast<size_t>(3 * n), 50, 0.7f), out = b.random<bf16>(static_cast<size_t>(n), 51), dout = b.random<bf16>(static_cast<size_t>(n), 52);
  auto dqkv = b.random<bf16>(static_cast<size_t>(3 * n), 53);
  auto km = b.ints(static_cast<size_t>(s.B * s.T), 1, 2, 54);
  DeviceBuffer<float> lse(b.d, size_t(s.B * s.NH * s.T));
  ops::Attention att(b.d, {cudnn, true, 64});
  const int32_t* kmp = s.mask == ops::AttentionMask::padding ? km.get() : nullptr;
  const ops::AttentionForward<bf16> f{s, out.get(), lse.get(), qkv.get(), kmp};
  const ops::AttentionBackward<bf16> g{s, dqkv.get(), dout.get(), out.get(), lse.get(), qkv.get(), kmp};
  att.forward(f);  // chooses the path (and builds cuDNN's graphs) outside the timing
  const double causal = s.mask == ops::AttentionMask::causal ? 0.5 : 1.0;
  const double flops = 4.0 * double(s.B * s.NH) * double(s.T * s.T) * double(s.HS) * causal;
  const std::string shape = dims({s.B, s.T, s.NH, s.HS});
  b.report("attention_forward " + what + " (" + att.last_path() + ")", shape, 3.0 * n * 2 + n * 2, flops, [&] { att.forward(f); });
  // The backward: dV, dP, dQ, dK GEMMs (and the recomputed S): 2.5 times the forward's products.
  b.report("attention_backward " + what, shape, 3.0 * n * 2 + 2.0 * n * 2 + 3.0 * n * 2, 2.5 * flops, [&] { att.backward(g); });
}

void optimizer(Bench& b, int64_t params) {
  std::vector<ops::OptTensor> tensors;
  for (int64_t o = 0; o < params; o += 768 * 768) tensors.push_back({o, std::min<int64_t>(768 * 768, params - o), true, true});
  auto p = b.random<float>(static_cast<size_t>(params), 60, 0.02f), g = b.random<float>(static_cast<size_t>(params), 61, 1e-3f);
  auto m = b.random<float>(static_cast<size_t>(params), 62, 1e-3f), v = b.random<float>(static_cast<size_t>(params), 63, 1e-6f);
  auto working = b.random<bf16>(static_cast<size_t>(params), 64);
  DeviceBuffer<ops::OptimizerScalars> s(b.d, 1);
  const ops::OptimizerScalars one;
  s.from_host(&one, 1);
  ops::MultiTensorOptimizer opt(b.d, tensors);
  const ops::AdamHyper h{1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f};
  b.report("grad_norm + clip", dims({params}), 4.0 * double(params), 0, [&] {
    opt.grad_norm(g.get(), s.get());
    opt.clip(s.get(), 1.0, 1e30, ops::ClipRule::torch);  // a bound never reached: the update keeps its size
  });
  b.report("adamw (multi-tensor)", dims({params}), 30.0 * double(params), 0,
           [&] { opt.adamw(p.get(), m.get(), v.get(), g.get(), working.get(), h, s.get()); });
}

void embedding(Bench& b, int64_t B, int64_t T, int64_t C, int64_t V) {
  const int64_t N = B * T;
  auto dout = b.random<bf16>(static_cast<size_t>(N * C), 70), words = b.random<bf16>(static_cast<size_t>(V * C), 71);
  auto positions = b.random<bf16>(static_cast<size_t>(T * C), 72), types = b.random<bf16>(static_cast<size_t>(2 * C), 73);
  auto ids = b.ints(static_cast<size_t>(N), 0, int32_t(V), 74), tt = b.ints(static_cast<size_t>(N), 0, 2, 75);
  ops::EmbeddingGrad grad(b.d, N, C);
  const ops::EmbeddingBackward<bf16> a{words.get(), positions.get(), types.get(), dout.get(), ids.get(), tt.get(),
                                       nullptr, N, T, C};
  b.report("embedding_backward", dims({N, C}), double(N) * C * 2 + 2.0 * double(std::min(N, V) + T + 2) * C * 2, 0,
           [&] { grad.backward(a); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time trainer/ops' GPU kernels at the models' shapes", "bench_kernels"};
  ToolOptions common(app);
  std::string device = "cuda", op = "all", json;
  int runs = 50, warmup = 5;
  app.add_option("--device", device, "cuda or cpu (cpu: tiny shapes, one run each)");
  app.add_option("--op", op, "layernorm, softmax, bias_gelu, classifier, attention, optimizer, embedding or all");
  app.add_option("--runs", runs);
  app.add_option("--warmup", warmup);
  app.add_option("--json", json, "one JSON object per op to this file");
  return run_tool(app, argc, argv, [&] {
    Device d = open_device(device, max_threads());
    const bool tiny = !d.cuda;
    Bench b{d, tiny ? 0 : warmup, tiny ? 1 : runs, tiny, {}};
    if (!json.empty()) b.json.open(json);
    std::printf("bench_kernels on %s: median of %d runs after %d warm-up\n", d.name.c_str(), b.runs, b.warmup);
    auto want = [&](const char* name) { return op == "all" || op == name; };
    // GPU: BERT-large at batch 64 × seq 512 and GPT-2 124M at 16 × 1024; the CPU: tiny.
    const int64_t s = tiny ? 16 : 1;
    if (want("layernorm")) layernorm(b, 64 * 512 / (s * s), tiny ? 64 : 1024), layernorm(b, 16 * 1024 / (s * s), tiny ? 64 : 768);
    if (want("softmax")) softmax(b, tiny ? 1 : 64, tiny ? 2 : 16, tiny ? 32 : 128, false), softmax(b, tiny ? 1 : 16, tiny ? 2 : 12, tiny ? 32 : 1024, true);
    if (want("bias_gelu"))
      bias_gelu(b, 64 * 512 / (s * s), tiny ? 64 : 4096, ops::Gelu::erf), bias_gelu(b, 16 * 1024 / (s * s), tiny ? 64 : 3072, ops::Gelu::tanh);
    if (want("classifier")) classifier(b, tiny ? 4 : 16 * 1024, tiny ? 1001 : 50257, tiny ? 1008 : 50304), classifier(b, tiny ? 4 : 64 * 80, tiny ? 1001 : 30522, tiny ? 1008 : 30528);
    if (want("attention")) {
      using M = ops::AttentionMask;
      const ops::AttentionShape bert{tiny ? 1 : 64, tiny ? 32 : 512, tiny ? 2 : 16, tiny ? 8 : 64, M::padding, 0.125f, 0.1f};
      const ops::AttentionShape gpt{tiny ? 1 : 16, tiny ? 32 : 1024, tiny ? 2 : 12, tiny ? 8 : 64, M::causal, 0.125f, 0.0f};
      attention(b, bert, true, "bert-large"), attention(b, gpt, true, "gpt2");
      if (d.cuda) attention(b, bert, false, "bert-large"), attention(b, gpt, false, "gpt2");
    }
    if (want("optimizer")) optimizer(b, tiny ? 100000 : 124439808);
    if (want("embedding")) embedding(b, tiny ? 2 : 64, tiny ? 16 : 512, tiny ? 32 : 1024, tiny ? 1000 : 30522);
    synchronize(d);
    close_device(d);
    return 0;
  });
}
