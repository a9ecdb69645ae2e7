// The tensor-parallel layers (trainer/tensor_parallel/layers.h) against the single-rank layer, forward and
// backward, at tensor 2 and 4, with and without sequence parallelism: column- and row-parallel
// linears, the vocabulary-parallel embedding and cross-entropy (and its accuracy count). Run by ctest under
// `mpirun -np 4` (label "mpi"): the world splits into groups of 2 and of 4, every rank computes
// the whole layer on one rank as the reference and its own shard through the group, and checks
// its part. The inputs are the same on every rank (seeded), the tolerances those of fp32 sums
// taken in another order; the cross-entropy must match bit for bit (its Σ exp is reduced in double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/communicator.h"
#include "fixtures.h"
#include "trainer/backend.h"
#include "trainer/kernels.h"
#include "trainer/tensor_parallel/layers.h"
#include "trainer/tensor_parallel/tensor_group.h"

namespace pretrain::layers_mpi_test {
namespace {

using Floats = std::vector<float>;
using testing::random_floats;

// Largest |a − b| over the largest |b|: what "equal up to rounding" means here.
double relative_error(const Floats& a, const Floats& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return worst / scale;
}

// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of a row-major matrix with `width` columns.
Floats block(const Floats& m, int64_t width, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  Floats out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(m.begin() + (r0 + r) * width + c0, cols, out.begin() + r * cols);
  return out;
}

// A group of `size` consecutive world ranks (Megatron's tensor groups) and the shard it makes.
struct Group {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<TensorGroup> tensor;
  ModelShard shard;
};

constexpr int64_t N = 8, IC = 16, OC = 24;
constexpr double kTol = 2e-6;

// The single-rank linear layer's output and gradients, which the parallel ones must reproduce.
struct WholeLinear {
  Floats out, dX, dW, db;
};

class ParallelLayers : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    const Communicator& world = Communicator::world();
    if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
    device_ = open_device("cpu", 1);
    const auto [size, sp] = GetParam();
    group_.comm = world.split(world.rank() / size, world.rank() % size);
    group_.tensor = std::make_unique<TensorGroup>(*group_.comm, device_);
    group_.shard.tensor_rank = group_.comm->rank();
    group_.shard.tensor_size = size;
    group_.shard.sequence_parallel = sp;
    group_.shard.tensor = group_.tensor.get();
  }
  int t() const { return group_.shard.tensor_size; }
  int r() const { return group_.shard.tensor_rank; }
  bool sp() const { return group_.shard.sequence_parallel; }
  // The region's rows of N: all, or this rank's N/t under sequence parallelism.
  int64_t region_rows(int64_t N) const { return sp() ? N / t() : N; }
  int64_t region_first(int64_t N) const { return sp() ? r() * N / t() : 0; }

  WholeLinear whole_linear(const Floats& X, const Floats& W, const Floats& b, const Floats& dout) {
    WholeLinear w{Floats(N * OC), Floats(N * IC), Floats(OC * IC, 0.0f), Floats(OC, 0.0f)};
    linear(device_, w.out.data(), X.data(), W.data(), b.data(), N, IC, OC);
    linear_backward(device_, w.dX.data(), false, w.dW.data(), w.db.data(), dout.data(), X.data(), W.data(), N, IC, OC,
                    reduce_.data());
    return w;
  }

  Device device_;
  Group group_;
  const ModelShard one_{};  // the single-rank layer
  // The column reductions' scratch (the model carves it from its activations): ample for these
  // tests' N rows of at most OC columns (the embedding test's C is smaller).
  Floats reduce_ = Floats(size_t(std::max(bias_scratch_floats(N, OC), embedding_scratch_floats(N, OC))));
  std::vector<int32_t> index_ = std::vector<int32_t>(size_t(embedding_scratch_ints(N)));
  EmbeddingScratch embed_scratch() { return {reduce_.data(), index_.data()}; }
};

