// GPT-2's byte-level pre-tokenizer (tokenizer/gpt2_pretokenize.{h,cpp}): the pattern's
// alternatives in order, the character classes of the regex engines it follows (not ICU's or
// Python's), pieces that cover any text exactly, and the byte alphabet.
#include "tokenizer/gpt2_pretokenize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace pretrain::gpt2_pretokenize_test {
namespace {

using Pieces = std::vector<std::string>;

Pieces pieces(std::string_view text) {
  Pieces out;
  gpt2::pre_tokenize(text, [&](size_t b, size_t e) { out.emplace_back(text.substr(b, e - b)); });
  return out;
}

TEST(Gpt2PreTokenizer, FollowsThePatternsAlternativesInOrder) {
  EXPECT_EQ(pieces(""), Pieces{});
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("don't"), (Pieces{"don", "'t"}));
  EXPECT_EQ(pieces("you'll we've they're I'm he'd it's"),
            (Pieces{"you", "'ll", " we", "'ve", " they", "'re", " I", "'m", " he", "'d", " it", "'s"}));
  // Contractions are lowercase only (no (?i) in GPT-2's pattern) and win over the letter run.
  EXPECT_EQ(pieces("I'M"), (Pieces{"I", "'", "M"}));
  EXPECT_EQ(pieces("'S"), (Pieces{"'", "S"}));
  EXPECT_EQ(pieces("'sam"), (Pieces{"'s", "am"}));
  EXPECT_EQ(pieces("!'s"), (Pieces{"!'", "s"}));  // inside a punctuation run, ' is punctuation
  EXPECT_EQ(pieces(" 's"), (Pieces{" '", "s"}));
  // \s+(?!\S): a run of spaces before a word leaves its last space to the word.
  EXPECT_EQ(pieces("   word"), (Pieces{"  ", " word"}));
  EXPECT_EQ(pieces("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces("word   "), (Pieces{"word", "   "}));
  EXPECT_EQ(pieces(" "), (Pieces{" "}));
  EXPECT_EQ(pieces("\t\tx"), (Pieces{"\t", "\t", "x"}));
  EXPECT_EQ(pieces("\r\n"), (Pieces{"\r\n"}));
  EXPECT_EQ(pieces("a\r\nb"), (Pieces{"a", "\r", "\n", "b"}));
  EXPECT_EQ(pieces("x \n\ny"), (Pieces{"x", " \n", "\n", "y"}));
  // Only U+0020 is the optional prefix; other White_Space stands alone before a word.
  EXPECT_EQ(pieces("a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));
  EXPECT_EQ(pieces("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
  EXPECT_EQ(pieces("a \u3000b"), (Pieces{"a", " ", "\u3000", "b"}));
  // Near misses of \s: U+200B (Cf) and U+001C (Python's \s, not White_Space) are punctuation.
  EXPECT_EQ(pieces("a\u200bb"), (Pieces{"a", "\u200b", "b"}));
  EXPECT_EQ(pieces("a \x1c b"), (Pieces{"a", " \x1c", " b"}));
  // \p{N} is Nd|Nl|No, \p{L} the general category L (combining marks are neither).
  EXPECT_EQ(pieces("123abc 42"), (Pieces{"123", "abc", " 42"}));
  EXPECT_EQ(pieces("x\u00b2\u216b\u2460"), (Pieces{"x", "\u00b2\u216b\u2460"}));
  EXPECT_EQ(pieces("e\u0301t\u00e9"), (Pieces{"e", "\u0301", "t\u00e9"}));
  EXPECT_EQ(pieces("\u65e5\u672c\u8a9e \u0395\u03bb"), (Pieces{"\u65e5\u672c\u8a9e", " \u0395\u03bb"}));
  EXPECT_EQ(pieces(" !!?"), (Pieces{" !!?"}));
  EXPECT_EQ(pieces("\U0001F642\U0001F642 ok"), (Pieces{"\U0001F642\U0001F642", " ok"}));
}

TEST(Gpt2PreTokenizer, ByteAlphabetIsABijection) {
  const auto& m = gpt2::bytes_to_unicode();
  EXPECT_EQ(m[' '], U'\u0120');  // "Ġ"
  EXPECT_EQ(m['\n'], U'\u010a');  // "Ċ"
  EXPECT_EQ(m['A'], U'A');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(gpt2::unicode_to_byte(m[b]), b);
  EXPECT_EQ(gpt2::unicode_to_byte(U'\u3000'), -1);
}

// \p{L} is the general category L*, \p{N} Nd|Nl|No, \s White_Space; everything else "other".
TEST(Gpt2PreTokenizer, CharClassesAreTheRegexEnginesNotPythons) {
  using gpt2::CharClass;
  struct Case {
    char32_t c;
    CharClass cls;
  };
  const Case cases[] = {
      {U'a', CharClass::letter},      {U'\u00aa', CharClass::letter},      {U'\u02b0', CharClass::letter},  // Lo, Lm
      {U'\u4e2d', CharClass::letter}, {U'\U0001d400', CharClass::letter},  // CJK, a non-BMP Lu
      {U'7', CharClass::number},      {U'\u00b2', CharClass::number},      {U'\u216b', CharClass::number},  // No, Nl
      {U'\u0663', CharClass::number}, {U'\U0001d7ce', CharClass::number},  // Arabic-Indic Nd, a non-BMP Nd
      {U' ', CharClass::space},       {U'\t', CharClass::space},           {U'\r', CharClass::space},
      {U'\u0085', CharClass::space},  {U'\u00a0', CharClass::space},       {U'\u1680', CharClass::space},
      {U'\u2028', CharClass::space},  {U'\u202f', CharClass::space},       {U'\u3000', CharClass::space},
      {U'\x1c', CharClass::other},    {U'\u200b', CharClass::other},       {U'\u0301', CharClass::other},  // Python's \s; Cf; Mn
      {U'!', CharClass::other},       {U'\U0001f642', CharClass::other},   {U'\U0010ffff', CharClass::other},
  };
  for (const Case& k : cases) EXPECT_EQ(gpt2::char_class(k.c), k.cls) << "U+" << std::hex << uint32_t(k.c);
}

// On any valid UTF-8 the pieces are non-empty, in order, and join to the text; a piece never
// splits a code point.
TEST(Gpt2PreTokenizer, PiecesCoverAnyTextExactly) {
  const char32_t alphabet[] = {'a', 'Z', '7', ' ', ' ', '\t', '\n', '\r', '\'', 's', 'l', '!', '.', 0x85, 0xA0,
                               0x3000, 0x200B, 0x301, 0xE9, 0xB2, 0x4E2D, 0x1F642, 0x1D7CE, 0x1C};
  std::mt19937 rng(5);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    for (int n = rng() % 24; n > 0; --n) append_utf8(alphabet[rng() % std::size(alphabet)], text);
    size_t at = 0;
    std::string joined;
    gpt2::pre_tokenize(text, [&](size_t b, size_t e) {
      EXPECT_EQ(b, at) << text;
      EXPECT_LT(b, e) << text;
      EXPECT_TRUE(is_valid_utf8(std::string_view(text).substr(b, e - b))) << text;
      joined.append(text, b, e - b);
      at = e;
    });
    ASSERT_EQ(joined, text);
  }
}

// Printable Latin-1 bytes stand for themselves; the other 68 take U+0100.. in byte order.
TEST(Gpt2PreTokenizer, ByteTokensSpellEachByteAsOneCharacter) {
  EXPECT_EQ(gpt2::byte_token(' '), "\u0120");
  EXPECT_EQ(gpt2::byte_token('\n'), "\u010a");
  EXPECT_EQ(gpt2::byte_token('A'), "A");
  EXPECT_EQ(gpt2::byte_token(0xE9), "\u00e9");
  EXPECT_EQ(gpt2::byte_token(0), "\u0100");
  EXPECT_EQ(gpt2::byte_token(0x7F), "\u0121");  // after 0..32
  EXPECT_EQ(gpt2::byte_token(0xAD), "\u0143");  // the last of the 68
  std::vector<std::string> all;
  for (int b = 0; b < 256; ++b) {
    all.push_back(gpt2::byte_token(static_cast<uint8_t>(b)));
    std::string one;  // the byte's character in UTF-8
    append_utf8(gpt2::bytes_to_unicode()[size_t(b)], one);
    EXPECT_EQ(all.back(), one) << b;
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end()) << "two bytes share a spelling";
  EXPECT_EQ(gpt2::unicode_to_byte(U'\u0143'), 0xAD);
  EXPECT_EQ(gpt2::unicode_to_byte(U'\u0144'), -1);
  EXPECT_EQ(gpt2::unicode_to_byte(U'\u00ad'), -1) << "byte 0xAD is spelled U+0143, not itself";
  EXPECT_EQ(gpt2::unicode_to_byte(U'\U0010ffff'), -1);
}

}  // namespace
}  // namespace pretrain::gpt2_pretokenize_test
