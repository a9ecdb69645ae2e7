// The wikitext cleaner, one rule per test; tests named DiffersFromWikiextractor_* are the places
// where we deliberately do not do what wikiextractor 3.0.7 --no-templates does.
#include "datagen/wikiprep/wikitext.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/utf8.h"

namespace pretrain {
namespace {

std::string clean(std::string_view s, const WikitextOptions& o = {}) { return clean_wikitext(s, o); }

// ---- templates and parser functions

TEST(Wikitext, TemplatesAreRemoved) {
  EXPECT_EQ(clean("a {{cite web|url=http://x|title=T}} b"), "a b");
  EXPECT_EQ(clean("{{Infobox\n| name = X\n| born = 1900\n}}\nText."), "Text.");
}

TEST(Wikitext, NestedTemplatesAndParserFunctions) {
  EXPECT_EQ(clean("a{{#if:{{{1|}}}|{{lc:{{PAGENAME}}}}|{{x|{{y|{{z}}}}}}}}b"), "ab");
  EXPECT_EQ(clean("x {{{param|{{default}}}}} y"), "x y");
  EXPECT_EQ(clean("{{a|[[b|c]]|{{d}}}} e"), "e");
}

TEST(Wikitext, UnbalancedBracesLeaveNoBraces) {
  EXPECT_EQ(clean("before {{unclosed template"), "before unclosed template");
  EXPECT_EQ(clean("text }} more"), "text more");
  EXPECT_EQ(clean("{{{{{x}}}}} after"), "after");
}

// ---- tables

TEST(Wikitext, TablesAreRemoved) {
  EXPECT_EQ(clean("Before.\n{| class=\"wikitable\"\n|-\n! H1 !! H2\n|-\n| a || b\n|}\nAfter."),
            "Before.\nAfter.");
}

TEST(Wikitext, NestedTables) {
  EXPECT_EQ(clean("A\n{|\n| outer\n{|\n| inner\n|}\n| outer again\n|}\nB"), "A\nB");
  EXPECT_EQ(clean("A\n:{| \n| indented\n|}\nB"), "A\nB");
}

TEST(Wikitext, HtmlTablesAreRemoved) {
  EXPECT_EQ(clean("A <table><tr><td>x<table><tr><td>y</td></tr></table></td></tr></table> B"), "A B");
}

TEST(Wikitext, TableMadeByTemplateLeavesNoRows) {
  EXPECT_EQ(clean("Text\n{{table start}}\n|-\n| cell\n|}\nMore"), "Text\nMore");
}

// ---- refs, comments and extension tags

TEST(Wikitext, RefsBothForms) {
  EXPECT_EQ(clean("Fact.<ref>{{cite book|title=B}}</ref> Next.<ref name=\"x\" /> End."),
            "Fact. Next. End.");
  EXPECT_EQ(clean("A<ref name=x/>B<REF group=\"n\">note</REF>C"), "ABC");
}

TEST(Wikitext, RefNameWithSlashIsNotSelfClosing) {
  // wikiextractor leaks this one: "a/b" has a '/' but the tag does not end in "/>".
  EXPECT_EQ(clean("Claim.<ref name=\"a/b\">Source, p. 4.</ref> Rest."), "Claim. Rest.");
}

TEST(Wikitext, UnterminatedRefDropsOnlyItsTag) {
  EXPECT_EQ(clean("Text <ref>never closed"), "Text never closed");
}

TEST(Wikitext, Comments) {
  EXPECT_EQ(clean("a<!-- hidden {{x}} [[y]] -->b"), "ab");
  EXPECT_EQ(clean("kept\n<!-- unterminated comment\nrest"), "kept");
  EXPECT_EQ(clean("x<!-- --><!---->y"), "xy");
}

TEST(Wikitext, MathIsDropped) {
  EXPECT_EQ(clean("where <math>\\frac{1}{2}}}</math> is half"), "where is half");
}

TEST(Wikitext, GalleryIsDropped) {
  EXPECT_EQ(clean("A\n<gallery>\nFile:a.jpg|Caption [[x]]\n</gallery>\nB"), "A\nB");
}

TEST(Wikitext, SyntaxhighlightAndSourceAndPreAreDropped) {
  EXPECT_EQ(clean("Code:\n<syntaxhighlight lang=\"c\">int main() { return 0; }</syntaxhighlight>\nEnd"),
            "Code:\nEnd");
  EXPECT_EQ(clean("x <source lang=python>print(1)</source> y <pre>a  b</pre> z"), "x y z");
}

TEST(Wikitext, NowikiIsLiteral) {
  EXPECT_EQ(clean("Write <nowiki>[[link]] and {{tpl}} and ''x''</nowiki> here"),
            "Write [[link]] and {{tpl}} and ''x'' here");
  EXPECT_EQ(clean("a<nowiki/>b &amp; <nowiki>&lt;</nowiki>"), "ab & <");
}

TEST(Wikitext, IncludeonlyIsDroppedNoincludeKept) {
  EXPECT_EQ(clean("a<includeonly>hidden</includeonly><noinclude>shown</noinclude>"), "ashown");
}

// ---- links

TEST(Wikitext, InternalLinks) {
  EXPECT_EQ(clean("[[Target|label]] and [[Plain]]"), "label and Plain");
  EXPECT_EQ(clean("[[ Spaced target | spaced label ]]."), "spaced label.");
  EXPECT_EQ(clean("[[Section#Part|part]] [[#Local]]"), "part #Local");
}

TEST(Wikitext, LinkTrails) {
  EXPECT_EQ(clean("many [[target]]s and [[bus|buse]]s"), "many targets and buses");
}

TEST(Wikitext, PipeTrickShowsTarget) { EXPECT_EQ(clean("[[Paris|]]"), "Paris"); }

TEST(Wikitext, FilesAndImagesWithNestedLinksInCaptions) {
  EXPECT_EQ(clean("A [[File:X.jpg|thumb|A [[caption]] with [[a|links]] and [http://x.org site]]] B"),
            "A B");
  EXPECT_EQ(clean("[[Image:Y.png|left]]Text"), "Text");
  EXPECT_EQ(clean("[[image:y.png]][[FILE:z.svg|x]]t"), "t");
}

TEST(Wikitext, LocalizedNamespaces) {
  EXPECT_EQ(clean("a[[Datei:X.jpg|mini|Bild]]b[[Fichier:Y.png]]c[[Αρχείο:Z.jpg|x]]d[[ファイル:W.png|x]]e"),
            "abcde");
  EXPECT_EQ(clean("a[[Категория:Ф]][[Κατηγορία:Χ]][[カテゴリ:Y]][[Kategorie:Z]]b"), "ab");
}

TEST(Wikitext, NamespacesFromSiteinfo) {
  WikitextOptions o;
  o.file_namespaces = {"Tiedosto_X"};
  o.category_namespaces = {"Luokka Y"};
  EXPECT_EQ(clean("a[[tiedosto x:K.jpg|c]][[Luokka_Y:Z]]b", o), "ab");
  EXPECT_EQ(clean("a[[tiedosto x:K.jpg|c]]b"), "acb");  // unknown namespace: a link like any other
}

TEST(Wikitext, Categories) {
  EXPECT_EQ(clean("Text.\n[[Category:Things]]\n[[Category:Stuff| ]]"), "Text.");
}

TEST(Wikitext, InterlanguageLinks) {
  EXPECT_EQ(clean("Text.\n[[de:Text]]\n[[fr:Texte]]\n[[zh-min-nan:Bûn]]\n[[simple:Text]]"), "Text.");
  WikitextOptions keep;
  keep.drop_interlanguage = false;
  EXPECT_EQ(clean("[[de:Text]]", keep), "de:Text");
}

TEST(Wikitext, ExternalLinks) {
  EXPECT_EQ(clean("See [http://example.org the site] now"), "See the site now");
  EXPECT_EQ(clean("Source[https://example.org/x?a=1].\n"), "Source.");  // [url] alone: nothing
  EXPECT_EQ(clean("Bare http://example.org/page stays"), "Bare http://example.org/page stays");
  EXPECT_EQ(clean("[//example.org protocol-relative]"), "protocol-relative");
  EXPECT_EQ(clean("[not a link] stays"), "[not a link] stays");
}

TEST(Wikitext, ExternalLinkLabelWithInternalLink) {
  // wikiextractor leaks "[[University|UC]]" here: its link pass runs after the external one.
  EXPECT_EQ(clean("\"Talk\" [http://x.org/t (talk at [[University|UC]], 1962)] end"),
            "\"Talk\" (talk at UC, 1962) end");
}

// ---- formatting, entities, magic words

TEST(Wikitext, BoldAndItalic) {
  EXPECT_EQ(clean("'''Bold''' and ''italic'' and '''''both'''''"), "Bold and italic and both");
  EXPECT_EQ(clean("'''Smith''''s book, l'amour"), "Smith's book, l'amour");
}

TEST(Wikitext, HtmlFormattingTagsKeepText) {
  EXPECT_EQ(clean("m<sup>2</sup> and <span style=\"x\">span</span> <b>b</b><br/>next"),
            "m2 and span b next");
  EXPECT_EQ(clean("a < b and c<d"), "a < b and c<d");  // not tags
}

TEST(Wikitext, Entities) {
  EXPECT_EQ(clean("AT&amp;T &lt;tag&gt; &eacute;t&eacute; &#8212; &#x2014; &mdash;"),
            "AT&T <tag> été — — —");
  EXPECT_EQ(clean("10&nbsp;km &unknown; & lone"), "10 km &unknown; & lone");
}

TEST(Wikitext, DoubleEscapedEntities) {
  // The XML's "&amp;amp;nbsp;" reaches us as "&amp;nbsp;": a no-break space, not text "&nbsp;".
  EXPECT_EQ(clean("10&amp;nbsp;km and &amp;amp;amp; and &amp;#8212;"), "10 km and & and —");
}

TEST(Wikitext, MagicWordsAreRemoved) {
  EXPECT_EQ(clean("__NOTOC__\nText __TOC__ here.\n__目次__"), "Text here.");
  EXPECT_EQ(clean("snake_case and __init__"), "snake_case and __init__");
}

// ---- lines: headings, lists, whitespace, paragraphs

TEST(Wikitext, HeadingsAreOwnLines) {
  EXPECT_EQ(clean("Intro.\n== History ==\nOld.\n=== Early ''days'' ===\nEarlier."),
            "Intro.\nHistory\nOld.\nEarly days\nEarlier.");
}

TEST(Wikitext, HeadingsOfEmptySectionsAreDropped) {
  EXPECT_EQ(clean("Intro.\n== Empty ==\n{{reflist}}\n== Full ==\nText."), "Intro.\nFull\nText.");
  EXPECT_EQ(clean("== A ==\n=== B ===\nText."), "A\nB\nText.");
}

TEST(Wikitext, HeadingOptions) {
  WikitextOptions period;
  period.heading_period = true;
  EXPECT_EQ(clean("== History ==\nOld.\n== Why? ==\nBecause.", period), "History.\nOld.\nWhy?\nBecause.");
  WikitextOptions none;
  none.keep_headings = false;
  EXPECT_EQ(clean("== History ==\nOld.", none), "Old.");
}

TEST(Wikitext, ListsAreKeptAsText) {
  EXPECT_EQ(clean("Items:\n* one\n** [[two|Two]]\n# three\n; term\n: definition"),
            "Items:\none\nTwo\nthree\nterm\ndefinition");
}

TEST(Wikitext, ListsCanBeDropped) {
  WikitextOptions o;
  o.keep_lists = false;
  EXPECT_EQ(clean("Items:\n* one\n# two\n: indented stays", o), "Items:\nindented stays");
}

TEST(Wikitext, WhitespaceIsNormalised) {
  EXPECT_EQ(clean("  a \t  b\u00a0\u00a0c  \r\n\n\n\nd   "), "a b c\nd");
  EXPECT_EQ(clean("word {{tpl}} , next {{tpl}} . End"), "word, next. End");
}

TEST(Wikitext, ParagraphsAreLines) {
  EXPECT_EQ(clean("First paragraph.\n\nSecond paragraph.\n\n\n----\nThird."),
            "First paragraph.\nSecond paragraph.\nThird.");
}

TEST(Wikitext, EmptyParenthesesLeftByTemplatesGo) {
  EXPECT_EQ(clean("Alan Turing ({{IPAc-en|t|j|u|r|ɪ|ŋ}}; 23 June 1912 – 1954) was"),
            "Alan Turing (23 June 1912 – 1954) was");
  EXPECT_EQ(clean("Aspirin ({{lang-la|x}}) is a drug ({{pron}}, )."), "Aspirin is a drug.");
  EXPECT_EQ(clean("東京（{{lang-en|Tokyo}}）は首都"), "東京は首都");
}

TEST(Wikitext, LinesOfPunctuationGo) { EXPECT_EQ(clean("Text\n* {{x}} —\n. .\nMore"), "Text\nMore"); }

// ---- deliberate differences from wikiextractor

TEST(Wikitext, DiffersFromWikiextractor_ListItemsKept) {
  EXPECT_EQ(clean("* item"), "item");  // wikiextractor: dropped
}

TEST(Wikitext, DiffersFromWikiextractor_HeadingWithoutPeriod) {
  EXPECT_EQ(clean("== History ==\nText"), "History\nText");  // wikiextractor: "History."
}

TEST(Wikitext, DiffersFromWikiextractor_ItalicsWithoutQuotes) {
  EXPECT_EQ(clean("the ''Iliad''"), "the Iliad");  // wikiextractor: the "Iliad"
}

TEST(Wikitext, DiffersFromWikiextractor_MathDroppedNotPlaceholder) {
  EXPECT_EQ(clean("so <math>x^2</math> grows"), "so grows");  // wikiextractor: so formula_1 grows
}

TEST(Wikitext, DiffersFromWikiextractor_CodeKeepsText) {
  EXPECT_EQ(clean("call <code>printf</code> now"), "call printf now");  // wikiextractor: codice_1
}

TEST(Wikitext, DiffersFromWikiextractor_SyntaxhighlightDropped) {
  EXPECT_EQ(clean("a <syntaxhighlight lang=\"c\">x++;</syntaxhighlight> b"), "a b");  // theirs keeps x++;
}

TEST(Wikitext, DiffersFromWikiextractor_SmallKeepsText) {
  EXPECT_EQ(clean("price <small>(approx.)</small> 5"), "price (approx.) 5");  // theirs drops it
}

TEST(Wikitext, DiffersFromWikiextractor_OtherNamespaceLinksKeepLabel) {
  // wikiextractor drops every link whose target has a ':' outside w:/wikt:.
  EXPECT_EQ(clean("[[Help:IPA for English|/ˈæn/]] [[:Category:Birds|birds]] [[2001: A Space Odyssey]]"),
            "/ˈæn/ birds 2001: A Space Odyssey");
}

TEST(Wikitext, DiffersFromWikiextractor_NoEmptyParentheses) {
  EXPECT_EQ(clean("Name ({{lang|x}}) is"), "Name is");  // wikiextractor: "Name () is"
}

// ---- robustness and speed

TEST(Wikitext, AdversarialNestingIsLinear) {
  std::vector<std::string> inputs = {
      std::string(200000, '{'), std::string(200000, '}'), std::string(200000, '['),
      std::string(200000, ']'), std::string(200000, '<'), std::string(200000, '\''),
  };
  std::string s;
  for (int i = 0; i < 50000; ++i) s += "{{a|[[b|<ref>";
  inputs.push_back(s);
  s.clear();
  for (int i = 0; i < 50000; ++i) s += "[[a|";
  s += "x";
  for (int i = 0; i < 50000; ++i) s += "]]";
  inputs.push_back(s);
  s.clear();
  for (int i = 0; i < 50000; ++i) s += "[http://x.org/ ";
  inputs.push_back(s);
  s.clear();
  for (int i = 0; i < 50000; ++i) s += "\n{|\n<table>(((";
  inputs.push_back(s);
  for (const auto& in : inputs) {
    auto t0 = std::chrono::steady_clock::now();
    std::string out = clean(in);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 2.0) << in.substr(0, 40);
    EXPECT_TRUE(is_valid_utf8(out));
  }
}

TEST(Wikitext, ValidUtf8StaysValid) {
  std::string in = "é[[Ф|ж]]\u00a0{{x}}（）日本語''ü''&#xD800;&#x110000;__目次__";
  std::string out = clean(in);
  EXPECT_TRUE(is_valid_utf8(out)) << out;
  EXPECT_EQ(out, "éж日本語ü\xEF\xBF\xBD\xEF\xBF\xBD");  // "（）" takes the space before it
}

TEST(Wikitext, ThreadSafeAndDeterministic) {
  WikitextCleaner cleaner;
  std::string page;
  for (int i = 0; i < 200; ++i)
    page += "== H" + std::to_string(i) + " ==\n'''B''' [[a|b]] {{t|[[c]]}} <ref>r</ref> text\n";
  std::string expected = cleaner.clean(page);
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::string out;
      for (int k = 0; k < 50; ++k) {
        cleaner.clean(page, out);
        same[t] += out == expected;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(same[t], 50);
}

TEST(Wikitext, DecodeHtmlEntity) {
  std::string out;
  EXPECT_EQ(decode_html_entity("&amp;rest", out), 5u);
  EXPECT_EQ(out, "&");
  out.clear();
  EXPECT_EQ(decode_html_entity("&#0;", out), 4u);  // NUL: consumed, nothing appended
  EXPECT_EQ(out, "");
  EXPECT_EQ(decode_html_entity("&nosuch;", out), 0u);
  EXPECT_EQ(decode_html_entity("&#;", out), 0u);
}

TEST(Wikitext, LanguageCodes) {
  EXPECT_TRUE(is_language_code("de"));
  EXPECT_TRUE(is_language_code("zh-yue"));
  EXPECT_TRUE(is_language_code("simple"));
  EXPECT_FALSE(is_language_code("De"));
  EXPECT_FALSE(is_language_code("wikt"));
  EXPECT_FALSE(is_language_code("doi"));
  EXPECT_FALSE(is_language_code("w"));
}

}  // namespace
}  // namespace pretrain
