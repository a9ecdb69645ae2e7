#include "datagen/wikiprep/xml_pages.h"

#include <expat.h>

#include <strings.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"
#include "datagen/wikiprep/xml_page_builder.h"
#include "datagen/wikiprep/xml_text_scan.h"

namespace pretrain {

std::string page_url(const SiteInfo& site, int64_t page_id) {
  size_t slash = site.base.rfind('/');
  if (slash == std::string::npos) return {};
  return cat(std::string_view(site.base).substr(0, slash), "?curid=", page_id);
}

std::string language_from_dbname(std::string_view dbname) {
  // Longest suffix first: "wiki" is a suffix of none of the others, but "wikivoyage" starts with it.
  static constexpr std::string_view kProjects[] = {
      "wiktionary", "wikibooks", "wikinews", "wikiquote", "wikisource",
      "wikiversity", "wikivoyage", "wiki"};
  for (std::string_view project : kProjects) {
    if (dbname.size() > project.size() && dbname.ends_with(project)) {
      std::string lang(dbname.substr(0, dbname.size() - project.size()));
      std::replace(lang.begin(), lang.end(), '_', '-');
      return lang;
    }
  }
  return {};
}

namespace {

// Slices of at most this size go to expat at a time, so that the pages completed by one slice
// (held until expat returns) stay few even when the caller feeds a whole mapped file at once.
constexpr size_t kSliceBytes = size_t{1} << 20;

}  // namespace

// Three layers: XmlPageBuilder turns element events into pages (xml_page_builder.h); expat turns
// the markup into those events; xml_text::scan_content reads <text> content without expat
// (xml_text_scan.h). This State is the driver: it decides which bytes go where, keeps the input
// offsets that errors name, and words the errors.
struct XmlPageReader::State {
  std::string source;
  PageCallback on_page;
  XML_Parser parser = nullptr;
  XmlPageBuilder builder;
  std::vector<std::string> warnings;
  std::string encoding = "UTF-8";
  std::string head;  // the first bytes of input, for the encoding check

  uint64_t fed = 0, handed_out = 0;

  // The fast path (see consume): expat parses the markup, we scan <text> content ourselves.
  enum class Mode { markup, text } mode = Mode::markup;
  bool fast_allowed = true;
  bool fast = false;          // on once the input is known to be UTF-8
  bool encoding_known = false;
  std::string carry;          // input bytes not yet consumed: a construct cut by the chunk's end
  uint64_t to_expat = 0;      // bytes given to expat
  uint64_t skipped = 0;       // content bytes scanned by us, never seen by expat
  uint64_t text_content_at = 0;  // input offset just past the last <text> start tag that opened a revision's text
  int64_t root_start_tag_end = -1;  // input offset just past the root's start tag
  int64_t root_end = -1;            // input offset just past the root element, once it closed
  bool finished = false, failed = false;
  // A fault found by our handlers (they must not throw through expat's C frames).
  std::string fault;
  int64_t fault_offset = -1;
  std::exception_ptr exception;

  void warn(std::string message) {
    log_warn(message);
    warnings.push_back(std::move(message));
  }

  // Input offset of the current expat event: expat counts only the bytes it was given.
  int64_t offset() const { return XML_GetCurrentByteIndex(parser) + static_cast<int64_t>(skipped); }

  void stop(std::string message) {
    if (fault.empty() && !exception) {
      fault = std::move(message);
      fault_offset = offset();
    }
    XML_StopParser(parser, XML_FALSE);
  }

  void on_start(const XML_Char* name, const XML_Char** attrs) {
    uint64_t at = static_cast<uint64_t>(offset());
    if (std::string f = builder.start(name, attrs, at); !f.empty()) return stop(std::move(f));
    if (builder.depth() == 1) {
      note_encoding();
      root_start_tag_end = static_cast<int64_t>(at) + XML_GetCurrentByteCount(parser);
    }
    if (builder.in_text() && builder.depth() == 4)  // the start tag of a revision's <text>
      text_content_at = at + static_cast<uint64_t>(XML_GetCurrentByteCount(parser));
  }

  void on_end() {
    if (builder.depth() == 1) {  // expat counts no bytes for the end of an empty-element tag
      const int count = XML_GetCurrentByteCount(parser);
      root_end = count > 0 ? offset() + count : root_start_tag_end;
    }
    if (std::string f = builder.end(); !f.empty()) stop(std::move(f));
  }

