// XmlPageBuilder: MediaWiki's export schema from element events, without expat. The reader's own
// tests (xml_pages_test.cpp) cover the same rules through real XML; these pin the builder's
// contract with the reader: which fields are kept, what a fault returns, and the state the reader
// words its errors with.
#include "datagen/wikiprep/xml_page_builder.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace pretrain::xml_page_builder_test {
namespace {

// Drives a builder the way expat would: start tags with attributes, character data, end tags.
struct Events {
  XmlPageBuilder builder;
  std::vector<std::string> faults;

  Events& open(const char* name, std::initializer_list<const char*> attributes = {}, uint64_t offset = 0) {
    std::vector<const char*> attrs(attributes);
    attrs.push_back(nullptr);
    note(builder.start(name, attrs.data(), offset));
    return *this;
  }
  Events& text(const std::string& data) {
    if (std::string* sink = builder.sink()) *sink += data;
    return *this;
  }
  Events& close() {
    note(builder.end());
    return *this;
  }
  Events& element(const char* name, const std::string& data) { return open(name).text(data).close(); }
  void note(std::string fault) {
    if (!fault.empty()) faults.push_back(std::move(fault));
  }
};

void siteinfo(Events& e) {
  e.open("siteinfo").element("sitename", "Wikipedia").element("dbname", "zh_yuewiki")
      .element("base", "https://zh-yue.wikipedia.org/wiki/Main_Page");
  e.open("namespaces").open("namespace", {"key", "0"}).close().open("namespace", {"key", "14"}).text("Category");
  e.close().close().close();
}

TEST(XmlPageBuilder, SiteinfoAndAPage) {
  Events e;
  e.open("mediawiki");
  siteinfo(e);
  EXPECT_EQ(e.builder.site().lang, "zh-yue");  // from dbname, no xml:lang
  EXPECT_EQ(e.builder.site().namespaces.at(14), "Category");

  e.open("page", {}, 1234).element("title", "Hong Kong").element("ns", " 0\n").element("id", "42");
  EXPECT_TRUE(e.builder.in_page());
  e.open("redirect", {"title", "HK"}).close();
  e.open("revision").element("id", "7").open("text", {"bytes", "5"});
  EXPECT_TRUE(e.builder.in_text());
  e.builder.text() += "hello";  // the fast path appends content here directly
  e.close();
  EXPECT_FALSE(e.builder.in_text());
  e.open("contributor").element("username", "not kept").close();
  e.close().close();  // </revision></page>

  std::vector<Page> pages = e.builder.take_ready();
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_EQ(pages[0].title, "Hong Kong");
  EXPECT_EQ(pages[0].ns, 0);
  EXPECT_EQ(pages[0].id, 42);
  EXPECT_EQ(pages[0].revision_id, 7);
  EXPECT_EQ(pages[0].text, "hello");
  EXPECT_TRUE(pages[0].redirect);
  EXPECT_EQ(pages[0].redirect_target, "HK");
  EXPECT_EQ(pages[0].byte_offset, 1234u);
  EXPECT_EQ(pages[0].ordinal, 0u);
  EXPECT_TRUE(e.builder.take_ready().empty());  // handed out once
  EXPECT_TRUE(e.faults.empty());
}

TEST(XmlPageBuilder, LastRevisionAndNamespaceFromTheTitle) {
  Events e;
  e.open("mediawiki");
  siteinfo(e);
  e.open("page").element("title", "Category:Cities");  // no <ns>: an old schema
  e.open("revision").element("id", "1").element("text", "first").close();
  e.open("revision").element("id", "2").close();  // the last revision has no <text>
  e.close();
  e.open("page").element("title", "Plain").close();
  std::vector<Page> pages = e.builder.take_ready();
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_EQ(pages[0].ns, 14);
  EXPECT_EQ(pages[0].revision_id, 2);
  EXPECT_EQ(pages[0].text, "");
  EXPECT_EQ(pages[1].ns, 0);
  EXPECT_EQ(pages[1].ordinal, 1u);
}

TEST(XmlPageBuilder, MarkupInsideAKeptFieldStaysInIt) {
  Events e;
  e.open("mediawiki").open("page").open("title").text("a").open("b").text("b").close().text("c").close();
  EXPECT_EQ(e.builder.page().title, "abc");
  EXPECT_EQ(e.builder.depth(), 2);
}

TEST(XmlPageBuilder, FaultsComeBackAsMessages) {
  Events wrong_root;
  wrong_root.open("html");
  ASSERT_EQ(wrong_root.faults.size(), 1u);
  EXPECT_NE(wrong_root.faults[0].find("expected the root element <mediawiki>, found <html>"), std::string::npos);
  EXPECT_FALSE(wrong_root.builder.saw_root());

  Events e;
  e.open("mediawiki").open("page").element("ns", "zero").element("id", "12x");
  e.open("revision").element("id", "\x01").close();
  e.open("siteinfo");
  ASSERT_EQ(e.faults.size(), 3u);
  EXPECT_EQ(e.faults[0], "expected an integer in <ns>, found \"zero\"");
  EXPECT_EQ(e.faults[1], "expected an integer in <id>, found \"12x\"");
  EXPECT_EQ(e.faults[2], "expected an integer in <revision id>, found \"\\x01\"");

  Events bad_key;
  bad_key.open("mediawiki").open("siteinfo").open("namespaces").open("namespace", {"key", "x"});
  ASSERT_EQ(bad_key.faults.size(), 1u);
  EXPECT_EQ(bad_key.faults[0], "expected an integer in <namespace key>, found \"x\"");
  EXPECT_EQ(bad_key.builder.sink(), nullptr);  // the namespace's name is not kept
}

TEST(XmlPageBuilder, PrintableBytes) {
  EXPECT_EQ(printable_bytes("a\nb\\c\xff"), "a\\nb\\x5cc\\xff");
}

}  // namespace
}  // namespace pretrain::xml_page_builder_test
