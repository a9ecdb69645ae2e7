// Wikitext → clean text, the converter wikiprep runs on every article (docs/architecture.md, "Documents").
//
// What goes: templates and parser functions (nested, {{ }} and {{{ }}}), tables ({| |} and
// <table>, nested), <ref> (both forms), comments (also unterminated), <math>, <gallery>,
// <syntaxhighlight>/<source>, <pre> and the other extension tags, files and images (captions with
// their links), categories, interlanguage links and behaviour switches (__TOC__).
// What stays: link labels ([[target|label]] → label, [[target]]s → targets, [url label] → label),
// text inside bold/italic and HTML formatting tags, <nowiki> content verbatim, decoded HTML
// entities, headings (a line of their own, only when their section has text), list items (as
// plain lines), bare URLs. Whitespace is collapsed, one paragraph or item per line, lines
// separated by '\n', no empty lines.
//
// Where we deliberately differ from wikiextractor 3.0.7 --no-templates (tests name each case):
//  - list items are kept (keep_lists), headings have no '.' added (heading_period),
//  - italics lose their quotes instead of becoming "…",
//  - <math> is dropped instead of becoming formula_N, <code> keeps its text instead of codice_N,
//  - <syntaxhighlight> is dropped (wikiextractor keeps its code), <small> keeps its text,
//  - links into other namespaces ([[Help:IPA|label]], [[:Category:X|label]]) keep their label,
//  - markup wikiextractor leaks is removed: links after nested brackets, <ref name="a/b">,
//    the empty "()" left where a template stood, double-escaped entities (&amp;nbsp;).
//
// The scanners are linear on any input: nesting is tracked with explicit stacks, closing tags and
// brackets are searched with memos that never rescan, so deeply nested or unbalanced markup costs
// no more than plain text. Nothing recurses.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

struct WikitextOptions {
  bool keep_lists = true;        // list items (* # ;) as lines; false drops them like wikiextractor
  bool keep_headings = true;     // headings as lines (only when their section has text)
  bool heading_period = false;   // end headings with '.' unless they end in '!' or '?' (wikiextractor)
  bool drop_interlanguage = true;  // [[de:Titel]] and other language-code prefixes
  // This wiki's names (and aliases) of the File and Category namespaces, e.g. from <siteinfo>
  // (keys 6 and 14). They add to the built-in names (English and the common localized ones:
  // Datei, Fichier, Αρχείο, ファイル, Категория, Κατηγορία, カテゴリ, …). Matched ignoring ASCII
  // case, with '_' read as ' '.
  std::vector<std::string> file_namespaces;
  std::vector<std::string> category_namespaces;
};

// Holds the options and the namespace tables built from them; make one and share it. clean() is
// const, pure and deterministic, so any number of threads may call it at once.
class WikitextCleaner {
 public:
  explicit WikitextCleaner(WikitextOptions options = {});
  ~WikitextCleaner();
  WikitextCleaner(const WikitextCleaner&) = delete;
  WikitextCleaner& operator=(const WikitextCleaner&) = delete;

  // Replaces `out` with the clean text of `wikitext` (its capacity is reused). Bytes are passed
  // through as they are: valid UTF-8 in gives valid UTF-8 out.
  void clean(std::string_view wikitext, std::string& out) const;
  std::string clean(std::string_view wikitext) const;

  const WikitextOptions& options() const { return options_; }
  // True when `prefix` (the text before ':' in a link target) names a File or Category namespace.
  bool is_dropped_namespace(std::string_view prefix) const;

 private:
  struct Names;
  WikitextOptions options_;
  std::unique_ptr<const Names> names_;
};

// One-off conveniences (each builds a WikitextCleaner; hold one for many articles instead).
std::string clean_wikitext(std::string_view wikitext, const WikitextOptions& options = {});
void clean_wikitext(std::string_view wikitext, std::string& out, const WikitextOptions& options = {});

// Appends the character `text` starts with when it is an HTML entity (&amp; &#160; &#x2014; …) and
// returns the bytes it took, or 0 (nothing appended) when it is not one. "&amp;nbsp;" — an entity
// escaped twice, as it reaches us from the XML when the wikitext itself had "&amp;nbsp;" — decodes
// all the way to U+00A0.
size_t decode_html_entity(std::string_view text, std::string& out);

// True when `prefix` looks like an interlanguage prefix (de, fr, zh-yue, simple, …).
bool is_language_code(std::string_view prefix);

}  // namespace pretrain
