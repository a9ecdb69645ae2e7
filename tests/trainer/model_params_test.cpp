// The parameters (trainer/model_params.h): the whole model's list, the shards tensor parallel cuts
// and puts back, one rank's arena layout at pipeline and tensor layouts, and initial weights that
// are a function of the seed whatever the layout.
#include "trainer/model_params.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "fixtures.h"

namespace pretrain::model_params_test {
namespace {

using testing::tiny_model;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TEST(ModelParams, TheWholeModelsListHasUniqueNamesAndDecaysOnlyMatrices) {
  for (ModelKind kind : {ModelKind::bert, ModelKind::gpt}) {
    const ModelConfig c = tiny_model(kind);
    const std::vector<ParamInfo> params = whole_model_params(c);
    std::set<std::string> names;
    int64_t offset = 0;
    for (const ParamInfo& p : params) {
      EXPECT_TRUE(names.insert(p.name).second) << p.name;
      EXPECT_EQ(p.offset, offset) << p.name;
      offset += p.numel;
      const bool matrix = p.shape.size() == 2;
      EXPECT_EQ(p.decay, matrix) << p.name << ": only weight matrices and embeddings decay";
    }
    // GPT-2: wte, wpe, per layer 12 tensors, ln_f; BERT: 5 embedding tensors, 16 per layer, 9 in the heads.
    EXPECT_EQ(params.size(), kind == ModelKind::gpt ? size_t(2 + 12 * c.layers + 2) : size_t(5 + 16 * c.layers + 9));
    const int64_t C = c.hidden, I = c.intermediate;
    const int64_t layer = 4 * C * C + 2 * C * I + 3 * C + C + I + C + 4 * C;  // matrices, biases, two LayerNorms
    EXPECT_EQ(offset, kind == ModelKind::gpt ? c.vocab_size * C + c.max_positions * C + c.layers * layer + 2 * C
                                             : c.vocab_size * C + c.max_positions * C + 2 * C + 2 * C + c.layers * layer +
                                                   2 * (C * C + C) + 2 * C + c.vocab_size + 2 * C + 2);
  }
}

// Every cut of every tensor of a model at tensor 2 and 4: the ranks' shards put together are the
// whole again, and the vocabulary's padding rows (past the real ids) are zero in the shards.
TEST(ModelParams, ShardsPutTogetherAreTheWhole) {
  for (ModelKind kind : {ModelKind::bert, ModelKind::gpt})
    for (int t : {2, 4}) {
      ModelConfig c = tiny_model(kind, 16, 23);
      c.heads = 4;
      for (int rank = 0; rank < t; ++rank) {
        ModelShard s;
        s.tensor_rank = rank, s.tensor_size = t, s.chunks = {{0, c.layers}};
        const ShardParams mine = shard_params(c, s);
        for (const ParamInfo& p : mine.params) {
          const std::vector<float> whole = testing::random_floats(size_t(numel(p.full_shape)), uint32_t(p.full_index));
          std::vector<float> shard(size_t(p.numel));
          take_shard(p, whole.data(), shard.data(), rank, t);
          // Every rank's part together is the whole.
          std::vector<float> all(whole.size(), NAN);
          for (int r = 0; r < t; ++r) {
            ModelShard other = s;
            other.tensor_rank = r;
            const ShardParams theirs = shard_params(c, other);
            const ParamInfo& q = theirs.params[size_t(&p - mine.params.data())];
            std::vector<float> part(size_t(q.numel));
            take_shard(q, whole.data(), part.data(), r, t);
            put_shard(q, part.data(), all.data(), r, t);
          }
          if (p.split == Split::none) {
            EXPECT_EQ(shard, whole) << p.name;
          }
          EXPECT_EQ(all, whole) << p.name << " at tensor " << t;
          if (p.split == Split::rows) {
            const int64_t cols = p.shape.size() > 1 ? p.shape[1] : 1;
            const int64_t real = std::clamp<int64_t>(p.full_shape[0] - rank * p.shape[0], 0, p.shape[0]);
            EXPECT_TRUE(std::all_of(shard.begin() + real * cols, shard.end(), [](float v) { return v == 0.0f; }))
                << p.name << ": padding rows";
          }
        }
      }
    }
}

// Pipeline 2: the first stage holds the embeddings and layer 0, the last layer 1 and the heads with
// its copy of the tied word embeddings (not counted in norms); the ranges tile each arena in order.
TEST(ModelParams, AStagesArenaIsItsEmbeddingsLayersAndHeadsInOrder) {
  const ModelConfig c = tiny_model(ModelKind::gpt);
  ModelShard first, last;
  first.chunks = {{0, 1}}, first.heads = false;
  last.chunks = {{1, 2}}, last.embeddings = false;
  const ShardParams a = shard_params(c, first), b = shard_params(c, last);
  EXPECT_EQ(a.layers, std::vector<int64_t>{0});
  EXPECT_EQ(b.layers, std::vector<int64_t>{1});
  for (const ShardParams* s : {&a, &b}) {
    EXPECT_EQ(s->embeddings.first, 0);
    EXPECT_EQ(s->embeddings.second, s->layer_ranges.front().first);
    EXPECT_EQ(s->layer_ranges.back().second, s->heads.first);
    EXPECT_EQ(s->heads.second, s->numel);
  }
  EXPECT_EQ(a.heads.first, a.heads.second) << "no heads on the first stage";
  EXPECT_EQ(b.embeddings.second, 0) << "no embeddings on the last";
  const auto tied = std::find_if(b.params.begin(), b.params.end(), [](const ParamInfo& p) { return p.tied_copy; });
  ASSERT_NE(tied, b.params.end());
  EXPECT_EQ(tied->name, "transformer.wte.weight");
  EXPECT_GE(tied->offset, b.heads.first) << "among the heads";
  EXPECT_FALSE(tied->counted);
  EXPECT_TRUE(a.params.front().counted);
  EXPECT_FALSE(a.params.front().tied_copy);
}

// Tensor 2 with sequence parallelism: replicated tensors count on rank 0 only, the region's
// LayerNorms are partial sums, and a tensor size that does not divide the heads is refused.
TEST(ModelParams, TensorRanksCountReplicasOnceAndRefuseWhatDoesNotDivide) {
  ModelConfig c = tiny_model(ModelKind::bert);
  ModelShard s;
  s.tensor_size = 2, s.tensor_rank = 1, s.sequence_parallel = true, s.chunks = {{0, c.layers}};
  for (const ParamInfo& p : shard_params(c, s).params) {
    EXPECT_EQ(p.counted, p.split != Split::none) << p.name;
    const bool region_norm = p.name.find("LayerNorm") != std::string::npos && p.name.find("cls.") == std::string::npos;
    EXPECT_EQ(p.sequence_partial, region_norm) << p.name;
  }
  s.tensor_size = 4, s.tensor_rank = 0;
  EXPECT_THROW(shard_params(c, s), UsageError) << "4 ranks, 2 heads";
}

// The weights are a function of the seed only: tensor 2's two shards put together are tensor 1's
// weights; BERT's truncated normal stays within 2σ; LayerNorm starts at (1, 0), biases at 0.
TEST(ModelParams, InitialWeightsAreTheSameWholeTensorsAtAnyTensorSize) {
  for (ModelKind kind : {ModelKind::bert, ModelKind::gpt}) {
    const ModelConfig c = tiny_model(kind);
    ModelShard one;
    one.chunks = {{0, c.layers}};
    const ShardParams whole = shard_params(c, one);
    const std::vector<float> w1 = initial_weights(c, one, whole, 42);
    std::vector<float> assembled(w1.size(), NAN);
    for (int rank = 0; rank < 2; ++rank) {
      ModelShard s = one;
      s.tensor_size = 2, s.tensor_rank = rank;
      const ShardParams part = shard_params(c, s);
      const std::vector<float> w2 = initial_weights(c, s, part, 42);
      for (size_t i = 0; i < part.params.size(); ++i)
        put_shard(part.params[i], w2.data() + part.params[i].offset, assembled.data() + whole.params[i].offset, rank, 2);
    }
    EXPECT_EQ(assembled, w1) << model_kind_name(kind);
    EXPECT_NE(initial_weights(c, one, whole, 43), w1);
    for (const ParamInfo& p : whole.params) {
      const float* x = w1.data() + p.offset;
      const bool norm = p.name.find("LayerNorm") != std::string::npos || p.name.find("ln_") != std::string::npos;
      if (norm || !p.decay) {
        const float want = norm && p.name.ends_with("weight") ? 1.0f : 0.0f;
        EXPECT_TRUE(std::all_of(x, x + p.numel, [&](float v) { return v == want; })) << p.name;
      } else if (kind == ModelKind::bert) {
        EXPECT_TRUE(std::all_of(x, x + p.numel, [](float v) { return std::fabs(v) <= 0.04f; })) << p.name;
      }
    }
  }
}

}  // namespace
}  // namespace pretrain::model_params_test
