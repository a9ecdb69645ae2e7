// trainer/ops/attention.h's CPU path — flash attention's tiled online softmax, forward with the
// log-sum-exp saved and backward recomputing the probabilities tile by tile — against the unfused
// ops in double (tests/attention_fixtures.h): no mask, BERT's padding mask, GPT's causal mask and a
// packed row's block-diagonal mask, with tiles that do not divide T and tiles larger than T, fp32
// and bf16, with and without dropout (the same counter-hash mask on both sides); and the dropout's
// keep rate and scaling measured through the output.
#include <gtest/gtest.h>

#include "attention_fixtures.h"
#include "ops_fixtures.h"

namespace pretrain::attention_test {
namespace {

using namespace ops_testing;
using namespace attention_testing;
const Device kCpu{};

struct Case {
  AttentionMask mask;
  float dropout;
  int64_t tile;
};

template <typename T>
void check(const Case& c) {
  SCOPED_TRACE(::testing::Message() << ops::storage_name<T>() << " mask " << int(c.mask) << " dropout " << c.dropout
                                  << " tile " << c.tile);
  AttentionShape s{2, 37, 3, 8, c.mask, 1.0f / std::sqrt(8.0f), c.dropout};
  const int64_t C = s.NH * s.HS;
  const auto km = key_mask(s);
  const auto qkv = random_tensor<T>(static_cast<size_t>(s.B * s.T * 3 * C), 51, 1.5f), dout = random_tensor<T>(static_cast<size_t>(s.B * s.T * C), 52);
  std::vector<T> out(static_cast<size_t>(s.B * s.T * C), poison<T>()), dqkv(qkv.size(), poison<T>());
  std::vector<float> lse(static_cast<size_t>(s.B * s.NH * s.T), NAN);
  const uint64_t seed = 1234, offset = 7;
  ops::Attention att(kCpu, {true, true, c.tile});
  att.forward(ops::AttentionForward<T>{s, out.data(), lse.data(), qkv.data(), km.empty() ? nullptr : km.data(), seed, offset});
  att.backward(ops::AttentionBackward<T>{s, dqkv.data(), dout.data(), out.data(), lse.data(), qkv.data(),
                                         km.empty() ? nullptr : km.data(), seed, offset});
  EXPECT_EQ(att.last_path(), "cpu flash");

  Unfused ref{s, {}, {}, {}, nullptr};
  if (c.dropout > 0) {
    const uint64_t key = ops::attention_dropout_key(seed, offset);
    ref.keep = [key, p = c.dropout](int64_t x) { return kernels::dropout_keep(key, x, p); };
  }
  ref.forward(to_double(qkv), km);
  // The backward from the output as stored, as the op's (D = Σ dO · O uses it).
  ref.backward(to_double(qkv), km, to_double(dout));
  // Float arithmetic over T keys and HS dims (~T · 2⁻²⁴ of the row's magnitude), then one rounding
  // to T; element errors relative to |value| + rms/10, as outputs cross zero.
  const double u = kUnitRoundoff<T>, f = 256 * 0x1p-24;
  PRETRAIN_EXPECT_ERRORS(errors(out, ref.out, rms(ref.out) / 10), u + f, 2 * u + f, "out");
  PRETRAIN_EXPECT_ERRORS(errors(lse, ref.lse, 1.0), f, f, "lse");
  // The gradients: dS = P (dP − D) cancels, and D = Σ dO · O reads O as stored (flash attention's
  // way; the reference's D is exact), so bf16's rounding of O shows amplified in small dS: a few u
  // in the norm, the worst element within 16u of the rms.
  PRETRAIN_EXPECT_ERRORS(errors(dqkv, ref.dqkv, rms(ref.dqkv)), 4 * u + f, 16 * u + 4 * f, "dqkv");
}

template <typename T>
class Attention : public ::testing::Test {};
using Storage = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(Attention, Storage);

TYPED_TEST(Attention, NoMask) { check<TypeParam>({AttentionMask::none, 0.0f, 16}); }
TYPED_TEST(Attention, BertPaddingMask) { check<TypeParam>({AttentionMask::padding, 0.0f, 16}); }
TYPED_TEST(Attention, GptCausalMask) { check<TypeParam>({AttentionMask::causal, 0.0f, 8}); }
TYPED_TEST(Attention, PackedRowsBlockDiagonal) { check<TypeParam>({AttentionMask::packed, 0.0f, 10}); }
TYPED_TEST(Attention, OneTileLargerThanTheSequence) { check<TypeParam>({AttentionMask::padding, 0.0f, 64}); }
TYPED_TEST(Attention, DropoutWithPadding) { check<TypeParam>({AttentionMask::padding, 0.1f, 16}); }
TYPED_TEST(Attention, DropoutCausal) { check<TypeParam>({AttentionMask::causal, 0.25f, 16}); }

TEST(AttentionDropout, KeepsOneMinusPScaledByItsInverse) {
  AttentionShape s{2, 64, 4, 64, AttentionMask::none, 1.0f, 0.1f};
  const auto qkv = dropout_probe_qkv<float>(s);
  std::vector<float> out(static_cast<size_t>(s.B * s.T * s.NH * s.HS)), lse(static_cast<size_t>(s.B * s.NH * s.T));
  ops::Attention att(kCpu);
  att.forward(ops::AttentionForward<float>{s, out.data(), lse.data(), qkv.data(), nullptr, 99, 3});
  expect_dropout_statistics(s, to_double(out), 0x1p-24);
}

TEST(AttentionArgs, BadInputIsAnError) {
  ops::Attention att(kCpu);
  std::vector<float> x(3 * 4 * 2 * 2), out(4 * 4), lse(4 * 2);
  AttentionShape s{1, 4, 2, 2, AttentionMask::padding, 1.0f, 0.0f};
  EXPECT_THROW(att.forward(ops::AttentionForward<float>{s, out.data(), lse.data(), x.data(), nullptr}), Error);
  s.mask = AttentionMask::none, s.dropout = 1.0f;
  EXPECT_THROW(att.forward(ops::AttentionForward<float>{s, out.data(), lse.data(), x.data(), nullptr}), Error);
}

}  // namespace
}  // namespace pretrain::attention_test
