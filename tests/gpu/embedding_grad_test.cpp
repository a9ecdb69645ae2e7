// trainer/ops/embedding_grad.h on CUDA (CUB's grouping on the device) against its CPU path
// (CTest label "gpu"; skips without a device): the same bits, as the sums run in the same order
// — BERT's three tables at batch 32 × 128 with a skewed id distribution (padding and [CLS]-like
// ids in groups of thousands of rows, many segments), packed rows' position ids, a vocabulary
// shard, fp32 and bf16; and the same bits on a second run.
#include <gtest/gtest.h>

#include <cstring>

#include "ops_fixtures.h"
#include "trainer/ops/embedding_grad.h"

namespace pretrain::gpu_embedding_grad_test {
namespace {

using namespace ops_testing;

template <typename T>
class EmbeddingGradGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(EmbeddingGradGpu, Storage);

template <typename T>
void check(bool positions_given, int64_t v0, int64_t vrows) {
  SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << " positions " << positions_given << " shard " << v0);
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const int64_t B = 32, T_ = 128, N = B * T_, C = 768, V = 30522;
  std::mt19937 gen(1000);
  std::vector<int32_t> ids, types, pos;
  for (int64_t r = 0; r < N; ++r) {
    const uint32_t x = gen();
    ids.push_back(x % 4 == 0 ? 0 : x % 7 == 0 ? 101 : int32_t(gen() % uint32_t(V)));
    types.push_back(int32_t((r % T_) >= T_ / 2));
    pos.push_back(int32_t((r % T_) % 50));
  }
  const auto dout = random_tensor<T>(static_cast<size_t>(N * C), 1001);
  const int64_t wrows = vrows ? vrows : V;
  const auto words0 = random_tensor<T>(static_cast<size_t>(wrows * C), 1002), pos0 = random_tensor<T>(static_cast<size_t>(512 * C), 1003),
             tt0 = random_tensor<T>(static_cast<size_t>(2 * C), 1004);
  auto words = words0, positions = pos0, tt = tt0;
  ops::EmbeddingGrad cg(cpu, N, C);
  cg.backward(ops::EmbeddingBackward<T>{words.data(), positions.data(), tt.data(), dout.data(), ids.data(), types.data(),
                                        positions_given ? pos.data() : nullptr, N, T_, C, v0, vrows});
  ops::EmbeddingGrad gg(gpu, N, C);
  auto gd = upload(gpu, dout);
  auto gi = upload(gpu, ids);
  auto gt = upload(gpu, types);
  auto gp = upload(gpu, pos);
  for (int run = 0; run < 2; ++run) {
    auto gw = upload(gpu, words0);
    auto gpos = upload(gpu, pos0);
    auto gtt = upload(gpu, tt0);
    gg.backward(ops::EmbeddingBackward<T>{gw.get(), gpos.get(), gtt.get(), gd.get(), gi.get(), gt.get(),
                                          positions_given ? gp.get() : nullptr, N, T_, C, v0, vrows});
    EXPECT_EQ(0, std::memcmp(words.data(), gw.to_host().data(), words.size() * sizeof(T))) << "words, run " << run;
    EXPECT_EQ(0, std::memcmp(positions.data(), gpos.to_host().data(), positions.size() * sizeof(T))) << "positions";
    EXPECT_EQ(0, std::memcmp(tt.data(), gtt.to_host().data(), tt.size() * sizeof(T))) << "token types";
  }
  close_device(gpu);
}

TYPED_TEST(EmbeddingGradGpu, BertTablesSameBits) { check<TypeParam>(false, 0, 0); }
TYPED_TEST(EmbeddingGradGpu, PackedPositionsSameBits) { check<TypeParam>(true, 0, 0); }
TYPED_TEST(EmbeddingGradGpu, VocabularyShardSameBits) { check<TypeParam>(false, 15000, 15261); }

}  // namespace
}  // namespace pretrain::gpu_embedding_grad_test
