// trainer/ops/embedding_grad.h's CPU path (the CUDA op's reference, bit for bit) against the sums in
// double: word, position and token-type gradients accumulated onto existing values, with groups
// larger than one segment (a frequent id, the token types), explicit position ids (packed rows),
// and a vocabulary shard whose rows outside it land nowhere; fp32 and bf16.
#include <gtest/gtest.h>

#include "ops_fixtures.h"
#include "trainer/ops/embedding_grad.h"

namespace pretrain::embedding_grad_test {
namespace {

using namespace ops_testing;
const Device kCpu{};

template <typename T>
class EmbeddingGrad : public ::testing::Test {};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(EmbeddingGrad, Storage);

template <typename T>
void check(bool positions_given, int64_t v0, int64_t vrows) {
  SCOPED_TRACE(::testing::Message() << "positions " << positions_given << " shard " << v0 << "+" << vrows);
  const int64_t N = 300, T_ = 10, C = 12, V = 20, P = 16, TT = 2;
  std::vector<int32_t> ids, types, pos;
  for (int64_t r = 0; r < N; ++r) {
    ids.push_back(r % 3 == 0 ? 0 : int32_t((r * 7) % V));  // id 0: 100 rows, two segments
    types.push_back(int32_t(r % TT));
    pos.push_back(int32_t((r * 5) % P));
  }
  const auto dout = random_tensor<T>(static_cast<size_t>(N * C), 61);
  const int64_t wrows = vrows ? vrows : V;
  auto words = random_tensor<T>(static_cast<size_t>(wrows * C), 62), positions = random_tensor<T>(static_cast<size_t>(P * C), 63),
       tt = random_tensor<T>(static_cast<size_t>(TT * C), 64);
  std::vector<double> want_w = to_double(words), want_p = to_double(positions), want_t = to_double(tt);
  const auto d = to_double(dout);
  for (int64_t r = 0; r < N; ++r) {
    const int64_t id = ids[size_t(r)] - v0, p = positions_given ? pos[size_t(r)] : r % T_;
    for (int64_t c = 0; c < C; ++c) {
      if (vrows == 0 || (id >= 0 && id < vrows)) want_w[size_t(id * C + c)] += d[size_t(r * C + c)];
      want_p[size_t(p * C + c)] += d[size_t(r * C + c)];
      want_t[size_t(types[size_t(r)] * C + c)] += d[size_t(r * C + c)];
    }
  }
  ops::EmbeddingGrad grad(kCpu, N, C);
  grad.backward(ops::EmbeddingBackward<T>{words.data(), positions.data(), tt.data(), dout.data(), ids.data(), types.data(),
                                          positions_given ? pos.data() : nullptr, N, T_, C, v0, vrows});
  // Sums of up to 150 O(1) terms in float, added to O(1) values, one rounding to T.
  const double tol = kUnitRoundoff<T> + 1e-5;
  PRETRAIN_EXPECT_ERRORS(errors(words, want_w, 10.0), tol, tol, "words");
  PRETRAIN_EXPECT_ERRORS(errors(positions, want_p, 10.0), tol, tol, "positions");
  PRETRAIN_EXPECT_ERRORS(errors(tt, want_t, 10.0), tol, tol, "token types");
}

TYPED_TEST(EmbeddingGrad, BertTables) { check<TypeParam>(false, 0, 0); }
TYPED_TEST(EmbeddingGrad, PackedRowPositions) { check<TypeParam>(true, 0, 0); }
TYPED_TEST(EmbeddingGrad, VocabularyShard) { check<TypeParam>(false, 5, 10); }

TEST(EmbeddingGradArgs, MoreRowsThanTheScratchIsAnError) {
  ops::EmbeddingGrad grad(kCpu, 4, 8);
  std::vector<float> x(64);
  std::vector<int32_t> ids(8, 0);
  EXPECT_THROW(grad.backward(ops::EmbeddingBackward<float>{x.data(), nullptr, nullptr, x.data(), ids.data(), nullptr,
                                                           nullptr, 8, 8, 8}),
               Error);
}

}  // namespace
}  // namespace pretrain::embedding_grad_test
