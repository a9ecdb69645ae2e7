// What the optimizer tests (optimizer_test, optimizer_mpi_test) step: a tiny BERT, which has every
// kind of tensor BERT has (embeddings, square and rectangular matrices, biases, LayerNorms) in
// about a thousand floats, and fixed values for its arenas drawn from a seed.
#pragma once
#include <cstdint>
#include <random>

#include "trainer/model.h"

namespace pretrain::testing {

inline ModelConfig tiny_bert() {
  ModelConfig c = ModelConfig::preset(ModelKind::bert, "tiny");
  c.layers = 1, c.hidden = 8, c.heads = 2, c.intermediate = 16, c.vocab_size = 13, c.max_positions = 8;
  return c;
}

// x[i] ~ N(0, stddev²), the same on every rank and every run for a seed.
inline void fill_normal(float* x, int64_t n, uint32_t seed, float stddev) {
  std::mt19937 gen{seed};
  std::normal_distribution<float> normal(0.0f, stddev);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(gen);
}

}  // namespace pretrain::testing
