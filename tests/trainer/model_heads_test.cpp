// The heads (trainer/model_heads.cpp) on the CPU backend: GPT's LM head in chunks of rows gives
// the step of one chunk with a smaller logits buffer. (Their losses, logits and gradients against
// HF transformers: tests/compat/test_trainer_torch.py; packed BERT's NSP head per instance:
// model_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fixtures.h"
#include "trainer/model.h"

namespace pretrain::model_heads_test {
namespace {

using pretrain::testing::tiny_model;
using Data = pretrain::testing::TinyBatch;
const Device kCpu{};

// GPT's LM head in chunks of 5 rows (24 tokens: the last chunk partial) against one chunk: the
// same losses, logits and gradients (the wte gradient sums its chunks in another order), and the
// logits buffer holds 5 rows instead of 24.
TEST(GptLmHead, ChunksOfRowsGiveTheSameStep) {
  const Data data(6);
  auto run = [&](int64_t rows, std::vector<float>* logits, size_t* bytes) {
    Model model(tiny_model(ModelKind::gpt), kCpu);
    model.set_lm_head_rows(rows);
    model.init_weights(8);
    model.zero_grads();
    const Losses l = model.step(data.inputs(ModelKind::gpt), true, 1.0f, 0, true);
    *logits = model.logits();
    *bytes = model.activation_bytes();
    std::vector<float> g(model.grads(), model.grads() + model.num_parameters());
    g.push_back(float(l.total));
    return g;
  };
  std::vector<float> whole_logits, chunked_logits;
  size_t whole_bytes = 0, chunked_bytes = 0;
  const std::vector<float> whole = run(0, &whole_logits, &whole_bytes), chunked = run(5, &chunked_logits, &chunked_bytes);
  // OpenBLAS may round a product differently with the GEMM's row count (its AMD EPYC kernels do:
  // rows 0-4 of a 5-row sgemm differ in the last bit from the same rows of a 12-row one), so the
  // chunks' logits and loss are equal up to that rounding, not bit for bit.
  ASSERT_EQ(whole_logits.size(), chunked_logits.size());
  for (size_t i = 0; i < whole_logits.size(); ++i)
    EXPECT_NEAR(whole_logits[i], chunked_logits[i], 1e-6 * (1 + std::fabs(whole_logits[i]))) << "logit " << i;
  EXPECT_NEAR(whole.back(), chunked.back(), 1e-6 * std::fabs(whole.back())) << "the loss";
  ASSERT_EQ(whole.size(), chunked.size());
  double scale = 0, err = 0;
  for (size_t i = 0; i < whole.size(); ++i) scale = std::max(scale, double(std::fabs(whole[i])));
  for (size_t i = 0; i < whole.size(); ++i) err = std::max(err, double(std::fabs(whole[i] - chunked[i])));
  EXPECT_LE(err, 1e-6 * scale);
  const int64_t V = tiny_model(ModelKind::gpt).vocab_size, N = data.B * data.T;
  const auto floats = [](int64_t n) { return size_t((n + 63) / 64 * 64); };
  EXPECT_EQ(whole_bytes - chunked_bytes, (floats(N * V) - floats(5 * V)) * sizeof(float));
}

}  // namespace
}  // namespace pretrain::model_heads_test
