// MediaWiki's export schema (0.10 / 0.11) read from element events: which elements of a dump hold
// what, and how they make a SiteInfo and Pages. XmlPageReader (xml_pages.h) drives it from expat's
// callbacks; this part knows nothing of bytes, encodings or expat, and never throws for bad
// content: a fault comes back as a message for the reader to word with its byte offset.
//
// The elements kept, by depth (the root <mediawiki> is depth 1):
//   2: <siteinfo>, <page>
//   3: <siteinfo>: <sitename> <dbname> <base> <generator> <namespaces>
//      <page>: <title> <ns> <id> <redirect title="…"/> <revision>
//   4: <namespaces>: <namespace key="…">;  <revision>: <id> <text bytes="…">
// Everything else (contributor, timestamp, comment, sha1, unknown elements of newer schemas) is
// skipped without copying. Only a page's LAST revision counts (history dumps have many).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datagen/wikiprep/xml_pages.h"

namespace pretrain {

// Bytes as an error message shows them: printable ASCII as is, a line feed as \n, the rest as \xNN.
std::string printable_bytes(std::string_view bytes);

class XmlPageBuilder {
 public:
  // A start tag at depth()+1; `offset` is its input offset (a page's byte_offset). Returns a fault
  // message, or "" (an unexpected root, a <namespace> key that is not an integer).
  std::string start(const char* name, const char** attrs, uint64_t offset);
  // The end tag of the element at depth(). Returns a fault message, or "" (<ns>, <id> that are not
  // integers).
  std::string end();

  // Where character data goes now: null outside the fields that are kept.
  std::string* sink() { return sink_; }
  // The current field is a revision's <text>: its content may be appended to text() directly.
  bool in_text() const { return field_ == Field::text; }
  std::string& text() { return page_.text; }
  // Before up to `more` bytes go to text(): takes up the <text bytes="…"> hint once the text would
  // pass 64 KiB (reserving it whole, so a huge page is never copied as it grows).
  void make_room_for_text(size_t more);

  // Pages completed since the last take_ready(), in order.
  std::vector<Page> take_ready() { return std::exchange(ready_, {}); }

  int depth() const { return depth_; }  // of the innermost open element; 0 before the root
  bool saw_root() const { return saw_root_; }
  bool in_page() const { return in_page_; }
  bool in_siteinfo() const { return in_siteinfo_; }
  const Page& page() const { return page_; }  // the page being read, when in_page()
  const SiteInfo& site() const { return site_; }

 private:
  enum class Field { none, title, ns, page_id, revision_id, text, sitename, dbname, base, generator, namespace_name };

  void start_field(Field f, std::string* target);
  std::string end_field();
  void begin_page(uint64_t offset);
  void begin_revision();
  void end_page();
  void reserve_text(const char* bytes);
  std::string parse_int(std::string_view what, int64_t& out) const;
  int64_t namespace_from_title(std::string_view title) const;

  SiteInfo site_;
  Page page_;
  std::vector<Page> ready_;
  uint64_t pages_started_ = 0;
  uint64_t text_hint_ = 0;  // <text bytes="…">, at most kMaxTextReserve; 0 when absent

  int depth_ = 0;
  bool saw_root_ = false, in_siteinfo_ = false, in_namespaces_ = false, in_page_ = false, in_revision_ = false;
  bool page_has_ns_ = false;
  Field field_ = Field::none;
  int field_depth_ = 0;
  std::string* sink_ = nullptr;
  std::string number_;  // text of <ns>, <id>
};

}  // namespace pretrain
