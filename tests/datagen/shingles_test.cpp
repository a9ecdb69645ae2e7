// The shingle text: the same words as datatrove's simplify_text (the expected strings below are its
// output, datatrove 0.9.0, for the same inputs), and shingles as xxh3-64 of n words joined by spaces.
#include "datagen/dedup/shingles.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/hash.h"

namespace pretrain::shingles_test {
namespace {

std::string simplified(std::string_view text) {
  std::string out;
  simplify_for_shingles(text, out);
  return out;
}

TEST(Shingles, SimplifiesAsDatatrove) {
  EXPECT_EQ(simplified("Hello, World! It's 3.14 or 1,000,000 — ÉCOLE naïve café"),
            "hello world it s 0 or 0 0 ecole naive cafe");
  EXPECT_EQ(simplified("日本語のテキスト、です。１２３ and ٣٫٤ and 1.2.3"), "日本語のテキスト てす 0 and 0 and 0 0");
  EXPECT_EQ(simplified("tab\there\nnew\u00a0nbsp\u2003em\u200bzw ; \u037e q"), "tab here new nbsp em\u200bzw ; q");
  EXPECT_EQ(simplified("C++ (language) [1] {x} <tag> a/b a-b a_b a@b 50% $5 #3 ~x ^y `z` 'q' \"r\""),
            "c language 0 x tag a b a b a b a b 0 0 0 x y z q r");
  EXPECT_EQ(simplified("Ǆemal ǅ ǆ Ⅻ ⅻ ß ẞ ﬀ K Å"), "ǆemal ǆ ǆ ⅻ ⅻ ß ß ﬀ k a");
  EXPECT_EQ(simplified("İstanbul straße ﬁne ①②  x\u0301y  a \u0301 b"), "istanbul straße ﬁne ①② xy a b");
  EXPECT_EQ(simplified("   "), "");
  EXPECT_EQ(simplified(""), "");
}

TEST(Shingles, NumbersTakeOneSeparator) {
  EXPECT_EQ(simplified("1.2.3"), "0 0");       // "1.2" then "." then "3"
  EXPECT_EQ(simplified("abc123def"), "abc0def");
  EXPECT_EQ(simplified("7."), "0");            // a separator without digits after it stays punctuation
  EXPECT_EQ(simplified("x 12,5 y"), "x 0 y");
}

TEST(Shingles, InvalidUtf8IsAWordCharacter) {
  EXPECT_EQ(simplified("a\xff b"), "a\xEF\xBF\xBD b");
}

TEST(Shingles, HashesNWordsJoinedBySpaces) {
  std::vector<uint64_t> h;
  std::string text = "one two three four five six";
  shingle_hashes(text, 5, h);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], xxh3_bytes("one two three four five", 23));
  EXPECT_EQ(h[1], xxh3_bytes("two three four five six", 23));
  shingle_hashes(text, 1, h);
  ASSERT_EQ(h.size(), 6u);
  EXPECT_EQ(h[5], xxh3_bytes("six", 3));
}

TEST(Shingles, FewerWordsThanNGiveNone) {
  std::vector<uint64_t> h = {1};
  shingle_hashes("a b c d", 5, h);
  EXPECT_TRUE(h.empty());
  shingle_hashes("", 1, h);
  EXPECT_TRUE(h.empty());
}

}  // namespace
}  // namespace pretrain::shingles_test
