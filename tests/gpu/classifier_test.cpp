// trainer/ops/classifier.h on CUDA against its CPU path (CTest label "gpu"; skips without a device):
// GPT-2's vocabulary (50257 in rows padded to 50304: 16-byte loads) and unpadded (50257: the
// element-wise path), BERT's (30522), ignored rows, fp32 and bf16; and the vocabulary-parallel
// stats → merge → backward on the device against the fused kernel. Deterministic run to run.
// Tolerances: the CPU sums Σ exp in double, the GPU per thread in float then in a tree (~V/512 + 9
// terms deep): a few units of 2⁻²⁴ · that depth in S, so in the loss (log S) and the gradient
// before its one rounding to T (2u worst, u in the norm).
#include <gtest/gtest.h>

#include <cstring>

#include "ops_fixtures.h"
#include "trainer/ops/classifier.h"

namespace pretrain::gpu_classifier_test {
namespace {

using namespace ops_testing;

template <typename T>
class ClassifierGpu : public ::testing::Test {
 protected:
  void SetUp() override { PRETRAIN_REQUIRE_GPU(); }
};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(ClassifierGpu, Storage);

template <typename T>
void check(int64_t N, int64_t V, int64_t ld, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << " V=" << V << " ld=" << ld);
  const Device cpu{};
  Device gpu = open_device("cuda:0", 1);
  const auto x0 = random_tensor<T>(static_cast<size_t>(N * ld), seed, 4.0f);
  std::vector<int32_t> t;
  for (int64_t r = 0; r < N; ++r) t.push_back(r % 7 == 3 ? -1 : int32_t((r * 7919 + seed) % uint64_t(V)));
  const float dloss = 1.0f / float(N);
  std::vector<T> x = x0;
  std::vector<float> losses(static_cast<size_t>(N));
  ops::classifier_forward_backward(cpu, ops::FusedClassifier<T>{x.data(), losses.data(), t.data(), N, V, ld, dloss});
  std::vector<T> first;
  for (int run = 0; run < 2; ++run) {
    auto gx = upload(gpu, x0);
    auto gt = upload(gpu, t);
    auto gl = poisoned<float>(gpu, static_cast<size_t>(N));
    ops::classifier_forward_backward(gpu, ops::FusedClassifier<T>{gx.get(), gl.get(), gt.get(), N, V, ld, dloss});
    if (run == 1) {
      EXPECT_EQ(0, memcmp(first.data(), gx.to_host().data(), first.size() * sizeof(T))) << "differs between runs";
      break;
    }
    first = gx.to_host();
    const double u = kUnitRoundoff<T>, depth = (double(V) / 512 + 16) * 0x1p-24 * 8;
    PRETRAIN_EXPECT_ERRORS(errors(gl.to_host(), to_double(losses), 1.0), depth, depth, "loss");
    PRETRAIN_EXPECT_ERRORS(errors(first, x, 1e-9), u + depth, 2 * u + depth, "dlogits");
  }
  // Vocabulary-parallel on one device: two shards [0, s) and [s, V), then the merge, then each
  // shard's backward, against the fused kernel's result.
  const int64_t s = (V / 2) / 8 * 8, w0 = s, w1 = ld - s;
  std::vector<T> h0, h1;
  for (int64_t r = 0; r < N; ++r) {
    h0.insert(h0.end(), x0.begin() + r * ld, x0.begin() + r * ld + w0);
    h1.insert(h1.end(), x0.begin() + r * ld + s, x0.begin() + (r + 1) * ld);
  }
  auto g0 = upload(gpu, h0);
  auto g1 = upload(gpu, h1);
  auto gt = upload(gpu, t);
  auto gathered = DeviceBuffer<ops::ClassifierRowStats>(gpu, size_t(2 * N));
  auto merged = DeviceBuffer<ops::ClassifierRowStats>(gpu, size_t(N));
  auto gl = poisoned<float>(gpu, static_cast<size_t>(N));
  const ops::FusedClassifier<T> a0{g0.get(), gl.get(), gt.get(), N, s, w0, dloss, 0};
  const ops::FusedClassifier<T> a1{g1.get(), gl.get(), gt.get(), N, V - s, w1, dloss, s};
  ops::classifier_shard_stats(gpu, a0, gathered.get());
  ops::classifier_shard_stats(gpu, a1, gathered.get() + N);
  ops::classifier_combine_stats(gpu, merged.get(), gathered.get(), 2, N);
  ops::classifier_shard_backward(gpu, a0, merged.get());
  ops::classifier_shard_backward(gpu, a1, merged.get());
  const auto d0 = g0.to_host(), d1 = g1.to_host();
  std::vector<T> joined;
  for (int64_t r = 0; r < N; ++r) {
    joined.insert(joined.end(), d0.begin() + r * w0, d0.begin() + (r + 1) * w0);
    joined.insert(joined.end(), d1.begin() + r * w1, d1.begin() + (r + 1) * w1);
  }
  const double u = kUnitRoundoff<T>, depth = (double(V) / 512 + 16) * 0x1p-24 * 8;
  PRETRAIN_EXPECT_ERRORS(errors(gl.to_host(), to_double(losses), 1.0), depth, depth, "sharded loss");
  PRETRAIN_EXPECT_ERRORS(errors(joined, x, 1e-9), u + depth, 2 * u + depth, "sharded dlogits");
  close_device(gpu);
}

TYPED_TEST(ClassifierGpu, GptVocabularyPadded) { check<TypeParam>(67, 50257, 50304, 700); }
TYPED_TEST(ClassifierGpu, GptVocabularyUnpadded) { check<TypeParam>(33, 50257, 50257, 710); }
TYPED_TEST(ClassifierGpu, BertVocabulary) { check<TypeParam>(80, 30522, 30528, 720); }

}  // namespace
}  // namespace pretrain::gpu_classifier_test
