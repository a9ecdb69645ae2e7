// DataParallel (trainer/parallel/data_parallel.h) on CPU tensors over 4 real ranks: ctest runs this
// under `mpirun -np 4` (label "mpi"). Every rank holds gradients of small integers that depend on
// its coordinates, so each sum is exact and says which ranks it added: the data group's sum
// in buckets during a backward pass, in one all-reduce after it and as ZeRO-1's reduce-scatter
// (then the updated shards all-gathered); under sequence parallelism the LayerNorms' partial sums
// over the tensor group first; across a pipeline the tied word embeddings' two gradients.
#include "trainer/parallel/data_parallel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/communicator.h"
#include "fixtures.h"
#include "trainer/parallel/grid.h"

namespace pretrain::data_parallel_mpi_test {
namespace {

using testing::tiny_model;

const Device kCpu{};

// The gradient a rank holds at element j before any reduction.
float own(int64_t j, int world_rank) { return float(j % 7 + world_rank); }

// A rank's part of the grid's model, its tensor group, the model's shard, its optimizer.
struct Replica {
  Grid grid;
  TensorGroup tensor;
  Model model;
  Optimizer optimizer;
  Replica(const GridShape& shape, ModelKind kind, bool zero)
      : grid(Communicator::world(), shape),
        tensor(grid.tensor(), kCpu),
        model(config(kind), kCpu, shard(kind, grid, tensor)),
        optimizer(OptimizerConfig{}, model, &grid.data(), zero, &grid.model(), &grid.tensor()) {
    for (int64_t j = 0; j < model.num_parameters(); ++j) model.grads()[j] = own(j, grid.world().rank());
  }
  static ModelConfig config(ModelKind kind) {
    ModelConfig c = tiny_model(kind);
    c.layers = 2;
    return c;
  }
  static ModelShard shard(ModelKind kind, const Grid& g, TensorGroup& t) {
    ModelShard s = model_shard(config(kind), g.shape(), {g.tensor_rank(), g.data_rank(), g.pipeline_rank()});
    s.tensor = &t;
    return s;
  }
  // The world ranks of this rank's data group (its tensor and stage at every data rank).
  std::vector<int> data_ranks() const {
    std::vector<int> ranks;
    for (int d = 0; d < grid.data_size(); ++d)
      ranks.push_back(grid_rank({grid.tensor_rank(), d, grid.pipeline_rank()}, grid.tensor_size(), grid.data_size()));
    return ranks;
  }
};

// Σ over `ranks` of own(j, rank).
float sum_of(int64_t j, const std::vector<int>& ranks) {
  float s = 0;
  for (int r : ranks) s += own(j, r);
  return s;
}

bool distributed() { return Communicator::world().size() == 4; }

// A GPT step's backward pass with a loss scale of 0 adds nothing to the gradients but hands
// their ranges over as it goes: the buckets reduce them while it runs.
void backward_pass_adding_nothing(Model& model) {
  const int64_t B = 2, T = 8;
  std::vector<int32_t> ids(size_t(B * T)), targets(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) ids[size_t(i)] = int32_t(i % 20), targets[size_t(i)] = int32_t((i + 1) % 20);
  ModelInputs in;
  in.B = B, in.T = T, in.ids = ids.data(), in.targets = targets.data();
  model.step(in, true, 0.0f, 0);
}

// Data parallel 4 over the whole model: bucketed (during the backward pass) or in one all-reduce,
// every gradient is the sum over the 4 ranks.
TEST(DataParallel, TheDataGroupSumsEveryGradientInBucketsOrInOne) {
  if (!distributed()) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  for (double bucket_mb : {0.002, 0.0}) {
    Replica r({}, ModelKind::gpt, false);
    ASSERT_EQ(r.grid.data_size(), 4);
    DataParallel dp(r.grid, r.tensor, r.model, r.optimizer, bucket_mb);
    dp.attach();
    backward_pass_adding_nothing(r.model);
    dp.reduce_gradients();
    for (int64_t j = 0; j < r.model.num_parameters(); ++j)
      ASSERT_EQ(r.model.grads()[j], sum_of(j, {0, 1, 2, 3})) << "element " << j << ", buckets of " << bucket_mb << " MB";
  }
}

// ZeRO-1: each data rank receives the sum of its own shard of the gradients; after an applied
// step every rank gets every rank's updated shard of the weights (a skipped one sends nothing).
TEST(DataParallel, ZeroOneReduceScattersTheGradientsAndGathersTheWeights) {
  if (!distributed()) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  Replica r({}, ModelKind::bert, true);
  DataParallel dp(r.grid, r.tensor, r.model, r.optimizer, 25);
  dp.attach();
  dp.reduce_gradients();
  const int64_t lo = r.optimizer.shard_begin(), hi = r.optimizer.shard_end(), n = r.model.num_parameters();
  for (int64_t j = lo; j < hi; ++j) ASSERT_EQ(r.model.grads()[j], sum_of(j, {0, 1, 2, 3})) << "element " << j;

  const int me = r.grid.data_rank();
  for (int64_t j = 0; j < n; ++j) r.model.weights()[j] = j >= lo && j < hi ? float(me + 1) : -1.0f;
  dp.gather_weights(false);
  for (int64_t j = 0; j < n; ++j)
    ASSERT_EQ(r.model.weights()[j], j >= lo && j < hi ? float(me + 1) : -1.0f) << "a skipped step gathered";
  dp.gather_weights(true);
  std::vector<int64_t> begin{0};
  for (int64_t size : r.optimizer.shard_sizes()) begin.push_back(begin.back() + size);
  ASSERT_EQ(begin.back(), n);
  for (int k = 0; k < 4; ++k)
    for (int64_t j = begin[size_t(k)]; j < begin[size_t(k) + 1]; ++j)
      ASSERT_EQ(r.model.weights()[j], float(k + 1)) << "element " << j << " of rank " << k << "'s shard";
}

// Tensor 2 × data 2 with sequence parallelism: the LayerNorms' gradients are partial sums over the
// rows a tensor rank saw, so they add over the tensor group, then over the data group (all four
// ranks); every other gradient over the data group only (the tensor ranks hold other shards).
TEST(DataParallel, SequenceParallelLayerNormsAddOverTheTensorGroupFirst) {
  if (!distributed()) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  Replica r({.tensor = 2, .sequence_parallel = true}, ModelKind::bert, false);
  DataParallel dp(r.grid, r.tensor, r.model, r.optimizer, 25);
  dp.attach();
  dp.reduce_gradients();
  const std::vector<int> data = r.data_ranks();
  int partial = 0;
  for (const ParamInfo& p : r.model.params()) {
    partial += p.sequence_partial;
    for (int64_t j = p.offset; j < p.offset + p.numel; ++j)
      ASSERT_EQ(r.model.grads()[j], p.sequence_partial ? sum_of(j, {0, 1, 2, 3}) : sum_of(j, data))
          << p.name << " element " << j - p.offset;
  }
  EXPECT_GT(partial, 0) << "no LayerNorm under sequence parallelism?";
}

// Pipeline 2 × data 2: the first stage's word embeddings and the last stage's tied copy (the LM
// head's) each end with the sum of both stages' gradients over both data ranks; the other tensors
// with their data group's.
TEST(DataParallel, ThePipelinesEndsShareTheTiedEmbeddingsGradient) {
  if (!distributed()) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  Replica r({.pipeline = 2}, ModelKind::gpt, false);
  ASSERT_EQ(r.grid.data_size(), 2);
  DataParallel dp(r.grid, r.tensor, r.model, r.optimizer, 25);
  dp.attach();
  dp.reduce_gradients();
  const ParamInfo& wte = r.model.param("transformer.wte.weight");
  EXPECT_EQ(wte.tied_copy, !r.grid.first_stage());
  // The same element of the other stage's copy sits at that copy's own offset: add the values
  // the four ranks held there.
  const ModelConfig c = Replica::config(ModelKind::gpt);
  const Model other(c, model_shard(c, r.grid.shape(), {0, 0, 1 - r.grid.pipeline_rank()}), Model::Unallocated{});
  const int64_t other_offset = other.param("transformer.wte.weight").offset;
  for (int64_t e = 0; e < wte.numel; ++e) {
    float want = 0;
    for (int d = 0; d < 2; ++d) {
      want += own(wte.offset + e, grid_rank({0, d, r.grid.pipeline_rank()}, 1, 2));
      want += own(other_offset + e, grid_rank({0, d, 1 - r.grid.pipeline_rank()}, 1, 2));
    }
    ASSERT_EQ(r.model.grads()[wte.offset + e], want) << "word embedding element " << e;
  }
  const std::vector<int> data = r.data_ranks();
  for (const ParamInfo& p : r.model.params()) {
    if (p.name == wte.name) continue;
    for (int64_t j = p.offset; j < p.offset + p.numel; ++j)
      ASSERT_EQ(r.model.grads()[j], sum_of(j, data)) << p.name << " element " << j - p.offset;
  }
}

}  // namespace
}  // namespace pretrain::data_parallel_mpi_test