TEST_P(ParallelLayers, ColumnParallelLinearEqualsTheWholeLinear) {
  const Floats X = random_floats(N * IC, 1), W = random_floats(OC * IC, 2), b = random_floats(OC, 3),
               dout = random_floats(N * OC, 4);
  const auto [out, dX, dW, db] = whole_linear(X, W, b, dout);
  // This rank's OCl output columns: rows of W and b.
  const int64_t OCl = OC / t(), R = region_rows(N), r0 = region_first(N);
  const Floats Wl = block(W, IC, r() * OCl, OCl, 0, IC), bl = block(b, 1, r() * OCl, OCl, 0, 1);
  const Floats region = block(X, IC, r0, R, 0, IC);
  Floats full(N * IC), outl(N * OCl), scratch(N * IC), dregion(R * IC), dWl(OCl * IC, 0.0f), dbl(OCl, 0.0f);
  const float* Xused = column_parallel_forward(device_, group_.shard, outl.data(), region.data(), full.data(),
                                               Wl.data(), bl.data(), N, IC, OCl);
  EXPECT_LT(relative_error(outl, block(out, OC, 0, N, r() * OCl, OCl)), kTol);
  const Floats doutl = block(dout, OC, 0, N, r() * OCl, OCl);
  column_parallel_backward(device_, group_.shard, dregion.data(), scratch.data(), dWl.data(), dbl.data(), doutl.data(),
                           Xused, Wl.data(), N, IC, OCl, reduce_.data());
  EXPECT_LT(relative_error(dregion, block(dX, IC, r0, R, 0, IC)), kTol) << "input gradient";
  EXPECT_LT(relative_error(dWl, block(dW, IC, r() * OCl, OCl, 0, IC)), kTol) << "weight gradient";
  EXPECT_LT(relative_error(dbl, block(db, 1, r() * OCl, OCl, 0, 1)), kTol) << "bias gradient";
}

TEST_P(ParallelLayers, ColumnParallelLinearWithGeluEqualsTheWholeOne) {
  const Floats X = random_floats(N * IC, 11), W = random_floats(OC * IC, 12), b = random_floats(OC, 13);
  Floats pre(N * OC), out(N * OC);
  linear_gelu(device_, out.data(), pre.data(), kernels::Gelu::erf, X.data(), W.data(), b.data(), N, IC, OC);
  const int64_t OCl = OC / t(), R = region_rows(N), r0 = region_first(N);
  const Floats Wl = block(W, IC, r() * OCl, OCl, 0, IC), bl = block(b, 1, r() * OCl, OCl, 0, 1);
  const Floats region = block(X, IC, r0, R, 0, IC);
  Floats full(N * IC), prel(N * OCl), outl(N * OCl);
  column_parallel_forward(device_, group_.shard, prel.data(), region.data(), full.data(), Wl.data(), bl.data(), N, IC,
                          OCl, outl.data(), kernels::Gelu::erf);
  EXPECT_LT(relative_error(prel, block(pre, OC, 0, N, r() * OCl, OCl)), kTol);
  EXPECT_LT(relative_error(outl, block(out, OC, 0, N, r() * OCl, OCl)), kTol);
}

TEST_P(ParallelLayers, RowParallelLinearEqualsTheWholeLinear) {
  const Floats X = random_floats(N * IC, 21), W = random_floats(OC * IC, 22), b = random_floats(OC, 23),
               dout = random_floats(N * OC, 24);
  const auto [out, dX, dW, db] = whole_linear(X, W, b, dout);
  // This rank's ICl input columns: columns of X and W; the bias whole.
  const int64_t ICl = IC / t(), R = region_rows(N), r0 = region_first(N);
  const Floats Xl = block(X, IC, 0, N, r() * ICl, ICl), Wl = block(W, IC, 0, OC, r() * ICl, ICl);
  Floats region(R * OC), scratch(N * OC), full(N * OC), dXl(N * ICl), dWl(OC * ICl, 0.0f), dbw(OC, 0.0f);
  row_parallel_forward(device_, group_.shard, region.data(), scratch.data(), Xl.data(), Wl.data(), b.data(), N, ICl, OC);
  EXPECT_LT(relative_error(region, block(out, OC, r0, R, 0, OC)), kTol);
  const Floats dregion = block(dout, OC, r0, R, 0, OC);
  row_parallel_backward(device_, group_.shard, dXl.data(), dregion.data(), full.data(), dWl.data(), dbw.data(),
                        Xl.data(), Wl.data(), N, ICl, OC, reduce_.data());
  EXPECT_LT(relative_error(dXl, block(dX, IC, 0, N, r() * ICl, ICl)), kTol) << "input gradient";
  EXPECT_LT(relative_error(dWl, block(dW, IC, 0, OC, r() * ICl, ICl)), kTol) << "weight gradient";
  EXPECT_LT(relative_error(dbw, db), kTol) << "bias gradient (whole on every rank)";
}

