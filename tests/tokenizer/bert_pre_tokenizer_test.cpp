// BERT's normalizer and pre-tokenizer (tokenizer/bert_pre_tokenizer.{h,cpp}): each step, the fused
// fast path against the step-by-step reference, the words' offsets and lengths, and where HF's fast
// tokenizer and Google's tokenization.py (python_compat) part ways. The character classes behind
// them are bert_chars_test.cpp's.
#include "tokenizer/bert_pre_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"
#include "test_util.h"

namespace pretrain::bert_pre_tokenizer_test {
namespace {

using Words = std::vector<std::string>;

BertNormalizerOptions fast_uncased() { return {}; }
BertNormalizerOptions python_uncased() {
  BertNormalizerOptions o;
  o.python_compat = true;
  return o;
}
BertNormalizerOptions cased(bool python = false) {
  BertNormalizerOptions o;
  o.lowercase = o.strip_accents = false;
  o.python_compat = python;
  return o;
}

Words words(const BertNormalizerOptions& o, std::string_view text) {
  BertPreTokenizer pre(o);
  BertWords w;
  pre.run(text, w);
  Words out;
  for (size_t i = 0; i < w.size(); ++i) out.emplace_back(w[i]);
  EXPECT_EQ(out, pre.reference(text)) << "fast path and reference disagree on " << text;
  return out;
}

// ---- The pipeline's steps -------------------------------------------------------------------

TEST(BertPreTokenizer, CleansSplitsAndLowercases) {
  EXPECT_EQ(words(fast_uncased(), "Hello, World!"), (Words{"hello", ",", "world", "!"}));
  EXPECT_EQ(words(fast_uncased(), "a\tb\nc\r\u00A0d\u3000e"), (Words{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(words(fast_uncased(), std::string("x\0y\xEF\xBF\xBDz\u200Bq", 12)), (Words{"xyzq"}));  // dropped, not split
  EXPECT_EQ(words(fast_uncased(), "naïve Ångström"), (Words{"naive", "angstrom"}));
  EXPECT_EQ(words(cased(), "naïve"), (Words{"naïve"}));
  EXPECT_EQ(words(fast_uncased(), "中文abc"), (Words{"中", "文", "abc"}));
  EXPECT_EQ(words(fast_uncased(), "$5 a-b «q»"), (Words{"$", "5", "a", "-", "b", "«", "q", "»"}));
  EXPECT_EQ(words(fast_uncased(), ""), Words{});
  EXPECT_EQ(words(fast_uncased(), " \t "), Words{});
}

TEST(BertPreTokenizer, FullLowercaseMappingAsRust) {
  // Rust's char::to_lowercase: İ → "i̇" (with strip_accents the U+0307 goes again).
  BertNormalizerOptions lower_only;
  lower_only.strip_accents = false;
  EXPECT_EQ(words(lower_only, "İ"), (Words{"i\u0307"}));
  EXPECT_EQ(words(fast_uncased(), "İstanbul"), (Words{"istanbul"}));
}

TEST(BertPreTokenizer, NfdReordersMarksWithinARun) {
  // ccc 220 (U+0323) sorts before ccc 230 (U+0301); with lowercase only nothing is decomposed.
  BertNormalizerOptions strip_only;
  strip_only.lowercase = false;
  EXPECT_EQ(words(strip_only, "A\u0301\u0323B"), (Words{"AB"}));
  EXPECT_EQ(words(cased(), "a\u0301\u0323b"), (Words{"a\u0301\u0323b"}));
}

// Random strings over the characters that take the general path, fast path against reference.
TEST(BertPreTokenizer, FastPathEqualsReferenceOnRandomText) {
  const char32_t alphabet[] = {'a', 'Z', ' ', '.', '\t', 0,      0xE9,   0x301,   0x323,   0x130,  0x3A3,
                               0x4E2D, 0xF900, 0x2B820, 0x11938, 0x1885, 0x2E5D, 0xE000,  0x200B, 0xFFFD, 0x2028,
                               0x1FEF, 0x212B, 0x0387,  0x1734,  0x166D, 0xC5,   0x13430, 0x85,   0xFEFF, 0x1F600};
  std::mt19937 rng(7);
  for (int python = 0; python < 2; ++python) {
    for (bool lower : {false, true}) {
      BertNormalizerOptions o;
      o.lowercase = o.strip_accents = lower;
      o.python_compat = python;
      BertPreTokenizer pre(o);
      for (int i = 0; i < 3000; ++i) {
        std::string s;
        for (int n = rng() % 12; n > 0; --n) append_utf8(alphabet[rng() % std::size(alphabet)], s);
        BertWords w;
        pre.run(s, w);
        Words fast;
        for (size_t k = 0; k < w.size(); ++k) fast.emplace_back(w[k]);
        ASSERT_EQ(fast, pre.reference(s)) << "python " << python << " lower " << lower;
      }
    }
  }
}

TEST(BertPreTokenizer, FastPathEqualsReferenceOnWikiText) {
  PRETRAIN_REQUIRE_SHARED(path, "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl");
  std::ifstream in(path);
  std::string line;
  BertPreTokenizer uncased(fast_uncased()), cased_pre(cased());
  int n = 0;
  while (std::getline(in, line) && n < 2000) {
    ++n;
    for (const BertPreTokenizer* pre : {&uncased, &cased_pre}) {
      BertWords w;
      pre->run(line, w);
      Words fast;
      for (size_t k = 0; k < w.size(); ++k) fast.emplace_back(w[k]);
      ASSERT_EQ(fast, pre->reference(line)) << "line " << n;
    }
  }
}

// Each normalizer step off on its own: control characters stay (inside their word), CJK stays in
// the word around it; whitespace and punctuation still split.
TEST(BertPreTokenizer, EachNormalizerStepCanBeTurnedOff) {
  for (bool python : {false, true}) {
    BertNormalizerOptions no_clean = cased(python);
    no_clean.clean_text = false;
    EXPECT_EQ(words(no_clean, "a\x01b c"), (Words{"a\x01b", "c"})) << python;
    BertNormalizerOptions no_cjk = cased(python);
    no_cjk.handle_chinese_chars = false;
    EXPECT_EQ(words(no_cjk, "\u4e2d\u6587abc, x"), (Words{"\u4e2d\u6587abc", ",", "x"})) << python;
    EXPECT_EQ(words(cased(python), "\u4e2d\u6587abc, x"), (Words{"\u4e2d", "\u6587", "abc", ",", "x"})) << python;
  }
  BertNormalizerOptions o;
  o.strip_accents = false;
  o.handle_chinese_chars = false;
  const BertPreTokenizer pre(o);
  EXPECT_FALSE(pre.options().strip_accents);
  EXPECT_FALSE(pre.options().handle_chinese_chars);
  EXPECT_TRUE(pre.options().lowercase);
}

// Words are laid end to end in one buffer, each with its offset, size in bytes and length in code
// points (what max_input_chars_per_word counts); run() appends, clear() empties.
TEST(BertPreTokenizer, WordsCarryTheirBytesAndCodePointCounts) {
  const BertPreTokenizer pre(cased());
  BertWords w;
  pre.run("h\u00e9llo \U0001f600!", w);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], "h\u00e9llo");
  EXPECT_EQ(w.words[0].size, 6u);
  EXPECT_EQ(w.words[0].chars, 5u);
  EXPECT_EQ(w[1], "\U0001f600");
  EXPECT_EQ(w.words[1].size, 4u);
  EXPECT_EQ(w.words[1].chars, 1u);
  EXPECT_EQ(w[2], "!");
  for (size_t i = 1; i < w.size(); ++i) EXPECT_EQ(w.words[i].offset, w.words[i - 1].offset + w.words[i - 1].size);
  pre.run("more", w);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[3], "more");
  EXPECT_EQ(w[0], "h\u00e9llo") << "earlier words survive an append";
  w.clear();
  EXPECT_EQ(w.size(), 0u);
  EXPECT_TRUE(w.bytes.empty());
}

// BertNormalizer alone: whitespace to ' ', control characters dropped, spaces around CJK, accents
// stripped after NFD, lowercase.
TEST(BertPreTokenizer, NormalizeReferenceIsTheNormalizerAlone) {
  const BertPreTokenizer uncased(fast_uncased()), keep(cased());
  EXPECT_EQ(uncased.normalize_reference(U"H\u00e9llo\t\u4e2d\x01!"), U"hello  \u4e2d !");
  EXPECT_EQ(keep.normalize_reference(U"H\u00e9llo\t\u4e2d\x01!"), U"H\u00e9llo  \u4e2d !");
  EXPECT_EQ(uncased.normalize_reference(U""), U"");
}

// ---- HF fast (our default) vs HF slow / Google's tokenization.py (python_compat) ---------------
// Each difference below was checked against tokenizers 0.20.3 / transformers 4.46.3 and Google's
// tokenization.py. The golden ids in shared/data/golden (Google's) agree with both modes: their
// texts hit none of these. python_compat follows Google's code; transformers' slow BertTokenizer
// differs from Google's too, in ways python_compat does not copy: it applies NFC before splitting
// (so a cased "e\u0301" becomes "é") and, when lowercasing, lowers the text one character at a
// time before its BasicTokenizer runs (so Σ → σ, as the fast one does).

TEST(FastVsPython, PrivateUseAndNewFormatCharacters) {
  // Fast drops Cc, Cf (as of Unicode 8.0), Co and Cs; Python drops Cc and Cf only.
  EXPECT_EQ(words(fast_uncased(), "a\uE000b"), (Words{"ab"}));
  EXPECT_EQ(words(python_uncased(), "a\uE000b"), (Words{"a\uE000b"}));
  // U+13430 (Cf since Unicode 12): the fast tables predate it and keep it.
  EXPECT_EQ(words(fast_uncased(), "a\U00013430b"), (Words{"a\U00013430b"}));
  EXPECT_EQ(words(python_uncased(), "a\U00013430b"), (Words{"ab"}));
}

TEST(FastVsPython, CjkRanges) {
  // Google's fifth CJK range starts at U+2B820, HF's Rust code at U+2B920.
  EXPECT_EQ(words(fast_uncased(), "a\U0002B820b"), (Words{"a\U0002B820b"}));
  EXPECT_EQ(words(python_uncased(), "a\U0002B820b"), (Words{"a", "\U0002B820", "b"}));
  EXPECT_EQ(words(fast_uncased(), "a\U0002B920b"), (Words{"a", "\U0002B920", "b"}));
}

TEST(FastVsPython, LowercasingOrderAndFinalSigma) {
  // Fast lowercases each character after stripping accents: Σ → σ always. Google lowercases each
  // whitespace token with str.lower() first: a word-final Σ → ς.
  EXPECT_EQ(words(fast_uncased(), "ΟΔΟΣ."), (Words{"οδοσ", "."}));
  EXPECT_EQ(words(python_uncased(), "ΟΔΟΣ."), (Words{"οδος", "."}));
  EXPECT_EQ(words(python_uncased(), "ΣΑ"), (Words{"σα"}));
}

TEST(FastVsPython, UnicodeVersionOfPunctuationAndMarks) {
  // U+2E5D (Pd, Unicode 14) is punctuation to Python, not to the fast tables (Unicode 8.0).
  EXPECT_EQ(words(fast_uncased(), "a\u2E5Db"), (Words{"a\u2E5Db"}));
  EXPECT_EQ(words(python_uncased(), "a\u2E5Db"), (Words{"a", "\u2E5D", "b"}));
  // U+1885 was Lo in Unicode 8.0 (Mn now): strip_accents keeps it in fast mode only.
  EXPECT_EQ(words(fast_uncased(), "a\u1885"), (Words{"a\u1885"}));
  EXPECT_EQ(words(python_uncased(), "a\u1885"), (Words{"a"}));
  // U+166D was Po in Unicode 8.0 (So now): fast splits it off.
  EXPECT_EQ(words(fast_uncased(), "a\u166Db"), (Words{"a", "\u166D", "b"}));
  EXPECT_EQ(words(python_uncased(), "a\u166Db"), (Words{"a\u166Db"}));
  // U+11938 decomposes since Unicode 13; HF's NFD leaves it whole.
  EXPECT_EQ(words(fast_uncased(), "\U00011938"), (Words{"\U00011938"}));
  EXPECT_EQ(words(python_uncased(), "\U00011938"), (Words{"\U00011935\U00011930"}));
}

}  // namespace
}  // namespace pretrain::bert_pre_tokenizer_test
