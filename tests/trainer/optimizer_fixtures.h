// What the optimizer tests (optimizer_test, optimizer_mpi_test) step: a tiny BERT, which has every
// kind of tensor BERT has (embeddings, square and rectangular matrices, biases, LayerNorms) in
// about a thousand floats; fixed values for its arenas come from fixtures.h's fill_normal.
#pragma once
#include "fixtures.h"
#include "trainer/model.h"

namespace pretrain::testing {

inline ModelConfig tiny_bert() {
  ModelConfig c = ModelConfig::preset(ModelKind::bert, "tiny");
  c.layers = 1, c.hidden = 8, c.heads = 2, c.intermediate = 16, c.vocab_size = 13, c.max_positions = 8;
  return c;
}

}  // namespace pretrain::testing
