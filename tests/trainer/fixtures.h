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

inline std::vector<float> random_floats(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::vector<float> v(n);
  fill_normal(v.data(), int64_t(n), seed, stddev);
  return v;
}

}  // namespace pretrain::testing