TEST_P(ParallelLayers, VocabularyParallelEmbeddingEqualsTheWholeLookup) {
  constexpr int64_t V = 300, T = 4, C = 8;  // 300 ids: the last rank's rows are partly padding
  std::mt19937 rng(31);
  std::vector<int32_t> ids(N), types(N);
  for (auto& id : ids) id = int32_t(rng() % V);
  ids[0] = V - 1, ids[1] = 0;
  for (auto& ty : types) ty = int32_t(rng() % 2);
  const Floats words = random_floats(V * C, 32), positions = random_floats(T * C, 33), type_table = random_floats(2 * C, 34),
               dout = random_floats(N * C, 35);
  // Packed rows' position_ids restart at each instance: here T−1 − column, so a lookup that
  // ignored them (and took the column) would read other rows of the table.
  std::vector<int32_t> position_ids(N);
  for (int64_t r = 0; r < N; ++r) position_ids[size_t(r)] = int32_t(T - 1 - r % T);
  for (const auto& [bert, packed] : std::initializer_list<std::pair<bool, bool>>{{true, false}, {false, false}, {true, true}}) {
    const EmbeddingInputs in{ids.data(), bert ? types.data() : nullptr, packed ? position_ids.data() : nullptr};
    const VocabularyShard whole = VocabularyShard::of(V, one_);
    Floats out(N * C), dwords(V * C, 0.0f), dpos(T * C, 0.0f), dtypes(2 * C, 0.0f);
    vocab_parallel_embedding_forward(device_, one_, whole, out.data(), nullptr, in,
                                     {words.data(), positions.data(), bert ? type_table.data() : nullptr}, N, T, C);
    vocab_parallel_embedding_backward(device_, one_, whole, {dwords.data(), dpos.data(), bert ? dtypes.data() : nullptr},
                                      dout.data(), nullptr, in, N, T, C, embed_scratch());
    for (int64_t r = 0; r < N; ++r) {
      const int64_t pos = packed ? position_ids[size_t(r)] : r % T;
      const float want = words[size_t(ids[size_t(r)] * C)] + positions[size_t(pos * C)] +
                         (bert ? type_table[size_t(types[size_t(r)] * C)] : 0.0f);
      EXPECT_NEAR(out[size_t(r * C)], want, 1e-6f) << "row " << r << (packed ? ": position_ids" : ": column positions");
    }
    // This rank's rows of the padded vocabulary (zeros past the real ids).
    const VocabularyShard mine = VocabularyShard::of(V, group_.shard);
    EXPECT_EQ(mine.rows * t(), padded_vocab(V, t()));
    Floats wl(mine.rows * C, 0.0f);
    for (int64_t i = 0; i < mine.rows && mine.begin + i < V; ++i)
      std::copy_n(words.begin() + (mine.begin + i) * C, C, wl.begin() + i * C);
    const int64_t R = region_rows(N), r0 = region_first(N);
    Floats region(R * C), scratch(N * C), full(N * C), dwl(mine.rows * C, 0.0f), dpl(T * C, 0.0f), dtl(2 * C, 0.0f);
    vocab_parallel_embedding_forward(device_, group_.shard, mine, region.data(), scratch.data(), in,
                                     {wl.data(), positions.data(), bert ? type_table.data() : nullptr}, N, T, C);
    EXPECT_LT(relative_error(region, block(out, C, r0, R, 0, C)), kTol) << (bert ? "bert" : "gpt");
    const Floats dregion = block(dout, C, r0, R, 0, C);
    vocab_parallel_embedding_backward(device_, group_.shard, mine, {dwl.data(), dpl.data(), bert ? dtl.data() : nullptr},
                                      dregion.data(), full.data(), in, N, T, C, embed_scratch());
    const int64_t real = std::max<int64_t>(0, std::min(mine.rows, V - mine.begin));
    EXPECT_LT(relative_error(block(dwl, C, 0, real, 0, C), block(dwords, C, mine.begin, real, 0, C)), kTol);
    EXPECT_EQ(block(dwl, C, real, mine.rows - real, 0, C), Floats((mine.rows - real) * C, 0.0f)) << "padding rows";
    EXPECT_LT(relative_error(dpl, dpos), kTol) << "positions";
    if (bert) {
      EXPECT_LT(relative_error(dtl, dtypes), kTol) << "token types";
    }
  }
}

