// The layers of trainer/tensor_parallel/layers.h on one rank (a group of one: the layer the model runs
// without tensor parallelism), against their definitions in double precision: the linear layer
// with and without its bias, with either GELU, and its backward pass (the input gradient written
// or accumulated, the weight and bias gradients accumulated); the embedding's backward pass
// through its row groups; and gather_rows / reduce_rows, which leave a group of one's rows alone.
// Split over 2 and 4 ranks, each against this single-rank layer: layers_mpi_test.cpp.
#include "trainer/tensor_parallel/layers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "expect_close.h"
#include "fixtures.h"
#include "trainer/reference.h"

namespace pretrain::layers_test {
namespace {

using namespace kernels;
using reference::Vec;
using testing::expect_close;
using testing::random_floats;

const Device kCpu{};

// x · Wᵀ (+ b) in double: X [N, IC], W [OC, IC] as nn.Linear keeps it.
std::vector<double> linear_reference(const std::vector<float>& X, const std::vector<float>& W, const float* b, int64_t N,
                                     int64_t IC, int64_t OC) {
  std::vector<double> out(size_t(N * OC));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t o = 0; o < OC; ++o) {
      double s = b ? b[o] : 0.0;
      for (int64_t i = 0; i < IC; ++i) s += double(X[size_t(r * IC + i)]) * double(W[size_t(o * IC + i)]);
      out[size_t(r * OC + o)] = s;
    }
  return out;
}

// Row counts past one row chunk, so the bias gradient sums more than one partial per column.
constexpr int64_t N = kRowChunk + 5, IC = 13, OC = 7;

TEST(Layers, LinearWithAndWithoutBias) {
  const auto X = random_floats(N * IC, 1), W = random_floats(OC * IC, 2), b = random_floats(OC, 3);
  std::vector<float> out(N * OC, 9.0f), plain(N * OC, 9.0f);
  linear(kCpu, out.data(), X.data(), W.data(), b.data(), N, IC, OC);
  linear(kCpu, plain.data(), X.data(), W.data(), nullptr, N, IC, OC);  // a row-parallel rank but the first
  const auto want = linear_reference(X, W, b.data(), N, IC, OC), want_plain = linear_reference(X, W, nullptr, N, IC, OC);
  for (size_t i = 0; i < out.size(); ++i) {
    expect_close(want[i], out[i], 1e-5, "linear");
    expect_close(want_plain[i], plain[i], 1e-5, "linear without bias");
  }
}

// Both GELUs: pre holds x · Wᵀ + b, out its GELU (tanh through the GEMM's epilogue, erf after it).
TEST(Layers, LinearGeluKeepsThePreActivation) {
  const auto X = random_floats(N * IC, 4), W = random_floats(OC * IC, 5), b = random_floats(OC, 6);
  const auto want = linear_reference(X, W, b.data(), N, IC, OC);
  for (Gelu act : {Gelu::tanh, Gelu::erf}) {
    std::vector<float> out(N * OC), pre(N * OC);
    linear_gelu(kCpu, out.data(), pre.data(), act, X.data(), W.data(), b.data(), N, IC, OC);
    for (size_t i = 0; i < out.size(); ++i) {
      expect_close(want[i], pre[i], 1e-5, "pre-activation");
      expect_close(act == Gelu::tanh ? reference::gelu_tanh(want[i]) : reference::gelu_erf(want[i]), out[i], 1e-5,
                   act == Gelu::tanh ? "tanh GELU" : "erf GELU");
    }
  }
}

// dX = dout · W (written, or added to what is there), dW += doutᵀ · X, db += Σ_rows dout; a null
// dX (the first layer's input needs none) is skipped.
TEST(Layers, LinearBackwardWritesOrAccumulatesTheInputGradientAndAddsTheOthers) {
  const auto X = random_floats(N * IC, 7), W = random_floats(OC * IC, 8), dout = random_floats(N * OC, 9);
  std::vector<float> scratch(size_t(bias_scratch_floats(N, OC)));
  std::vector<float> dX(N * IC, 0.5f), dX_acc(N * IC, 0.5f), dW(OC * IC, 0.25f), db(OC, -1.0f);
  linear_backward(kCpu, dX.data(), false, dW.data(), db.data(), dout.data(), X.data(), W.data(), N, IC, OC,
                  scratch.data());
  linear_backward(kCpu, dX_acc.data(), true, dW.data(), db.data(), dout.data(), X.data(), W.data(), N, IC, OC,
                  scratch.data());
  linear_backward(kCpu, nullptr, false, dW.data(), db.data(), dout.data(), X.data(), W.data(), N, IC, OC,
                  scratch.data());
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < IC; ++i) {
      double s = 0;
      for (int64_t o = 0; o < OC; ++o) s += double(dout[size_t(r * OC + o)]) * double(W[size_t(o * IC + i)]);
      expect_close(s, dX[size_t(r * IC + i)], 1e-5, "dX");
      expect_close(0.5 + s, dX_acc[size_t(r * IC + i)], 1e-5, "dX accumulated");
    }
  for (int64_t o = 0; o < OC; ++o) {
    double sb = 0;
    for (int64_t r = 0; r < N; ++r) sb += dout[size_t(r * OC + o)];
    expect_close(-1.0 + 3 * sb, db[size_t(o)], 1e-5, "db after three passes");
    for (int64_t i = 0; i < IC; ++i) {
      double s = 0;
      for (int64_t r = 0; r < N; ++r) s += double(dout[size_t(r * OC + o)]) * double(X[size_t(r * IC + i)]);
      expect_close(0.25 + 3 * s, dW[size_t(o * IC + i)], 1e-5, "dW after three passes");
    }
  }
}

