// One training step of our model on the CPU, timed: forward + backward + AdamW on a random batch
// (what scripts/bench/trainer_cpu.sh compares with the same model in PyTorch eager).
//   bench_trainer --kind bert|gpt --model NAME --seq S --batch B [--vocab V] [--predictions P]
//                 [--steps N] [--warmup W] [--threads T]
// Prints one JSON object: median and mean ms/step over the timed steps, FLOPs per step, memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "common/cli.h"
#include "trainer/metrics.h"
#include "trainer/optimizer.h"

using namespace pretrain;

int main(int argc, char** argv) {
  CLI::App app{"Time training steps of our BERT/GPT on the CPU", "bench_trainer"};
  ToolOptions common(app);
  std::string kind_name = "bert", model_name = "small";
  int64_t seq = 128, batch = 8, vocab = 0, predictions = 20;
  int steps = 10, warmup = 2;
  bool recompute = false;
  int64_t lm_head_rows = 0;
  app.add_option("--kind", kind_name);
  app.add_option("--model", model_name);
  app.add_option("--seq", seq);
  app.add_option("--batch", batch);
  app.add_option("--vocab", vocab, "default: 30522 (BERT), 50257 (GPT)");
  app.add_option("--predictions", predictions);
  app.add_option("--steps", steps);
  app.add_option("--warmup", warmup);
  app.add_flag("--recompute", recompute);
  app.add_option("--lm-head-rows", lm_head_rows, "GPT: rows of logits at once (0: the model's default)");
  return run_tool(app, argc, argv, [&] {
    const ModelKind kind = kind_name == "bert" ? ModelKind::bert : ModelKind::gpt;
    ModelConfig c = ModelConfig::preset(kind, model_name);
    c.vocab_size = vocab ? vocab : kind == ModelKind::bert ? 30522 : 50257;
    c.hidden_dropout = c.attention_dropout = 0.0f;  // the peer runs without dropout too
    Device cpu = open_device("cpu", max_threads());
    Model model(c, cpu);
    model.set_recompute(recompute);
    model.set_lm_head_rows(lm_head_rows);
    model.init_weights(1);
    OptimizerConfig oc;
    Optimizer opt(oc, model);
    std::mt19937 gen(1);
    auto ids_of = [&](int64_t n, int64_t lo, int64_t hi) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (auto& x : v) x = int32_t(lo + int64_t(gen() % uint64_t(hi - lo)));
      return v;
    };
    std::vector<int32_t> ids = ids_of(batch * seq, 1000, c.vocab_size), targets = ids_of(batch * seq, 0, c.vocab_size);
    std::vector<int32_t> types(static_cast<size_t>(batch * seq), 0), mask(static_cast<size_t>(batch * seq), 1);
    std::vector<int32_t> positions, mlm_ids = ids_of(batch * predictions, 1000, c.vocab_size), nsp = ids_of(batch, 0, 2);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t p = 0; p < predictions; ++p) positions.push_back(int32_t(1 + p * (seq - 2) / predictions));
    ModelInputs in;
    in.B = batch, in.T = seq, in.ids = ids.data();
    if (kind == ModelKind::gpt) {
      in.targets = targets.data();
    } else {
      in.types = types.data(), in.mask = mask.data(), in.P = predictions, in.mlm_positions = positions.data();
      in.mlm_ids = mlm_ids.data(), in.nsp_labels = nsp.data();
    }
    std::vector<double> ms;
    double loss = 0;
    for (int s = 1; s <= warmup + steps; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      model.zero_grads();
      loss = model.step(in, true, 1.0f, 0).total;
      opt.step(s);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (s > warmup) ms.push_back(t);
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double t : ms) mean += t / double(ms.size());
    const double flops = double(batch) * train_flops_per_sample(c, seq, double(predictions));
    std::printf("{\"impl\": \"ours\", \"kind\": \"%s\", \"model\": \"%s\", \"threads\": %d, \"batch\": %lld, \"seq\": %lld, "
                "\"median_ms\": %.3f, \"mean_ms\": %.3f, \"flops_per_step\": %.6g, \"parameters\": %lld, "
                "\"activation_mb\": %.1f, \"peak_rss_mb\": %.1f, \"loss\": %.5f}\n",
                kind_name.c_str(), model_name.c_str(), max_threads(), static_cast<long long>(batch),
                static_cast<long long>(seq), sorted[sorted.size() / 2], mean, flops,
                static_cast<long long>(model.num_parameters()), double(model.activation_bytes()) / 1e6,
                double(host_peak_rss_bytes()) / 1e6, loss);
    return 0;
  });
}
