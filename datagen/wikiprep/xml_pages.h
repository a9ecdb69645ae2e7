// Streaming reader for MediaWiki XML dumps (export schema 0.10 / 0.11, pages-articles or
// pages-meta-history). Decoded bytes are pushed in, in order, as they come from the bz2 decoder;
// libexpat parses them and each <page> is handed out as soon as its </page> has been parsed, so
// memory stays at about one page whatever the dump's size. Expat alone tokenizes ~200 MB/s, and
// ~95% of a dump is <text> content, so that content is scanned by our own loop (plain UTF-8,
// predefined entities, character references) and everything else, including every error, is
// expat's: ~630 MB/s per core on English, ~350 on Japanese (vs ~150-200 for expat alone).
//
// What comes out of a page: title, ns, id, the <redirect title="…"/> flag and target, and the id
// and text of the LAST <revision> (a history dump has many; only the latest counts). Entities and
// CDATA sections are decoded by expat; every string is UTF-8.
//
// Bad input:
//  - Malformed XML: Error naming the source, the byte offset of the fault (and of the <page> being
//    parsed), and expat's message. Every page completed before the fault has been handed out.
//  - Input that ends without </mediawiki> after a complete </page> (the jawiki sample): one
//    warning, no error; every page comes out.
//  - Input that ends inside a <page> (a truncated dump): every complete page before it is handed
//    out, then finish() throws an Error naming the partial page's byte offset. A cut page is damage,
//    not a quirk: the caller writes what it has and exits 1.
//  - UTF-16 (LE or BE, found by its byte order mark or by "<" encoded in two bytes): expat decodes
//    it, handlers still see UTF-8, and one warning says so. Byte offsets are then offsets in the
//    UTF-16 input.
//  - Invalid UTF-8, undefined entities (&nbsp; unescaped) and DOCTYPE declarations (dumps have
//    none; refusing them keeps entity expansion out) are malformed input.
//  - No <siteinfo>: pages still come out; siteinfo().present is false and page_url() returns "".
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

struct SiteInfo {
  bool present = false;  // the dump had a <siteinfo>
  std::string sitename, dbname, base, generator;
  // <mediawiki xml:lang="…">, or derived from dbname ("enwiki" → "en", "zh_yuewiki" → "zh-yue").
  std::string lang;
  std::map<int64_t, std::string> namespaces;  // key → localized prefix ("" for articles)
};

struct Page {
  std::string title;
  int64_t ns = 0;  // <ns>; when absent (old schemas), from the title's prefix and siteinfo
  int64_t id = -1;
  bool redirect = false;        // the page has a <redirect> element
  std::string redirect_target;  // its title attribute
  int64_t revision_id = -1;     // of the last revision
  std::string text;             // wikitext of the last revision ("" when it has no <text>)
  uint64_t byte_offset = 0;     // of "<page" in the input bytes
  uint64_t ordinal = 0;         // 0-based position among the dump's pages
};

// wikiextractor's url: the directory of <siteinfo><base> plus "?curid=<id>".
// https://en.wikipedia.org/wiki/Main_Page, 10 → https://en.wikipedia.org/wiki?curid=10.
// "" when there is no base (no <siteinfo>) or the base has no '/'.
std::string page_url(const SiteInfo& site, int64_t page_id);

// "enwiki" → "en", "elwikivoyage" → "el", "be_x_oldwiki" → "be-x-old"; "" when no project suffix.
std::string language_from_dbname(std::string_view dbname);

class XmlPageReader {
 public:
  using PageCallback = std::function<void(Page&&)>;

  // `source` names the input in errors and warnings. `on_page` runs inside feed() and finish(),
  // never inside expat, so it may throw; it sees siteinfo() complete (siteinfo precedes pages).
  // `fast_text` = false hands the <text> content to expat too (3-5x slower, same pages and
  // errors): the reference the tests and the fuzz target compare the fast path with.
  XmlPageReader(std::string source, PageCallback on_page, bool fast_text = true);
  ~XmlPageReader();
  XmlPageReader(const XmlPageReader&) = delete;
  XmlPageReader& operator=(const XmlPageReader&) = delete;

  // Next bytes of the input, any chunking. Throws Error on malformed XML (after handing out the
  // pages completed before the fault); the reader is unusable afterwards.
  void feed(const char* data, size_t size);
  void feed(std::string_view bytes) { feed(bytes.data(), bytes.size()); }
  // End of input. See "Bad input" above for what it tolerates. Idempotent.
  void finish();

  const SiteInfo& siteinfo() const;
  uint64_t pages() const;                             // handed out so far
  const std::string& encoding() const;                // "UTF-8", "UTF-16LE" or "UTF-16BE"
  const std::vector<std::string>& warnings() const;  // also logged with log_warn

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pretrain