  // Expat picks the encoding from a byte order mark or from "<" written in two bytes; dumps are
  // UTF-8, so anything else is worth one warning.
  void note_encoding() {
    auto b = [&](size_t i) { return i < head.size() ? static_cast<unsigned char>(head[i]) : 0x100u; };
    if ((b(0) == 0xFF && b(1) == 0xFE) || (b(0) == '<' && b(1) == 0)) encoding = "UTF-16LE";
    else if ((b(0) == 0xFE && b(1) == 0xFF) || (b(0) == 0 && b(1) == '<')) encoding = "UTF-16BE";
    if (encoding != "UTF-8")
      warn(cat(source, ": the input is ", encoding,
               ", not UTF-8 as MediaWiki dumps are; it is decoded as ", encoding, " and converted to UTF-8"));
  }

  // --- expat callbacks: no exception may cross them ---
  template <class F>
  static void guarded(void* self, F&& handle) {
    auto* s = static_cast<State*>(self);
    try {
      handle(*s);
    } catch (...) {
      s->exception = std::current_exception();
      XML_StopParser(s->parser, XML_FALSE);
    }
  }
  static void start_cb(void* self, const XML_Char* name, const XML_Char** attrs) {
    guarded(self, [&](State& s) { s.on_start(name, attrs); });
  }
  static void end_cb(void* self, const XML_Char*) {
    guarded(self, [](State& s) { s.on_end(); });
  }
  static void text_cb(void* self, const XML_Char* data, int len) {
    XmlPageBuilder& builder = static_cast<State*>(self)->builder;
    if (std::string* sink = builder.sink())
      guarded(self, [&](State&) {
        if (builder.in_text()) builder.make_room_for_text(static_cast<size_t>(len));
        sink->append(data, static_cast<size_t>(len));
      });
  }
  static void doctype_cb(void* self, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    static_cast<State*>(self)->stop("a <!DOCTYPE> declaration, which MediaWiki dumps never have: refused");
  }
  static void xml_decl_cb(void* self, const XML_Char*, const XML_Char* encoding, int) {
    auto* s = static_cast<State*>(self);
    if (encoding && strcasecmp(encoding, "UTF-8") != 0 && strcasecmp(encoding, "utf8") != 0) s->fast = false;
  }

  void deliver() {
    for (Page& p : builder.take_ready()) {
      ++handed_out;
      on_page(std::move(p));
    }
  }

  std::string where_page() const {
    if (!builder.in_page()) return {};
    const Page& page = builder.page();
    return cat(", in the <page> starting at byte ", page.byte_offset,
               page.title.empty() ? std::string() : cat(" (title \"", page.title, "\")"));
  }

  // The bytes around expat's error position, and whether the fault is a byte that is not UTF-8.
  std::string error_context(bool& invalid_utf8) const {
    int at = 0, size = 0;
    const char* buffer = XML_GetInputContext(parser, &at, &size);
    invalid_utf8 = false;
    if (!buffer || at < 0 || at > size) return {};
    const auto* p = reinterpret_cast<const uint8_t*>(buffer);
    if (encoding == "UTF-8" && at < size && p[at] >= 0x80) invalid_utf8 = !decode_utf8(p + at, p + size).valid;
    int from = std::max(0, at - 30), to = std::min(size, at + 30);
    return cat(" near \"", printable_bytes(std::string_view(buffer + from, static_cast<size_t>(to - from))), "\"");
  }

  [[noreturn]] void throw_fault() {
    failed = true;
    if (exception) std::rethrow_exception(exception);
    if (!fault.empty()) throw Error(Where::at_offset(source, fault_offset), cat("MediaWiki XML: ", fault, where_page()));
    // After the root element, expat's verdict depends on where its input was cut ("x" at the end of
    // a chunk is junk at x, "x<" an invalid token at '<'): one wording, at the root's end, so that
    // every chunking (plain or bz2 input, the fast path or expat alone) fails alike. The fast path
    // cuts expat's input elsewhere than the reference (the xml_pages fuzz target found it).
    if (root_end >= 0)
      throw Error(Where::at_offset(source, root_end),
                  "malformed XML: something other than comments, processing instructions and white space "
                  "follows the root element");
    XML_Error code = XML_GetErrorCode(parser);
    int64_t at = offset();
    bool invalid_utf8 = false;
    std::string context = error_context(invalid_utf8);
    std::string what = invalid_utf8 ? "invalid UTF-8 (MediaWiki dumps are UTF-8)" : XML_ErrorString(code);
    throw Error(Where::at_offset(source, at), cat("malformed XML: ", what, where_page(), context));
  }

