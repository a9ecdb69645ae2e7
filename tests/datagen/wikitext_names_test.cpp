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

// What decode_html_entity appends for the entity at the start of `text`, and the bytes it takes
// (0: none there).
struct Decoded {
  std::string text;
  size_t used = 0;
};
Decoded decode(std::string_view text) {
  Decoded d;
  d.used = decode_html_entity(text, d.text);
  return d;
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
  EXPECT_EQ(decode("&nbsp;").text, "\u00A0");
  EXPECT_EQ(decode("&mdash; x").text, "\u2014");
  EXPECT_EQ(decode("&AElig;").text, "\u00C6");  // names are case-sensitive: Æ and æ
  EXPECT_EQ(decode("&aelig;").text, "\u00E6");
  EXPECT_EQ(decode("&ZeroWidthSpace;").text, "\u200B");  // an HTML 5 name
  EXPECT_EQ(decode("&#160;").text, "\u00A0");
  EXPECT_EQ(decode("&#x2014;").text, "\u2014");
  EXPECT_EQ(decode("&#X41;").text, "A");
  EXPECT_EQ(decode("&#x1F600;").text, "\U0001F600");
  Decoded d = decode("&#8212;tail");
  EXPECT_EQ(d.text, "\u2014");
  EXPECT_EQ(d.used, 7u);
}

TEST(WikitextNames, TwiceEscapedEntitiesDecodeThrough) {
  Decoded lt = decode("&amp;lt;b"), nbsp = decode("&amp;amp;nbsp;"), amp = decode("&amp;x");
  EXPECT_EQ(lt.text, "<");
  EXPECT_EQ(lt.used, 8u);
  EXPECT_EQ(nbsp.text, "\u00A0");
  EXPECT_EQ(nbsp.used, 14u);
  EXPECT_EQ(amp.text, "&");  // "&amp;" then no entity: just the ampersand
  EXPECT_EQ(amp.used, 5u);
}

TEST(WikitextNames, ControlsAreConsumedButNotWritten) {
  Decoded bell = decode("&#7;");
  EXPECT_EQ(bell.text, "");
  EXPECT_EQ(bell.used, 4u);
  EXPECT_EQ(decode("&#x85;").text, "");  // C1
  EXPECT_EQ(decode("&#x85;").used, 6u);
  EXPECT_EQ(decode("&#9;").text, "\t");
  EXPECT_EQ(decode("&#10;").text, "\n");
}

TEST(WikitextNames, WhatIsNoEntity) {
  for (std::string_view text : {"", "amp;", "&", "&amp", "&amp ;", "&Amp;", "&#x;", "&#12a;", "&#xG1;", "& amp;",
                                "&#123456789;",  // more than 8 digits
                                "&abcdefghijklmnopqrstuvwxyzabcdefgh;"}) {  // longer than any name
    Decoded d = decode(text);
    EXPECT_EQ(d.used, 0u) << text;
    EXPECT_EQ(d.text, "") << text;
  }
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
