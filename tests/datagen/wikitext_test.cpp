// The wikitext cleaner, one rule per test; tests named DiffersFromWikiextractor_* are the places
// where we deliberately do not do what wikiextractor 3.0.7 --no-templates does.
#include "datagen/wikiprep/wikitext.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/utf8.h"

namespace pretrain::wikitext_test {
namespace {

std::string clean(std::string_view s, const WikitextOptions& o = {}) { return clean_wikitext(s, o); }

// Rules that are one input and its clean text: each row is a test,
// Wikitext/WikitextRule.Cleans/<name>.
struct Rule {
  const char* name;
  const char* wikitext;
  const char* text;
};
// gtest prints a parameter in test listings and failures: the wikitext says what the case is.
void PrintTo(const Rule& r, std::ostream* os) { *os << '"' << r.wikitext << '"'; }

const Rule kRules[] = {
    // --- templates and parser functions
    {"TemplatesAreRemoved_1", "a {{cite web|url=http://x|title=T}} b", "a b"},
    {"TemplatesAreRemoved_2", "{{Infobox\n| name = X\n| born = 1900\n}}\nText.", "Text."},
    {"NestedTemplatesAndParserFunctions_1", "a{{#if:{{{1|}}}|{{lc:{{PAGENAME}}}}|{{x|{{y|{{z}}}}}}}}b", "ab"},
    {"NestedTemplatesAndParserFunctions_2", "x {{{param|{{default}}}}} y", "x y"},
    {"NestedTemplatesAndParserFunctions_3", "{{a|[[b|c]]|{{d}}}} e", "e"},
    {"UnbalancedBracesLeaveNoBraces_1", "before {{unclosed template", "before unclosed template"},
    {"UnbalancedBracesLeaveNoBraces_2", "text }} more", "text more"},
    {"UnbalancedBracesLeaveNoBraces_3", "{{{{{x}}}}} after", "after"},
    // --- tables
    {"TablesAreRemoved", "Before.\n{| class=\"wikitable\"\n|-\n! H1 !! H2\n|-\n| a || b\n|}\nAfter.",
     "Before.\nAfter."},
    {"NestedTables_1", "A\n{|\n| outer\n{|\n| inner\n|}\n| outer again\n|}\nB", "A\nB"},
    {"NestedTables_2", "A\n:{| \n| indented\n|}\nB", "A\nB"},
    {"HtmlTablesAreRemoved", "A <table><tr><td>x<table><tr><td>y</td></tr></table></td></tr></table> B", "A B"},
    {"TableMadeByTemplateLeavesNoRows", "Text\n{{table start}}\n|-\n| cell\n|}\nMore", "Text\nMore"},
    // --- refs, comments and extension tags
    {"RefsBothForms_1", "Fact.<ref>{{cite book|title=B}}</ref> Next.<ref name=\"x\" /> End.", "Fact. Next. End."},
    {"RefsBothForms_2", "A<ref name=x/>B<REF group=\"n\">note</REF>C", "ABC"},
    // wikiextractor leaks this one: "a/b" has a '/' but the tag does not end in "/>".
    {"RefNameWithSlashIsNotSelfClosing", "Claim.<ref name=\"a/b\">Source, p. 4.</ref> Rest.", "Claim. Rest."},
    {"UnterminatedRefDropsOnlyItsTag", "Text <ref>never closed", "Text never closed"},
    {"Comments_1", "a<!-- hidden {{x}} [[y]] -->b", "ab"},
    {"Comments_2", "kept\n<!-- unterminated comment\nrest", "kept"},
    {"Comments_3", "x<!-- --><!---->y", "xy"},
    {"MathIsDropped", "where <math>\\frac{1}{2}}}</math> is half", "where is half"},
    {"GalleryIsDropped", "A\n<gallery>\nFile:a.jpg|Caption [[x]]\n</gallery>\nB", "A\nB"},
    {"SyntaxhighlightAndSourceAndPreAreDropped_1",
     "Code:\n<syntaxhighlight lang=\"c\">int main() { return 0; }</syntaxhighlight>\nEnd",
     "Code:\nEnd"},
    {"SyntaxhighlightAndSourceAndPreAreDropped_2", "x <source lang=python>print(1)</source> y <pre>a  b</pre> z",
     "x y z"},
    {"NowikiIsLiteral_1", "Write <nowiki>[[link]] and {{tpl}} and ''x''</nowiki> here",
     "Write [[link]] and {{tpl}} and ''x'' here"},
    {"NowikiIsLiteral_2", "a<nowiki/>b &amp; <nowiki>&lt;</nowiki>", "ab & <"},
    {"IncludeonlyIsDroppedNoincludeKept", "a<includeonly>hidden</includeonly><noinclude>shown</noinclude>", "ashown"},
    // --- links
    {"InternalLinks_1", "[[Target|label]] and [[Plain]]", "label and Plain"},
    {"InternalLinks_2", "[[ Spaced target | spaced label ]].", "spaced label."},
    {"InternalLinks_3", "[[Section#Part|part]] [[#Local]]", "part #Local"},
    {"LinkTrails", "many [[target]]s and [[bus|buse]]s", "many targets and buses"},
    {"PipeTrickShowsTarget", "[[Paris|]]", "Paris"},
    {"FilesAndImagesWithNestedLinksInCaptions_1",
     "A [[File:X.jpg|thumb|A [[caption]] with [[a|links]] and [http://x.org site]]] B",
     "A B"},
    {"FilesAndImagesWithNestedLinksInCaptions_2", "[[Image:Y.png|left]]Text", "Text"},
    {"FilesAndImagesWithNestedLinksInCaptions_3", "[[image:y.png]][[FILE:z.svg|x]]t", "t"},
    {"LocalizedNamespaces_1", "a[[Datei:X.jpg|mini|Bild]]b[[Fichier:Y.png]]c[[Αρχείο:Z.jpg|x]]d[[ファイル:W.png|x]]e",
     "abcde"},
    {"LocalizedNamespaces_2", "a[[Категория:Ф]][[Κατηγορία:Χ]][[カテゴリ:Y]][[Kategorie:Z]]b", "ab"},
    {"Categories", "Text.\n[[Category:Things]]\n[[Category:Stuff| ]]", "Text."},
    // wikiextractor leaks "[[University|UC]]" here: its link pass runs after the external one.
    {"ExternalLinkLabelWithInternalLink", "\"Talk\" [http://x.org/t (talk at [[University|UC]], 1962)] end",
     "\"Talk\" (talk at UC, 1962) end"},
    // --- formatting, entities, magic words
    {"BoldAndItalic_1", "'''Bold''' and ''italic'' and '''''both'''''", "Bold and italic and both"},
    {"BoldAndItalic_2", "'''Smith''''s book, l'amour", "Smith's book, l'amour"},
    {"Entities_1", "AT&amp;T &lt;tag&gt; &eacute;t&eacute; &#8212; &#x2014; &mdash;", "AT&T <tag> été — — —"},
    {"Entities_2", "10&nbsp;km &unknown; & lone", "10 km &unknown; & lone"},
    // The XML's "&amp;amp;nbsp;" reaches us as "&amp;nbsp;": a no-break space, not text "&nbsp;".
    {"DoubleEscapedEntities", "10&amp;nbsp;km and &amp;amp;amp; and &amp;#8212;", "10 km and & and —"},
    {"MagicWordsAreRemoved_1", "__NOTOC__\nText __TOC__ here.\n__目次__", "Text here."},
    {"MagicWordsAreRemoved_2", "snake_case and __init__", "snake_case and __init__"},
    // --- lines: headings, lists, whitespace, paragraphs
    {"HeadingsAreOwnLines", "Intro.\n== History ==\nOld.\n=== Early ''days'' ===\nEarlier.",
     "Intro.\nHistory\nOld.\nEarly days\nEarlier."},
    {"HeadingsOfEmptySectionsAreDropped_1", "Intro.\n== Empty ==\n{{reflist}}\n== Full ==\nText.",
     "Intro.\nFull\nText."},
    {"HeadingsOfEmptySectionsAreDropped_2", "== A ==\n=== B ===\nText.", "A\nB\nText."},
    {"ListsAreKeptAsText", "Items:\n* one\n** [[two|Two]]\n# three\n; term\n: definition",
     "Items:\none\nTwo\nthree\nterm\ndefinition"},
    {"WhitespaceIsNormalised_1", "  a \t  b\u00a0\u00a0c  \r\n\n\n\nd   ", "a b c\nd"},
    {"WhitespaceIsNormalised_2", "word {{tpl}} , next {{tpl}} . End", "word, next. End"},
    {"ParagraphsAreLines", "First paragraph.\n\nSecond paragraph.\n\n\n----\nThird.",
     "First paragraph.\nSecond paragraph.\nThird."},
    {"EmptyParenthesesLeftByTemplatesGo_1", "Alan Turing ({{IPAc-en|t|j|u|r|ɪ|ŋ}}; 23 June 1912 – 1954) was",
     "Alan Turing (23 June 1912 – 1954) was"},
    {"EmptyParenthesesLeftByTemplatesGo_2", "Aspirin ({{lang-la|x}}) is a drug ({{pron}}, ).", "Aspirin is a drug."},
    {"EmptyParenthesesLeftByTemplatesGo_3", "東京（{{lang-en|Tokyo}}）は首都", "東京は首都"},
    {"LinesOfPunctuationGo", "Text\n* {{x}} —\n. .\nMore", "Text\nMore"},
    // --- deliberate differences from wikiextractor
    // wikiextractor drops every link whose target has a ':' outside w:/wikt:.
    {"DiffersFromWikiextractor_OtherNamespaceLinksKeepLabel",
     "[[Help:IPA for English|/ˈæn/]] [[:Category:Birds|birds]] [[2001: A Space Odyssey]]",
     "/ˈæn/ birds 2001: A Space Odyssey"},
};

class WikitextRule : public ::testing::TestWithParam<Rule> {};
TEST_P(WikitextRule, Cleans) { EXPECT_EQ(clean(GetParam().wikitext), GetParam().text); }

INSTANTIATE_TEST_SUITE_P(Wikitext, WikitextRule, ::testing::ValuesIn(kRules),
                         [](const ::testing::TestParamInfo<Rule>& info) { return std::string(info.param.name); });

// ---- links

TEST(Wikitext, NamespacesFromSiteinfo) {
  WikitextOptions o;
  o.file_namespaces = {"Tiedosto_X"};
  o.category_namespaces = {"Luokka Y"};
  EXPECT_EQ(clean("a[[tiedosto x:K.jpg|c]][[Luokka_Y:Z]]b", o), "ab");
  EXPECT_EQ(clean("a[[tiedosto x:K.jpg|c]]b"), "acb");  // unknown namespace: a link like any other
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

// ---- formatting, entities, magic words

TEST(Wikitext, HtmlFormattingTagsKeepText) {
  EXPECT_EQ(clean("m<sup>2</sup> and <span style=\"x\">span</span> <b>b</b><br/>next"),
            "m2 and span b next");
  EXPECT_EQ(clean("a < b and c<d"), "a < b and c<d");  // not tags
}

// ---- lines: headings, lists, whitespace, paragraphs

TEST(Wikitext, HeadingOptions) {
  WikitextOptions period;
  period.heading_period = true;
  EXPECT_EQ(clean("== History ==\nOld.\n== Why? ==\nBecause.", period), "History.\nOld.\nWhy?\nBecause.");
  WikitextOptions none;
  none.keep_headings = false;
  EXPECT_EQ(clean("== History ==\nOld.", none), "Old.");
}

TEST(Wikitext, ListsCanBeDropped) {
  WikitextOptions o;
  o.keep_lists = false;
  EXPECT_EQ(clean("Items:\n* one\n# two\n: indented stays", o), "Items:\nindented stays");
}

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

}  // namespace
}  // namespace pretrain::wikitext_test
