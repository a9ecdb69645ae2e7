// Exact hashes: which texts each normalization step makes equal, and the defaults (NFC and
// whitespace on, case off).
#include "datagen/dedup/exact_hash.h"

#include <gtest/gtest.h>

namespace pretrain::exact_hash_test {
namespace {

TEST(ExactHash, DefaultsFoldWhitespaceAndNfcButNotCase) {
  ExactOptions o;
  EXPECT_EQ(exact_hash("a  b\n\tc ", o), exact_hash("a b c", o));
  EXPECT_EQ(exact_hash("caf\u0065\u0301", o), exact_hash("caf\u00e9", o));  // e + combining acute = é
  EXPECT_NE(exact_hash("Cafe", o), exact_hash("cafe", o));
  EXPECT_EQ(exact_hash("x\u00a0y\u2003z", o), exact_hash("x y z", o));  // NBSP and EM SPACE are White_Space
  EXPECT_NE(exact_hash("ab", o), exact_hash("a b", o));
}

TEST(ExactHash, EachStepCanBeTurnedOff) {
  ExactOptions raw{false, false, false};
  EXPECT_NE(exact_hash("a  b", raw), exact_hash("a b", raw));
  EXPECT_NE(exact_hash("caf\u0065\u0301", raw), exact_hash("caf\u00e9", raw));
  EXPECT_EQ(exact_hash("abc", raw), xxh3_128("abc"));
  ExactOptions fold{false, false, true};
  EXPECT_EQ(exact_hash("STRASSE", fold), exact_hash("straße", fold));  // full case folding: ß → ss
  EXPECT_EQ(exact_hash("ΣΑΣ", fold), exact_hash("σας", fold));
}

TEST(ExactHash, NormalizedText) {
  ExactOptions all{true, true, true};
  EXPECT_EQ(normalize_for_exact("  Caf\u0065\u0301\n\nBAR  ", all), "caf\u00e9 bar");
  EXPECT_EQ(normalize_for_exact(" \t\n", ExactOptions{}), "");
  EXPECT_EQ(normalize_for_exact("ﬁ", ExactOptions{}), "ﬁ");  // NFC, not NFKC
}

TEST(ExactHash, HashIs128Bits) {
  Hash128 h = xxh3_128("hello");
  EXPECT_NE(h.low, 0u);
  EXPECT_NE(h.high, 0u);
  EXPECT_NE(h, xxh3_128("hellp"));
}

}  // namespace
}  // namespace pretrain::exact_hash_test
