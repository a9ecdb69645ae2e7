// UTF-8 validation and repair: the Unicode standard's "U+FFFD substitution of maximal subparts"
// examples (§3.9, Tables 3-8 to 3-11, the same practice as WHATWG's decoder), and valid text
// passing through unchanged.
#include "common/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace pretrain::utf8_test {
namespace {

std::string repaired(std::string_view s, size_t* count = nullptr) {
  std::string out;
  size_t n = append_repaired_utf8(s, out);
  if (count) *count = n;
  return out;
}

const std::string R(kReplacementUtf8);

struct Case {
  std::string input, expected;
  size_t replacements;
};

TEST(Utf8, MaximalSubpartExamples) {
  const Case cases[] = {
      // Table 3-8: a truncated 4-byte, a truncated 3-byte, a truncated 2-byte, stray continuations.
      {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", "a" + R + R + R + "b" + R + "c" + R + R + "d", 6},
      // Table 3-9: non-shortest forms, every byte its own subpart.
      {"\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41", R + R + R + R + R + R + R + R + "A", 8},
      // Table 3-10: surrogates (ED A0..BF ..) and past U+10FFFF (F4 90..).
      {"\xED\xA0\x80\xED\xBF\xBF\xED\xAF\x41", R + R + R + R + R + R + R + R + "A", 8},
      {"\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42", R + R + R + R + R + "A" + R + R + "B", 7},
      // Table 3-11: truncated sequences, each a single maximal subpart.
      {"\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41", R + R + R + R + "A", 4},
      // Five- and six-byte forms of old UTF-8, and bytes that never occur.
      {"\xF8\x88\x80\x80\x80", R + R + R + R + R, 5},
      {"\xFC\x84\x80\x80\x80\x80", R + R + R + R + R + R, 6},
      {"\xFE\xFF", R + R, 2},
      {"\xC1\xBF", R + R, 2},
      // A lead byte followed by ASCII: the ASCII survives.
      {"\xC2\x41", R + "A", 1},
      {"\xE2\x82", R, 1},     // truncated at the end of the input
      {"\xF0\x9F\x98", R, 1},  // a 4-byte emoji cut short
      {"\x80", R, 1},
  };
  for (const Case& c : cases) {
    size_t count = 0;
    EXPECT_EQ(repaired(c.input, &count), c.expected) << ::testing::PrintToString(c.input);
    EXPECT_EQ(count, c.replacements) << ::testing::PrintToString(c.input);
    EXPECT_FALSE(is_valid_utf8(c.input));
    std::string in_place = c.input;
    EXPECT_EQ(repair_utf8(in_place), c.replacements);
    EXPECT_EQ(in_place, c.expected);
  }
}

TEST(Utf8, BoundaryCodePointsAreValid) {
  const std::string valid[] = {
      std::string("\x00", 1), "\x7F", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF" /* U+D7FF */,
      "\xEE\x80\x80" /* U+E000 */, "\xEF\xBF\xBD", "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF" /* U+10FFFF */,
  };
  for (const std::string& s : valid) {
    EXPECT_TRUE(is_valid_utf8(s)) << ::testing::PrintToString(s);
    EXPECT_EQ(repaired(s), s);
  }
  auto* p = reinterpret_cast<const uint8_t*>("\xF4\x8F\xBF\xBF");
  Utf8Step step = decode_utf8(p, p + 4);
  EXPECT_TRUE(step.valid);
  EXPECT_EQ(step.length, 4u);
  EXPECT_EQ(static_cast<uint32_t>(step.code_point), 0x10FFFFu);
}

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string text =
      "Plain ASCII, then Latin é ü ß, Greek Ελληνικά, Cyrillic Кириллица, CJK 日本語の文章, "
      "Hebrew עברית and Arabic العربية (right to left), emoji 😀👍🏽, and U+FFFD itself: \xEF\xBF\xBD.";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(valid_utf8_prefix(text), text.size());
  std::string copy = text;
  EXPECT_EQ(repair_utf8(copy), 0u);
  EXPECT_EQ(copy, text);
}

TEST(Utf8, ValidPrefixStopsAtFirstError) {
  EXPECT_EQ(valid_utf8_prefix("abcdefghij\xC3\xA9k\xFFxyz"), 13u);
  EXPECT_EQ(valid_utf8_prefix(""), 0u);
}

TEST(Utf8, AppendUtf8EncodesAndRejectsSurrogates) {
  std::string out;
  append_utf8(U'A', out);
  append_utf8(U'é', out);
  append_utf8(U'日', out);
  append_utf8(U'😀', out);
  EXPECT_EQ(out, "Aé日😀");
  out.clear();
  append_utf8(0xD800, out);
  append_utf8(0x110000, out);
  EXPECT_EQ(out, R + R);
}

TEST(Utf8, EveryCodePointRoundTrips) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    append_utf8(cp, s);
    auto* p = reinterpret_cast<const uint8_t*>(s.data());
    Utf8Step step = decode_utf8(p, p + s.size());
    ASSERT_TRUE(step.valid) << std::hex << static_cast<uint32_t>(cp);
    ASSERT_EQ(static_cast<uint32_t>(step.code_point), static_cast<uint32_t>(cp));
    ASSERT_EQ(step.length, s.size());
  }
}

// The inline check agrees with decode_utf8 (the reference) on every lead byte followed by every
// second byte, with each later byte a continuation or not, whole and cut short.
TEST(Utf8, InlineSequenceCheckMatchesDecoder) {
  for (unsigned lead = 0x80; lead <= 0xFF; ++lead)
    for (unsigned second = 0; second <= 0xFF; ++second)
      for (uint8_t later : {uint8_t{0x80}, uint8_t{0xBF}, uint8_t{0x41}, uint8_t{0xC0}}) {
        const uint8_t bytes[4] = {static_cast<uint8_t>(lead), static_cast<uint8_t>(second), later, later};
        for (size_t size = 1; size <= 4; ++size) {
          Utf8Step step = decode_utf8(bytes, bytes + size);
          ASSERT_EQ(valid_utf8_sequence(bytes, bytes + size), step.valid ? step.length : 0)
              << std::hex << lead << " " << second << " " << unsigned{later} << " size " << size;
        }
      }
}

// Random bytes: the repair is always valid, idempotent, and counts the U+FFFDs it added.
TEST(Utf8, RandomBytesRepairToValidText) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 2000; ++round) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 128 : 0x80 + rng() % 128);
    size_t count = 0;
    std::string fixed = repaired(s, &count);
    ASSERT_TRUE(is_valid_utf8(fixed));
    ASSERT_EQ(repaired(fixed), fixed);
    size_t had = 0, has = 0;
    for (size_t i = 0; (i = s.find(kReplacementUtf8, i)) != std::string::npos; ++i) ++had;
    for (size_t i = 0; (i = fixed.find(kReplacementUtf8, i)) != std::string::npos; ++i) ++has;
    ASSERT_EQ(has, had + count);
    ASSERT_EQ(is_valid_utf8(s), count == 0);
  }
}

}  // namespace
}  // namespace pretrain::utf8_test