  void to_parser(const char* data, size_t size, bool final) {
    to_expat += size;
    if (XML_Parse(parser, data, static_cast<int>(size), final) == XML_STATUS_OK) return deliver();
    deliver();  // the pages completed before the fault
    if (final && !exception && fault.empty() && builder.saw_root() && root_end < 0 &&
        ends_early(XML_GetErrorCode(parser)))
      return end_early();
    throw_fault();
  }

  // Expat gets the markup; the content of each revision's <text> goes to xml_text::scan_content,
  // and whatever the scan will not judge goes back to expat from that byte on.
  //
  // Consumes a prefix of data[0, size) and returns its length; the rest is a construct cut by the
  // end of the chunk, to be retried with more bytes.
  size_t consume(const char* data, size_t size) {
    size_t i = 0;
    while (i < size) {
      if (mode == Mode::text) {
        builder.make_room_for_text(size - i);  // decoded content is never longer than its bytes
        xml_text::Scan scan = xml_text::scan_content(data, i, size, builder.text());
        skipped += scan.stop - i;
        if (scan.end != xml_text::ScanEnd::markup) return scan.stop;  // all of it, or a cut construct
        mode = Mode::markup;
        i = scan.stop;
        continue;
      }
      if (!fast) {
        to_parser(data + i, size - i, false);
        return size;
      }
      // The next "<text" start tag: feed expat through its '>' and see whether it opened a
      // revision's text. A "<text" inside a comment or CDATA just opens nothing.
      const char* hit = static_cast<const char*>(memmem(data + i, size - i, "<text", 5));
      if (!hit) {
        size_t keep = xml_text::cut_prefix_of_text_tag(data + i, size - i);
        to_parser(data + i, size - i - keep, false);
        return size - keep;
      }
      size_t at = static_cast<size_t>(hit - data), name_end = at + 5;
      if (name_end == size) return feed_until(data, i, at);
      char next = data[name_end];
      if (next != '>' && next != '/' && next != ' ' && next != '\t' && next != '\n' && next != '\r') {
        to_parser(data + i, name_end - i, false);  // "<textarea" or the like
        i = name_end;
        continue;
      }
      size_t close = xml_text::tag_end(data, name_end, size);
      if (close == size) return feed_until(data, i, at);
      to_parser(data + i, close + 1 - i, false);
      i = close + 1;
      if (fast && builder.in_text() && text_content_at == to_expat + skipped) mode = Mode::text;
    }
    return size;
  }

  size_t feed_until(const char* data, size_t from, size_t to) {
    to_parser(data + from, to - from, false);
    return to;
  }

  // All input goes through here, in order, whatever its chunking.
  void take(const char* data, size_t size) {
    if (!encoding_known) {
      head.append(data, std::min(size, 2 - head.size()));
      encoding_known = head.size() >= 2;
      // The fast path reads UTF-8; an XML declaration naming another encoding turns it off again.
      fast = fast_allowed && encoding_known && !utf16_head();
    }
    while (!carry.empty() && size > 0) {  // finish the cut construct with the next few bytes
      size_t more = std::min(size, std::max<size_t>(64, carry.size()));
      carry.append(data, more);
      data += more;
      size -= more;
      std::string buffer = std::move(carry);
      carry.assign(buffer, consume(buffer.data(), buffer.size()));
    }
    if (size > 0) {
      size_t used = consume(data, size);
      carry.assign(data + used, size - used);
    }
  }

  void take_end() {
    if (!carry.empty()) {  // a construct cut by the end of input: expat words the error
      mode = Mode::markup;
      std::string rest = std::move(carry);
      carry.clear();
      to_parser(rest.data(), rest.size(), false);
    }
    to_parser(nullptr, 0, true);
  }