// A group of one (no tensor parallelism): gather_rows reads the region itself, reduce_rows leaves
// it as it is, and a row-parallel product lands in the region.
TEST(Layers, AGroupOfOneNeitherGathersNorReduces) {
  const ModelShard one{};
  std::vector<float> region = random_floats(N * IC, 10), full(N * IC, 7.0f);
  const std::vector<float> before = region;
  EXPECT_EQ(gather_rows(kCpu, one, region.data(), full.data(), N, IC), region.data());
  reduce_rows(kCpu, one, full.data(), region.data(), N, IC);
  EXPECT_EQ(region, before);
  EXPECT_TRUE(std::all_of(full.begin(), full.end(), [](float x) { return x == 7.0f; })) << "the scratch was touched";
  EXPECT_EQ(partial_target(one, region.data(), full.data()), region.data());
}

// Enough rows that some groups are cut into segments (id 0 and every position land more than
// kRowChunk rows each) and others are summed directly (the rarer ids).
TEST(Layers, EmbeddingAndBiasGradientsSumRowsInOrder) {
  const int64_t T = 4, N = T * (2 * kRowChunk + 3), C = 70, V = 5;
  std::vector<int32_t> ids(N), types(N, 1);
  for (int64_t r = 0; r < N; ++r) ids[size_t(r)] = r % 3 == 0 ? 0 : int32_t(1 + (r * 7) % (V - 1));
  auto dout = random_floats(N * C, 9);
  std::vector<float> dwte(V * C, 0), dwpe(T * C, 0), dwtt(2 * C, 0), db(C, 0);
  std::vector<float> partial(size_t(std::max(embedding_scratch_floats(N, C), bias_scratch_floats(N, C))));
  std::vector<int32_t> index(size_t(embedding_scratch_ints(N)));
  vocab_parallel_embedding_backward(kCpu, {}, VocabularyShard::of(V, {}), {dwte.data(), dwpe.data(), dwtt.data()},
                                    dout.data(), nullptr, {ids.data(), types.data(), nullptr}, N, T, C,
                                    {partial.data(), index.data()});
  bias_backward(kCpu, db.data(), dout.data(), N, C, partial.data());
  for (int64_t c = 0; c < C; ++c) {
    Vec wte(V, 0), wpe(T, 0);
    double tt = 0, bias = 0;
    for (int64_t r = 0; r < N; ++r) {
      const double d = dout[size_t(r * C + c)];
      wte[size_t(ids[size_t(r)])] += d, wpe[size_t(r % T)] += d, tt += d, bias += d;
    }
    for (int64_t v = 0; v < V; ++v) expect_close(wte[size_t(v)], dwte[size_t(v * C + c)], 1e-5, "dwte");
    for (int64_t t = 0; t < T; ++t) expect_close(wpe[size_t(t)], dwpe[size_t(t * C + c)], 1e-5, "dwpe");
    expect_close(tt, dwtt[size_t(C + c)], 1e-5, "dwtt");
    EXPECT_EQ(dwtt[size_t(c)], 0.0f) << "type 0 never appears";
    expect_close(bias, db[size_t(c)], 1e-5, "db");
  }
}

// position_ids (a packed row's, restarting at each instance) pick the position row, forward and
// backward, instead of the column.
TEST(Layers, EmbeddingReadsPositionIdsWhenGiven) {
  const int64_t N = 10, T = 5, C = 40, V = 6;
  const std::vector<int32_t> ids = {0, 5, 2, 2, 1, 3, 4, 0, 1, 5}, types = {0, 0, 1, 1, 1, 0, 0, 1, 1, 0};
  const std::vector<int32_t> positions = {0, 1, 2, 0, 1, 0, 1, 2, 3, 0};  // instances of 3, 2, 4 and 1 tokens
  const auto wte = random_floats(V * C, 13), wpe = random_floats(T * C, 14), wtt = random_floats(2 * C, 15);
  const auto dout = random_floats(N * C, 16);
  std::vector<float> out(N * C), dwte(V * C, 0), dwpe(T * C, 0), dwtt(2 * C, 0);
  std::vector<float> partial(size_t(embedding_scratch_floats(N, C)));
  std::vector<int32_t> index(size_t(embedding_scratch_ints(N)));
  launch(kCpu, N, EmbedForward{out.data(), ids.data(), types.data(), wte.data(), wpe.data(), wtt.data(), T, C, 0, 0,
                               positions.data()});
  vocab_parallel_embedding_backward(kCpu, {}, VocabularyShard::of(V, {}), {dwte.data(), dwpe.data(), dwtt.data()},
                                    dout.data(), nullptr, {ids.data(), types.data(), positions.data()}, N, T, C,
                                    {partial.data(), index.data()});
  for (int64_t c = 0; c < C; ++c) {
    Vec want_dwpe(T, 0);
    for (int64_t r = 0; r < N; ++r) {
      const size_t id = size_t(ids[size_t(r)]), pos = size_t(positions[size_t(r)]), ty = size_t(types[size_t(r)]);
      const double want = double(wte[id * C + c]) + wpe[pos * C + c] + wtt[ty * C + c];
      expect_close(want, out[size_t(r * C + c)], 1e-6, "embedding at position_ids");
      want_dwpe[pos] += dout[size_t(r * C + c)];
    }
    for (int64_t t = 0; t < T; ++t) expect_close(want_dwpe[size_t(t)], dwpe[size_t(t * C + c)], 1e-5, "dwpe at position_ids");
  }
}

}  // namespace
}  // namespace pretrain::layers_test
