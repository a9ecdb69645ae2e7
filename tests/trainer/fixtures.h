// What the trainer tests build their cases from: the tiny model they step, and fixed values for
// arenas and inputs drawn from a seed. (No GoogleTest here: tests/compat's helpers include it too.)
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "trainer/model.h"

namespace pretrain::testing {

// BERT or GPT-2 at 2 layers, hidden 16 (intermediate 4 × hidden), 2 heads, 23 ids and 16
// positions, dropout off: every kind of tensor the full model has, in a few thousand floats, and
// the same losses on every run.
inline ModelConfig tiny_model(ModelKind kind, int64_t hidden = 16, int64_t vocab = 23) {
  ModelConfig c = ModelConfig::preset(kind, "tiny");
  c.layers = 2, c.hidden = hidden, c.heads = 2, c.intermediate = 4 * hidden, c.vocab_size = vocab, c.max_positions = 16;
  c.hidden_dropout = c.attention_dropout = 0.0f;
  return c;
}

// x[i] ~ N(0, stddev²), the same on every rank and every run for a seed.
inline void fill_normal(float* x, int64_t n, uint32_t seed, float stddev) {
  std::mt19937 gen{seed};
  std::normal_distribution<float> normal(0.0f, stddev);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(gen);
}

// A fixed batch of host int32 tensors for the tiny models (the CPU backend reads host memory): B = 3
// rows of T tokens (ids 3..22), BERT's segment ids, a padding mask (row 1 ends in two padding
// tokens), 3 prediction slots per row (3, 2 and 1 of them used) and NSP labels; GPT's targets.
struct TinyBatch {
  int64_t B = 3, T = 8, P = 3;
  std::vector<int32_t> ids, types, mask, positions, mlm_ids, nsp, targets;
  explicit TinyBatch(uint32_t seed, int64_t tokens = 8) : T(tokens) {
    std::mt19937 gen(seed);
    auto id = [&] { return int32_t(gen() % 20) + 3; };
    for (int64_t i = 0; i < B * T; ++i) ids.push_back(id()), targets.push_back(id());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        types.push_back(t >= T / 2 ? 1 : 0);
        mask.push_back(b == 1 && t >= T - 2 ? 0 : 1);  // sample 1 ends in two padding tokens
      }
    positions = {1, 4, 6, 2, 3, 0, 5, 0, 0};  // sample 0: three predictions, 1: two, 2: one
    mlm_ids = {5, 6, 7, 8, 9, 0, 10, 0, 0};
    nsp = {0, 1, 1};
  }
  ModelInputs inputs(ModelKind kind) const {
    ModelInputs in;
    in.B = B, in.T = T, in.ids = ids.data();
    if (kind == ModelKind::gpt) {
      in.targets = targets.data();
    } else {
      in.types = types.data(), in.mask = mask.data(), in.P = P;
      in.mlm_positions = positions.data(), in.mlm_ids = mlm_ids.data(), in.nsp_labels = nsp.data();
    }
    return in;
  }
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::vector<float> v(n);
  fill_normal(v.data(), int64_t(n), seed, stddev);
  return v;
}

}  // namespace pretrain::testing
