// xml_text: the <text> content scanner of XmlPageReader's fast path. Each case checks what the scan
// appends, where it stops and why; a cut construct must stop before its first byte (so the reader
// can retry it whole), and anything the scanner does not decode must be left to expat.
#include "datagen/wikiprep/xml_text_scan.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace pretrain::xml_text::xml_text_scan_test {
namespace {

struct Scanned {
  std::string text;
  size_t stop;
  ScanEnd end;
};

Scanned scan(std::string_view bytes) {
  Scanned s;
  Scan r = scan_content(bytes.data(), 0, bytes.size(), s.text);
  s.stop = r.stop;
  s.end = r.end;
  return s;
}

// "ab" then something the scan stops before: it keeps "ab" and stops at index 2, for `why`.
void expect_stops_after_ab(std::string_view bytes, ScanEnd why) {
  Scanned s = scan(bytes);
  EXPECT_EQ(s.end, why) << bytes;
  EXPECT_EQ(s.stop, 2u) << bytes;
  EXPECT_EQ(s.text, "ab") << bytes;
}

TEST(XmlTextScan, PlainTextToTheChunksEnd) {
  // Long enough for the 16-byte loop, with tabs, line feeds and wikilinks' "]]".
  std::string text = "[[Anarchism]] is a\tpolitical philosophy.\n[[Category:Political]] ]] ] x";
  Scanned s = scan(text);
  EXPECT_EQ(s.text, text);
  EXPECT_EQ(s.stop, text.size());
  EXPECT_EQ(s.end, ScanEnd::chunk_end);
}

TEST(XmlTextScan, EntitiesReferencesAndLineEnds) {
  Scanned s = scan("a &lt;b&gt; &amp; &apos;&quot; &#65;&#x1F600;\r\nc\rd</text>");
  EXPECT_EQ(s.text, "a <b> & '\" A\xF0\x9F\x98\x80\nc\nd");
  EXPECT_EQ(s.end, ScanEnd::markup);
  EXPECT_EQ(s.stop, std::string_view("a &lt;b&gt; &amp; &apos;&quot; &#65;&#x1F600;\r\nc\rd").size());
}

TEST(XmlTextScan, MultibyteText) {
  std::string text = "日本語のテキスト Ελληνικά кириллица 😀";
  Scanned s = scan(text);
  EXPECT_EQ(s.text, text);
  EXPECT_EQ(s.end, ScanEnd::chunk_end);
}

TEST(XmlTextScan, WhatExpatMustJudgeStopsTheScanAtItsFirstByte) {
  const std::string_view kCases[] = {
      "ab<!-- c -->",       // a comment (or any markup)
      "ab<![CDATA[x]]>",    // CDATA
      "ab]]>",              // "]]>" is not allowed in content
      "ab&nbsp;",           // an entity XML does not predefine
      "ab&#0;",             // a reference to a character XML forbids
      "ab&#xD800;",         // a surrogate
      "ab&#000000065;",     // more than 8 digits
      "ab&#;",              // no digits
      "ab\x01",             // a control character
      "ab\xC0\x80",         // an overlong form
      "ab\xED\xA0\x80",     // a surrogate in UTF-8
      "ab\xEF\xBF\xBE",     // U+FFFE
      "ab\xF4\x90\x80\x80", // past U+10FFFF
      "ab\x80",             // a continuation byte alone
  };
  for (std::string_view bytes : kCases) expect_stops_after_ab(bytes, ScanEnd::markup);
}

TEST(XmlTextScan, ConstructsCutByTheChunksEndStopBeforeTheirFirstByte) {
  const std::string_view kCases[] = {"ab&", "ab&l", "ab&am", "ab&#x1F6", "ab&#12", "ab\r", "ab]", "ab]]",
                                     "ab\xE6\x97", "ab\xF0\x9F\x98", "ab\xC3"};
  for (std::string_view bytes : kCases) expect_stops_after_ab(bytes, ScanEnd::cut);
}

TEST(XmlTextScan, EveryChunkingGivesTheSameText) {
  // What XmlPageReader does with a cut: keep the rest and scan it again with more bytes.
  std::string text = "x &amp; y\r\n日本 &#x1F600; ]] z &quot;q&quot;\r";
  std::string whole = scan(text + "<").text;
  for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
    std::string out, pending;
    for (size_t at = 0; at < text.size(); at += chunk) {
      pending += text.substr(at, chunk);
      Scan r = scan_content(pending.data(), 0, pending.size(), out);
      ASSERT_NE(r.end, ScanEnd::markup) << chunk;
      pending.erase(0, r.stop);
    }
    pending += "<";
    Scan r = scan_content(pending.data(), 0, pending.size(), out);
    EXPECT_EQ(r.end, ScanEnd::markup);
    EXPECT_EQ(out, whole) << "chunk " << chunk;
  }
}

TEST(XmlTextScan, XmlCharLengthMatchesTheUtf8Rules) {
  auto length = [](std::string_view s) {
    return xml_char_length(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  EXPECT_EQ(length("\xC3\xA9"), 2);
  EXPECT_EQ(length("\xE6\x97\xA5"), 3);
  EXPECT_EQ(length("\xF0\x9F\x98\x80"), 4);
  EXPECT_EQ(length("\xEF\xBF\xBD"), 3);   // U+FFFD is a character
  EXPECT_EQ(length("\xEF\xBF\xBF"), -1);  // U+FFFF is not
  EXPECT_EQ(length("\xE0\x80\x80"), -1);  // overlong
  EXPECT_EQ(length("\xF0\x9F"), 0);       // cut
  EXPECT_EQ(length("\xC3"), 0);
  EXPECT_EQ(length("\xC3\x28xx"), -1);
}

TEST(XmlTextScan, DecodeReference) {
  std::string out;
  EXPECT_EQ(decode_reference("&amp;x", 6, out), 5u);
  EXPECT_EQ(decode_reference("&#x10FFFF;", 10, out), 10u);
  EXPECT_EQ(decode_reference("&#x110000;", 10, out), kNotAReference);
  EXPECT_EQ(decode_reference("&#9;", 4, out), 4u);
  EXPECT_EQ(decode_reference("&ap", 3, out), 0u);
  EXPECT_EQ(decode_reference("&bogus;", 7, out), kNotAReference);
  EXPECT_EQ(out, "&\xF4\x8F\xBF\xBF\t");
  EXPECT_TRUE(is_xml_char(0xFFFD));
  EXPECT_FALSE(is_xml_char(0xFFFE));
  EXPECT_FALSE(is_xml_char(0x1F));
}

TEST(XmlTextScan, TagEndAndTheTextTagsCutPrefix) {
  std::string_view tag = R"(<text bytes="5" note='a>b'>hello)";
  EXPECT_EQ(tag_end(tag.data(), 5, tag.size()), tag.find("'>") + 1);
  EXPECT_EQ(tag_end(tag.data(), 5, 20), 20u);  // the tag goes on past the chunk
  EXPECT_EQ(cut_prefix_of_text_tag("abc<tex", 7), 4u);
  EXPECT_EQ(cut_prefix_of_text_tag("abc<", 4), 1u);
  EXPECT_EQ(cut_prefix_of_text_tag("abc<tax", 7), 0u);
  EXPECT_EQ(cut_prefix_of_text_tag("", 0), 0u);
}

}  // namespace
}  // namespace pretrain::xml_text::xml_text_scan_test