  bool utf16_head() const {
    auto b = [&](size_t i) { return i < head.size() ? static_cast<unsigned char>(head[i]) : 0x100u; };
    return (b(0) == 0xFF && b(1) == 0xFE) || (b(0) == 0xFE && b(1) == 0xFF) || b(0) == 0 || b(1) == 0;
  }

  static bool ends_early(XML_Error code) {
    return code == XML_ERROR_NO_ELEMENTS || code == XML_ERROR_UNCLOSED_TOKEN || code == XML_ERROR_PARTIAL_CHAR ||
           code == XML_ERROR_UNCLOSED_CDATA_SECTION;
  }

  // The input ended before </mediawiki>. Between pages that is a known quirk (jawiki); inside a
  // page or the siteinfo it is a truncated dump.
  void end_early() {
    if (builder.depth() == 1) {
      warn(cat(source, ": the input ends without </mediawiki> at byte ", fed, " after ", handed_out,
               " pages; every complete page was read"));
      return;
    }
    failed = true;
    if (builder.in_page()) {
      const Page& page = builder.page();
      throw Error(Where::at_offset(source, static_cast<int64_t>(page.byte_offset)),
                  cat("the input ends at byte ", fed, " inside this <page>",
                      page.title.empty() ? std::string() : cat(" (title \"", page.title, "\")"),
                      ": the dump is truncated; the ", handed_out, " complete pages before it were read"));
    }
    throw Error(Where::at_offset(source, static_cast<int64_t>(fed)),
                cat("the input ends inside <", builder.in_siteinfo() ? "siteinfo" : "mediawiki",
                    "> before any complete page boundary: the dump is truncated"));
  }
};

XmlPageReader::XmlPageReader(std::string source, PageCallback on_page, bool fast_text)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.fast_allowed = fast_text;
  s.source = std::move(source);
  s.on_page = std::move(on_page);
  s.parser = XML_ParserCreate(nullptr);  // encoding from BOM / declaration, UTF-8 by default
  if (!s.parser) throw std::bad_alloc();
  XML_SetUserData(s.parser, &s);
  XML_SetElementHandler(s.parser, &State::start_cb, &State::end_cb);
  XML_SetCharacterDataHandler(s.parser, &State::text_cb);
  XML_SetStartDoctypeDeclHandler(s.parser, &State::doctype_cb);
  XML_SetXmlDeclHandler(s.parser, &State::xml_decl_cb);
  XML_SetParamEntityParsing(s.parser, XML_PARAM_ENTITY_PARSING_NEVER);
#if XML_MAJOR_VERSION > 2 || (XML_MAJOR_VERSION == 2 && XML_MINOR_VERSION >= 6)
  // The fast path feeds expat up to the '>' of a start tag and needs it parsed right then.
  XML_SetReparseDeferralEnabled(s.parser, XML_FALSE);
#endif
}

XmlPageReader::~XmlPageReader() {
  if (state_->parser) XML_ParserFree(state_->parser);
}

void XmlPageReader::feed(const char* data, size_t size) {
  State& s = *state_;
  if (s.failed) throw Error(Where::at_offset(s.source, static_cast<int64_t>(s.fed)), "XML reader used after an error");
  if (s.finished) throw Error(Where::at_offset(s.source, static_cast<int64_t>(s.fed)), "XML reader fed after finish()");
  while (size > 0) {
    size_t n = std::min(size, kSliceBytes);
    s.fed += n;
    try {
      s.take(data, n);
    } catch (...) {
      s.failed = true;
      throw;
    }
    data += n;
    size -= n;
  }
}

void XmlPageReader::finish() {
  State& s = *state_;
  if (s.finished) return;
  if (s.failed) throw Error(Where::at_offset(s.source, static_cast<int64_t>(s.fed)), "XML reader used after an error");
  s.finished = true;
  if (s.fed == 0) {
    s.failed = true;
    throw Error(Where::at_offset(s.source, 0), "the input is empty: expected a MediaWiki XML dump");
  }
  try {
    s.take_end();
  } catch (...) {
    s.failed = true;
    throw;
  }
}

const SiteInfo& XmlPageReader::siteinfo() const { return state_->builder.site(); }
uint64_t XmlPageReader::pages() const { return state_->handed_out; }
const std::string& XmlPageReader::encoding() const { return state_->encoding; }
const std::vector<std::string>& XmlPageReader::warnings() const { return state_->warnings; }

}  // namespace pretrain
