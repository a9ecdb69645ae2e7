// BERT's character classes (tokenizer/bert_chars.{h,cpp}): each flag on code points where the two
// rule sets agree and where they part (HF's fast tokenizer's Unicode 8.0 tables against Google's
// tokenization.py), the full lowercase mapping, ICU's NFD, and one table built from many threads at
// once being the table built from one.
#include "tokenizer/bert_chars.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace pretrain::bert_chars_test {
namespace {

struct Expected {
  char32_t c;
  uint8_t fast, python;  // the flags among kBertDrop | kBertSpace | kBertCjk | kBertPunct | kBertMn
};

constexpr uint8_t kClasses = kBertDrop | kBertSpace | kBertCjk | kBertPunct | kBertMn;

TEST(BertChars, EachClassInBothRuleSets) {
  const Expected cases[] = {
      {U'a', 0, 0},
      {0, kBertDrop, kBertDrop},
      {0xFFFD, kBertDrop, kBertDrop},
      {0x01, kBertDrop, kBertDrop},         // Cc
      {0x200B, kBertDrop, kBertDrop},       // Cf, old
      {0xE000, kBertDrop, 0},               // Co: fast only
      {0x13430, 0, kBertDrop},              // Cf since Unicode 12: Python only
      {U'\t', kBertSpace, kBertSpace},      // a control character that is whitespace
      {U' ', kBertSpace, kBertSpace},
      {0x3000, kBertSpace, kBertSpace},     // Zs
      {0x2028, kBertSpace, kBertSpace},     // Zl: White_Space, and str.split()'s
      {0x85, kBertDrop | kBertSpace, kBertDrop},  // Cc and White_Space: Rust's is_whitespace
      {0x4E2D, kBertCjk, kBertCjk},
      {0x2B920, kBertCjk, kBertCjk},
      {0x2B820, 0, kBertCjk},               // Google's fifth range starts earlier
      {U'$', kBertPunct, kBertPunct},       // ASCII, though Sc
      {0xAB, kBertPunct, kBertPunct},       // « Pi
      {0x2E5D, 0, kBertPunct},              // Pd since Unicode 14
      {0x166D, kBertPunct, 0},              // Po in Unicode 8.0, So now
      {0x301, kBertMn, kBertMn},
      {0x1885, 0, kBertMn},                 // Lo in Unicode 8.0, Mn now
      {0x1734, kBertMn, 0},                 // Mn in Unicode 8.0, Mc now
  };
  for (const Expected& e : cases) {
    EXPECT_EQ(bert_char_flags(false)[e.c] & kClasses, e.fast) << "fast U+" << std::hex << uint32_t(e.c);
    EXPECT_EQ(bert_char_flags(true)[e.c] & kClasses, e.python) << "python U+" << std::hex << uint32_t(e.c);
  }
}

// kBertNfdInert and kBertLowerChanges do not depend on the rule set.
TEST(BertChars, NfdInertAndLowercaseFlags) {
  for (bool python : {false, true}) {
    const BertCharFlags& f = bert_char_flags(python);
    for (char32_t c : {U'a', U'A', U'1', char32_t{0x4E2D}}) EXPECT_TRUE(f[c] & kBertNfdInert) << std::hex << uint32_t(c);
    // é and 가 decompose; U+0301 has combining class 230.
    for (char32_t c : {char32_t{0xE9}, char32_t{0xAC00}, char32_t{0x301}}) EXPECT_FALSE(f[c] & kBertNfdInert) << std::hex << uint32_t(c);
    for (char32_t c : {U'A', char32_t{0x130}, char32_t{0x3A3}, char32_t{0xC9}}) EXPECT_TRUE(f[c] & kBertLowerChanges) << std::hex << uint32_t(c);
    for (char32_t c : {U'a', U'1', char32_t{0x3C3}, char32_t{0x4E2D}}) EXPECT_FALSE(f[c] & kBertLowerChanges) << std::hex << uint32_t(c);
  }
  EXPECT_EQ(&bert_char_flags(false), &bert_char_flags(false)) << "one table per rule set, for the whole process";
  EXPECT_NE(&bert_char_flags(false), &bert_char_flags(true));
}

TEST(BertChars, LowercaseIsRustsFullContextFreeMapping) {
  char32_t out[2] = {};
  EXPECT_EQ(bert_lowercase(U'A', out), 1);
  EXPECT_EQ(out[0], U'a');
  EXPECT_EQ(bert_lowercase(0x130, out), 2);  // İ → i + combining dot above
  EXPECT_EQ(out[0], U'i');
  EXPECT_EQ(out[1], char32_t{0x307});
  EXPECT_EQ(bert_lowercase(0x3A3, out), 1);  // Σ → σ, never the final ς
  EXPECT_EQ(out[0], char32_t{0x3C3});
  EXPECT_EQ(bert_lowercase(0x4E2D, out), 1);
  EXPECT_EQ(out[0], char32_t{0x4E2D});
  EXPECT_EQ(bert_lowercase(0x10FFFF, out), 1);
  EXPECT_EQ(out[0], char32_t{0x10FFFF});
}

TEST(BertChars, NfdDecomposesAndReordersMarks) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeString e_acute = icu::UnicodeString(char16_t(0xE9));
  const icu::UnicodeString decomposed = bert_nfd().normalize(e_acute, status);
  ASSERT_TRUE(U_SUCCESS(status));
  EXPECT_EQ(decomposed, icu::UnicodeString(u"e\u0301"));
  // Combining class 220 sorts before 230.
  EXPECT_EQ(bert_nfd().normalize(icu::UnicodeString(u"a\u0301\u0323"), status), icu::UnicodeString(u"a\u0323\u0301"));
}

// Pages are built on first lookup under a lock: four threads looking up the code points of a new
// table at once (planes 0-2, where nearly every assigned character is) see what one thread sees in
// another new table.
TEST(BertChars, ATableBuiltByManyThreadsIsTheSame) {
  constexpr char32_t kEnd = 0x30000;
  for (bool python : {false, true}) {
    const BertCharFlags serial(python), shared(python);
    std::vector<uint8_t> want(kEnd);
    for (char32_t c = 0; c < kEnd; ++c) want[c] = serial[c];
    std::vector<std::vector<uint8_t>> got(4, std::vector<uint8_t>(kEnd));
    std::vector<std::thread> threads;
    for (size_t t = 0; t < got.size(); ++t)
      threads.emplace_back([&, t] {
        // Each thread starts a quarter further on, so they meet on unbuilt pages.
        for (char32_t k = 0; k < kEnd; ++k) {
          const char32_t c = (k + char32_t(t) * (kEnd / 4)) % kEnd;
          got[t][c] = shared[c];
        }
      });
    for (std::thread& t : threads) t.join();
    for (size_t t = 0; t < got.size(); ++t) EXPECT_TRUE(got[t] == want) << "thread " << t << " python " << python;
  }
}

}  // namespace
}  // namespace pretrain::bert_chars_test
