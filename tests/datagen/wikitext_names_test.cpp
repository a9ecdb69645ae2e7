// The tables the wikitext cleaner looks names up in (wikitext_names.cpp): HTML entities, named and
// numeric, and what is no entity; interlanguage prefixes; the built-in File and Category names.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "datagen/wikiprep/wikitext.h"
#include "datagen/wikiprep/wikitext_internal.h"

namespace pretrain::wikitext_names_test {
namespace {

// What decode_html_entity appends for `text`, and the bytes it takes ("-" when it is no entity).
std::string decoded(std::string_view text, size_t* used = nullptr) {
  std::string out;
  size_t n = decode_html_entity(text, out);
  if (used) *used = n;
  return n == 0 ? "-" : out;
}

TEST(WikitextNames, DecodeHtmlEntity) {
  std::string out;
  EXPECT_EQ(decode_html_entity("&amp;rest", out), 5u);
  EXPECT_EQ(out, "&");
  out.clear();
  EXPECT_EQ(decode_html_entity("&#0;", out), 4u);  // NUL: consumed, nothing appended
  EXPECT_EQ(out, "");
  EXPECT_EQ(decode_html_entity("&nosuch;", out), 0u);
  EXPECT_EQ(decode_html_entity("&#;", out), 0u);
}

TEST(WikitextNames, NamedAndNumericEntities) {
  EXPECT_EQ(decoded("&nbsp;"), "\u00A0");
  EXPECT_EQ(decoded("&mdash; x"), "\u2014");
  EXPECT_EQ(decoded("&AElig;"), "\u00C6");  // names are case-sensitive: Æ and æ
  EXPECT_EQ(decoded("&aelig;"), "\u00E6");
  EXPECT_EQ(decoded("&ZeroWidthSpace;"), "\u200B");  // an HTML 5 name
  EXPECT_EQ(decoded("&#160;"), "\u00A0");
  EXPECT_EQ(decoded("&#x2014;"), "\u2014");
  EXPECT_EQ(decoded("&#X41;"), "A");
  EXPECT_EQ(decoded("&#x1F600;"), "\U0001F600");
  size_t used = 0;
  EXPECT_EQ(decoded("&#8212;tail", &used), "\u2014");
  EXPECT_EQ(used, 7u);
}

TEST(WikitextNames, TwiceEscapedEntitiesDecodeThrough) {
  size_t used = 0;
  EXPECT_EQ(decoded("&amp;lt;b", &used), "<");
  EXPECT_EQ(used, 8u);
  EXPECT_EQ(decoded("&amp;amp;nbsp;", &used), "\u00A0");
  EXPECT_EQ(used, 14u);
  EXPECT_EQ(decoded("&amp;x", &used), "&");  // "&amp;" then no entity: just the ampersand
  EXPECT_EQ(used, 5u);
}

TEST(WikitextNames, ControlsAreConsumedButNotWritten) {
  size_t used = 0;
  EXPECT_EQ(decoded("&#7;", &used), "");
  EXPECT_EQ(used, 4u);
  EXPECT_EQ(decoded("&#x85;"), "");  // C1
  EXPECT_EQ(decoded("&#9;"), "\t");
  EXPECT_EQ(decoded("&#10;"), "\n");
}

TEST(WikitextNames, WhatIsNoEntity) {
  for (std::string_view text : {"", "amp;", "&", "&amp", "&amp ;", "&Amp;", "&#x;", "&#12a;", "&#xG1;", "& amp;",
                                "&#123456789;",  // more than 8 digits
                                "&abcdefghijklmnopqrstuvwxyzabcdefgh;"})  // longer than any name
    EXPECT_EQ(decoded(text), "-") << text;
}

TEST(WikitextNames, LanguageCodes) {
  EXPECT_TRUE(is_language_code("de"));
  EXPECT_TRUE(is_language_code("zh-yue"));
  EXPECT_TRUE(is_language_code("simple"));
  EXPECT_FALSE(is_language_code("De"));
  EXPECT_FALSE(is_language_code("wikt"));
  EXPECT_FALSE(is_language_code("doi"));
  EXPECT_FALSE(is_language_code("w"));
}

TEST(WikitextNames, LanguageCodesWithSuffixesAndTheLongOnes) {
  for (const char* code : {"en", "ast", "be-tarask", "roa-rup", "zh-min-nan", "be-x-old", "zh-classical", "fiu-vro"})
    EXPECT_TRUE(is_language_code(code)) << code;
  for (const char* code : {"", "e", "abcd", "de-", "-de", "de--x", "de_x", "d3", "mw", "iso", "wmf", "commons", "wikipedia"})
    EXPECT_FALSE(is_language_code(code)) << code;
}

TEST(WikitextNames, BuiltinFileAndCategoryNames) {
  const auto& names = builtin_dropped_namespaces();
  auto has = [&](std::string_view n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (std::string_view n : {"file", "image", "category", "datei", "kategorie", "fichier", "ファイル", "分类", "категория"})
    EXPECT_TRUE(has(n)) << n;
  EXPECT_FALSE(has("media"));  // "Media:" links show their label: not dropped
  EXPECT_FALSE(has("talk"));
  EXPECT_FALSE(has("File"));  // Latin names are kept lowercase: the cleaner compares them folded
}

}  // namespace
}  // namespace pretrain::wikitext_names_test