TEST_P(ParallelLayers, VocabularyParallelCrossEntropyEqualsTheWholeOneBitForBit) {
  constexpr int64_t V = 300, n = 6;
  const Floats logits = random_floats(n * V, 41, 3.0f);
  std::vector<int32_t> targets = {0, 299, 150, -1, 7, 255};  // one ignored row; ids on every rank
  const float dloss = 0.125f;
  const VocabularyShard whole = VocabularyShard::of(V, one_);
  Floats grad = logits, losses(n);
  vocab_parallel_cross_entropy(device_, one_, whole, grad.data(), losses.data(), targets.data(), n, dloss, nullptr);
  const VocabularyShard mine = VocabularyShard::of(V, group_.shard);
  Floats gl(n * mine.rows, 0.0f), ll(n), scratch(4 * n);
  const int64_t real = std::max<int64_t>(0, std::min(mine.rows, V - mine.begin));
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(logits.begin() + i * V + mine.begin, real, gl.begin() + i * mine.rows);
  vocab_parallel_cross_entropy(device_, group_.shard, mine, gl.data(), ll.data(), targets.data(), n, dloss,
                               scratch.data());
  EXPECT_EQ(ll, losses) << "losses";
  EXPECT_EQ(block(gl, mine.rows, 0, n, 0, real), block(grad, V, 0, n, mine.begin, real)) << "logits' gradient";
  EXPECT_EQ(block(gl, mine.rows, 0, n, real, mine.rows - real), Floats(n * (mine.rows - real), 0.0f)) << "padding";
}

// The MLM accuracy of an evaluation: rows whose target has the largest real logit, counted alike by
// the whole layer and every shard of the group, and as a plain argmax over the whole row counts them.
TEST_P(ParallelLayers, VocabularyParallelCorrectCountsTheRowsWhoseTargetHasTheLargestLogit) {
  constexpr int64_t V = 300, n = 6;
  Floats logits = random_floats(n * V, 43, 3.0f);
  const std::vector<int32_t> targets = {0, 299, 150, -1, 7, 255};
  logits[0 * V + 0] = 50.0f, logits[2 * V + 150] = 50.0f;  // hits on the first and a middle id
  // Row 1: every logit negative, the target's the largest real one; padding ids (0 in the shard)
  // must not beat it.
  for (int64_t v = 0; v < V; ++v) logits[size_t(V + v)] = -5.0f - std::fabs(logits[size_t(V + v)]);
  logits[V + 299] = -1.0f;
  logits[4 * V + 8] = 60.0f;  // row 4 misses: id 8 beats its target 7 (whatever 7's logit)
  int64_t expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[size_t(i)] < 0) continue;
    const auto row = logits.begin() + i * V;
    expected += std::max_element(row, row + V) - row == targets[size_t(i)];
  }
  ASSERT_EQ(expected, 3);  // rows 0, 1, 2 (the random rows 4 and 5 miss by construction or odds)
  Floats scratch(2 * n);
  EXPECT_EQ(vocab_parallel_correct(device_, one_, VocabularyShard::of(V, one_), logits.data(), targets.data(), n,
                                   scratch.data()),
            expected);
  const VocabularyShard mine = VocabularyShard::of(V, group_.shard);
  Floats gl(n * mine.rows, 0.0f);
  const int64_t real = std::max<int64_t>(0, std::min(mine.rows, V - mine.begin));
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(logits.begin() + i * V + mine.begin, real, gl.begin() + i * mine.rows);
  EXPECT_EQ(vocab_parallel_correct(device_, group_.shard, mine, gl.data(), targets.data(), n, scratch.data()), expected);
}

INSTANTIATE_TEST_SUITE_P(TensorSizes, ParallelLayers,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return "tensor" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sequence_parallel" : "");
                         });

}  // namespace
}  // namespace pretrain::layers_mpi_test
