// BPE's merge step (tokenizer/bpe_merges.{h,cpp}): the lowest-ranked adjacent pair first, the
// leftmost among equals, a pair given twice taking its later rank and result; the fast algorithms
// (scan, heap, buckets) against the naive reference on hand-made and random merge tables and on
// GPT-2's own, and buckets only where every merge ranks after the merges that make its parts.
#include "tokenizer/bpe_merges.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/file.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gpt2_pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace pretrain::bpe_merges_test {
namespace {

using Algorithm = BpeMerges::Algorithm;
using Rules = std::vector<std::pair<std::string, std::string>>;
using Spelled = std::vector<std::string>;

// Merges over raw bytes (byte b is token b) in rank order: rule i joins two tokens, by their
// bytes, into the token of their concatenation (a new id the first time it is made).
std::unique_ptr<BpeMerges> merges_of(const Rules& rules) {
  std::array<TokenId, 256> byte_ids;
  std::vector<std::string> bytes;
  std::map<std::string, TokenId> ids;
  for (int b = 0; b < 256; ++b) {
    byte_ids[size_t(b)] = b;
    bytes.push_back(std::string(1, char(b)));
    ids[bytes.back()] = b;
  }
  for (const auto& [left, right] : rules)
    if (ids.emplace(left + right, TokenId(bytes.size())).second) bytes.push_back(left + right);
  auto m = std::make_unique<BpeMerges>(byte_ids, bytes);
  for (const auto& [left, right] : rules) m->add(ids.at(left), ids.at(right), ids.at(left + right));
  m->finish();
  return m;
}

// What `word` merges into by `algorithm`, spelled as the tokens' bytes.
Spelled merged(const BpeMerges& m, std::string_view word, Algorithm algorithm) {
  std::vector<TokenId> ids;
  m.merge(word, ids, algorithm);
  Spelled out;
  for (TokenId id : ids) out.push_back(m.token_bytes()[size_t(id)]);
  return out;
}

// Every algorithm, and the reference, merge `word` into `expected`.
void expect_merges(const BpeMerges& m, std::string_view word, const Spelled& expected) {
  for (Algorithm a : {Algorithm::by_length, Algorithm::scan, Algorithm::heap, Algorithm::buckets})
    EXPECT_EQ(merged(m, word, a), expected) << word << " by algorithm " << int(a);
  std::vector<TokenId> reference = m.reference_merge(word);
  std::vector<TokenId> fast;
  m.merge(word, fast);
  EXPECT_EQ(fast, reference) << word;
}

TEST(BpeMerges, LowestRankFirstLeftmostAmongEquals) {
  const auto m = merges_of({{"a", "a"}, {"aa", "aa"}, {"aa", "a"}});
  EXPECT_EQ(m->size(), 3u);
  // "a a" merges left to right (aa aa a), then "aa aa" (aaaa a); "aa a" never gets its turn.
  expect_merges(*m, "aaaaa", {"aaaa", "a"});
  expect_merges(*m, "aaa", {"aaa"});
  expect_merges(*m, "a", {"a"});
  expect_merges(*m, "xyz", {"x", "y", "z"});  // no rule: one token per byte
  const auto bc_first = merges_of({{"b", "c"}, {"a", "b"}}), ab_first = merges_of({{"a", "b"}, {"b", "c"}});
  expect_merges(*bc_first, "abc", {"a", "bc"});
  expect_merges(*ab_first, "abc", {"ab", "c"});
  EXPECT_EQ(ab_first->byte_id('a'), 'a');
}

// A pair given twice keeps the later rank and the later result, as loaders that build a dict in
// file order do.
TEST(BpeMerges, APairGivenTwiceTakesItsLaterRankAndResult) {
  const auto m = merges_of({{"a", "b"}, {"b", "c"}, {"a", "b"}});
  EXPECT_EQ(m->size(), 2u) << "pairs, not rules";
  expect_merges(*m, "abc", {"a", "bc"});  // (a, b) now ranks after (b, c)
  std::array<TokenId, 256> byte_ids;
  for (int b = 0; b < 256; ++b) byte_ids[size_t(b)] = b;
  std::vector<std::string> bytes(258);
  for (int b = 0; b < 256; ++b) bytes[size_t(b)] = std::string(1, char(b));
  bytes[256] = bytes[257] = "ab";
  BpeMerges twice(byte_ids, bytes);
  twice.add('a', 'b', 256);
  twice.add('a', 'b', 257);
  twice.finish();
  for (Algorithm a : {Algorithm::scan, Algorithm::heap, Algorithm::buckets}) {
    std::vector<TokenId> ids;
    twice.merge("abab", ids, a);
    EXPECT_EQ(ids, (std::vector<TokenId>{257, 257})) << int(a);
  }
}

// A merge ranked before the merges that make its parts (no learned list does that, a hand-written
// one may): buckets would apply it out of turn, so merge() takes the heap instead and agrees with
// the reference.
TEST(BpeMerges, PartsRankingLaterStillMergeAsTheReference) {
  const auto m = merges_of({{"ab", "c"}, {"x", "y"}, {"a", "b"}});
  expect_merges(*m, "abc", {"abc"});
  expect_merges(*m, "abcxyab", {"abc", "xy", "ab"});
  std::string huge;
  while (huge.size() < (1 << 15)) huge += "abcxyzab";
  std::vector<TokenId> heap, buckets, by_length;
  m->merge(huge, heap, Algorithm::heap);
  m->merge(huge, buckets, Algorithm::buckets);
  m->merge(huge, by_length);
  EXPECT_EQ(buckets, heap);
  EXPECT_EQ(by_length, heap);
}

// Random learned tables (each merge joins two tokens that exist by then) over a small alphabet:
// every algorithm equals the reference on random words short and long, and on huge words heap,
// buckets and the pick by length agree.
TEST(BpeMerges, EveryAlgorithmEqualsTheReferenceOnRandomTables) {
  std::mt19937 rng(17);
  const std::string alphabet = "abcde ";
  for (int table = 0; table < 6; ++table) {
    std::vector<std::string> tokens;
    for (char c : alphabet) tokens.push_back(std::string(1, c));
    Rules rules;
    for (int r = 0; r < 60; ++r) {
      const std::string& left = tokens[rng() % tokens.size()];
      const std::string& right = tokens[rng() % tokens.size()];
      rules.emplace_back(left, right);
      if (left.size() + right.size() < 12) tokens.push_back(left + right);
    }
    const auto m = merges_of(rules);
    for (int w = 0; w < 150; ++w) {
      std::string word;
      for (size_t n = 1 + rng() % (w % 3 == 0 ? 200 : 30); n > 0; --n) word += alphabet[rng() % alphabet.size()];
      const std::vector<TokenId> reference = m->reference_merge(word);
      for (Algorithm a : {Algorithm::scan, Algorithm::heap, Algorithm::buckets}) {
        std::vector<TokenId> ids;
        m->merge(word, ids, a);
        ASSERT_EQ(ids, reference) << "table " << table << " word " << word << " by algorithm " << int(a);
      }
    }
    std::string huge;  // past the length where by_length takes buckets
    while (huge.size() < 20000) huge += alphabet[rng() % alphabet.size()];
    std::vector<TokenId> heap, buckets, by_length;
    m->merge(huge, heap, Algorithm::heap);
    m->merge(huge, buckets, Algorithm::buckets);
    m->merge(huge, by_length);
    EXPECT_EQ(buckets, heap) << "table " << table;
    EXPECT_EQ(by_length, heap) << "table " << table;
  }
}

TEST(BpeGpt2, FastMergeEqualsReference) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  PRETRAIN_REQUIRE_SHARED(botchan, "vocab/botchan.txt");
  auto tok = load_tokenizer(encoder);
  // Real words, every pre-token of botchan.
  std::string text = read_file(botchan);
  size_t checked = 0;
  gpt2::pre_tokenize(text.substr(0, 60000), [&](size_t b, size_t e) {
    std::string_view w = std::string_view(text).substr(b, e - b);
    ASSERT_EQ(bpe_merge_word(*tok, w), bpe_merge_word(*tok, w, BpeMergeAlgorithm::reference)) << w;
    ++checked;
  });
  EXPECT_GT(checked, 10000u);
  // Random bytes and random text, short (scan) and long (heap) words.
  std::mt19937 rng(11);
  for (int i = 0; i < 1500; ++i) {
    std::string w;
    size_t n = 1 + rng() % (i % 3 == 0 ? 300 : 40);
    if (i % 2) {
      for (size_t k = 0; k < n; ++k) w.push_back(static_cast<char>(rng()));
    } else {
      static const char* kSyllables[] = {"the", "an", "ing", "er", "qu", "x", "zz", " ", "e", "tion", "\xc3\xa9"};
      while (w.size() < n) w += kSyllables[rng() % std::size(kSyllables)];
    }
    auto reference = bpe_merge_word(*tok, w, BpeMergeAlgorithm::reference);
    ASSERT_EQ(bpe_merge_word(*tok, w, BpeMergeAlgorithm::scan), reference) << w;
    ASSERT_EQ(bpe_merge_word(*tok, w, BpeMergeAlgorithm::heap), reference) << w;
    ASSERT_EQ(bpe_merge_word(*tok, w, BpeMergeAlgorithm::buckets), reference) << w;
  }
  // Longer words, where the reference is too slow: the three fast algorithms agree.
  for (int i = 0; i < 40; ++i) {
    std::string w;
    static const char* kParts[] = {"a", "aa", "ab", "the", "ing", " ", "  ", "\xe6\x97\xa5", "x", "tion"};
    size_t n = 500 + rng() % 5000;
    while (w.size() < n) w += kParts[rng() % std::size(kParts)];
    auto heap = bpe_merge_word(*tok, w, BpeMergeAlgorithm::heap);
    ASSERT_EQ(bpe_merge_word(*tok, w, BpeMergeAlgorithm::buckets), heap);
    ASSERT_EQ(bpe_merge_word(*tok, w, BpeMergeAlgorithm::scan), heap);
  }
}

}  // namespace
}  // namespace pretrain::bpe_merges_test
