#include "datagen/wikiprep/xml_pages.h"

#include <expat.h>
#include <fcntl.h>
#include <unistd.h>

#include <strings.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"

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

// Expat hands every chunk of a parse to the same handlers; these are the elements whose text we
// keep. Everything else (contributor, timestamp, comment, sha1, unknown elements of newer schemas)
// is skipped without copying.
enum class Field { none, title, ns, page_id, revision_id, text, sitename, dbname, base, generator, namespace_name };

// Slices of at most this size go to expat at a time, so that the pages completed by one slice
// (held until expat returns) stay few even when the caller feeds a whole mapped file at once.
constexpr size_t kSliceBytes = size_t{1} << 20;
// Most a <text bytes="…"> hint may reserve: far above Wikipedia's own 2 MiB page limit
// ($wgMaxArticleSize), low enough that a lying hint cannot exhaust memory.
constexpr uint64_t kMaxTextReserve = uint64_t{256} << 20;

// Content bytes that stand for themselves: printable ASCII and tab / line feed, but not the ones
// that start markup ('<', '&'), may end a forbidden "]]>" (']') or are normalized ('\r').
constexpr auto kPlainText = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '<' && c != '&' && c != ']';
  plain['\t'] = plain['\n'] = true;
  return plain;
}();

std::string printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else out += cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
  }
  return out;
}

}  // namespace

struct XmlPageReader::State {
  std::string source;
  PageCallback on_page;
  XML_Parser parser = nullptr;

  SiteInfo site;
  Page page;
  std::vector<Page> ready;  // completed during the current XML_Parse call
  std::vector<std::string> warnings;
  std::string encoding = "UTF-8";
  std::string head;  // the first bytes of input, for the encoding check

  int depth = 0;  // of the innermost open element; the root is 1
  bool saw_root = false, in_siteinfo = false, in_namespaces = false, in_page = false, in_revision = false;
  bool page_has_ns = false;
  Field field = Field::none;
  int field_depth = 0;
  std::string* sink = nullptr;  // where character data goes; null outside the fields we keep
  std::string number;           // text of <ns>, <id>
  int64_t namespace_key = 0;

  uint64_t fed = 0, handed_out = 0, started = 0;

  // The fast path (see scan_text): expat parses the markup, we scan <text> content ourselves.
  enum class Mode { markup, text } mode = Mode::markup;
  bool fast_allowed = true;
  bool fast = false;          // on once the input is known to be UTF-8
  bool encoding_known = false;
  std::string carry;          // input bytes not yet consumed: a construct cut by the chunk's end
  uint64_t to_expat = 0;      // bytes given to expat
  uint64_t skipped = 0;       // content bytes scanned by us, never seen by expat
  bool text_open = false;     // a revision's <text> start tag was parsed and its content is ours
  uint64_t text_content_at = 0;  // input offset just past that start tag
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

  void start_field(Field f, std::string* target) {
    if (field != Field::none) return;  // markup nested inside a kept field: its text stays there
    field = f;
    field_depth = depth;
    sink = target;
    sink->clear();
  }

  static const char* attribute(const XML_Char** attrs, const char* name) {
    for (; *attrs; attrs += 2)
      if (std::strcmp(attrs[0], name) == 0) return attrs[1];
    return nullptr;
  }

  bool parse_int(std::string_view what, int64_t& out) {
    std::string_view s = number;
    while (!s.empty() && std::strchr(" \t\r\n", s.front())) s.remove_prefix(1);
    while (!s.empty() && std::strchr(" \t\r\n", s.back())) s.remove_suffix(1);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return true;
    stop(cat("expected an integer in <", what, ">, found \"", printable(s.substr(0, 40)), "\""));
    return false;
  }

  void on_start(const XML_Char* name, const XML_Char** attrs) {
    ++depth;
    switch (depth) {
      case 1: {
        if (std::strcmp(name, "mediawiki") != 0)
          return stop(cat("expected the root element <mediawiki>, found <", name, ">: not a MediaWiki XML dump"));
        saw_root = true;
        note_encoding();
        if (const char* lang = attribute(attrs, "xml:lang")) site.lang = lang;
        break;
      }
      case 2:
        if (std::strcmp(name, "page") == 0) begin_page();
        else if (std::strcmp(name, "siteinfo") == 0) in_siteinfo = site.present = true;
        break;
      case 3:
        if (in_page) {
          if (std::strcmp(name, "title") == 0) start_field(Field::title, &page.title);
          else if (std::strcmp(name, "ns") == 0) start_field(Field::ns, &number);
          else if (std::strcmp(name, "id") == 0) start_field(Field::page_id, &number);
          else if (std::strcmp(name, "revision") == 0) begin_revision();
          else if (std::strcmp(name, "redirect") == 0) {
            page.redirect = true;
            const char* target = attribute(attrs, "title");
            page.redirect_target = target ? target : "";
          }
        } else if (in_siteinfo) {
          if (std::strcmp(name, "sitename") == 0) start_field(Field::sitename, &site.sitename);
          else if (std::strcmp(name, "dbname") == 0) start_field(Field::dbname, &site.dbname);
          else if (std::strcmp(name, "base") == 0) start_field(Field::base, &site.base);
          else if (std::strcmp(name, "generator") == 0) start_field(Field::generator, &site.generator);
          else if (std::strcmp(name, "namespaces") == 0) in_namespaces = true;
        }
        break;
      case 4:
        if (in_revision) {
          if (std::strcmp(name, "text") == 0) {
            start_field(Field::text, &page.text);
            reserve_text(attribute(attrs, "bytes"));
            if (sink == &page.text) {
              text_open = true;
              text_content_at = static_cast<uint64_t>(offset() + XML_GetCurrentByteCount(parser));
            }
          }
          else if (std::strcmp(name, "id") == 0) start_field(Field::revision_id, &number);
        } else if (in_namespaces && std::strcmp(name, "namespace") == 0) {
          const char* key = attribute(attrs, "key");
          number = key ? key : "";
          if (parse_int("namespace key", namespace_key)) start_field(Field::namespace_name, &site.namespaces[namespace_key]);
        }
        break;
      default:
        break;
    }
  }

  void on_end() {
    if (field != Field::none && depth == field_depth) end_field();
    switch (depth) {
      case 2:
        if (in_page) end_page();
        if (in_siteinfo && site.lang.empty()) site.lang = language_from_dbname(site.dbname);
        in_siteinfo = false;
        break;
      case 3:
        in_revision = false;
        in_namespaces = false;
        break;
      default:
        break;
    }
    --depth;
  }

  void end_field() {
    Field f = field;
    field = Field::none;
    sink = nullptr;
    switch (f) {
      case Field::ns:
        if (parse_int("ns", page.ns)) page_has_ns = true;
        break;
      case Field::page_id: parse_int("id", page.id); break;
      case Field::revision_id: parse_int("revision id", page.revision_id); break;
      case Field::text:  // a hint that lied must not leave its reservation on every queued page
        text_open = false;
        if (page.text.capacity() > 2 * page.text.size() + 4096) page.text.shrink_to_fit();
        break;
      default: break;
    }
  }

  // <text bytes="N"> says how long the text is: reserving it keeps a huge page at one copy instead
  // of the 1.5-2x of doubling.
  void reserve_text(const char* bytes) {
    if (!bytes || sink != &page.text) return;
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(bytes, bytes + std::strlen(bytes), n);
    if (ec == std::errc() && *end == 0) page.text.reserve(std::min<uint64_t>(n, kMaxTextReserve));
  }

  void begin_page() {
    page = Page{};
    page.byte_offset = static_cast<uint64_t>(offset());
    page.ordinal = started++;
    page_has_ns = false;
    in_page = true;
  }

  void begin_revision() {
    in_revision = true;
    page.revision_id = -1;
    page.text.clear();  // only the last revision counts
  }

  void end_page() {
    in_page = false;
    if (!page_has_ns) page.ns = namespace_from_title(page.title);
    ready.push_back(std::move(page));
    page = Page{};
  }

  // Old schemas (before 0.6) have no <ns>: the title's prefix names the namespace.
  int64_t namespace_from_title(std::string_view title) const {
    size_t colon = title.find(':');
    if (colon == std::string_view::npos) return 0;
    std::string_view prefix = title.substr(0, colon);
    for (const auto& [key, name] : site.namespaces)
      if (key != 0 && name == prefix) return key;
    return 0;
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
  static void start_cb(void* self, const XML_Char* name, const XML_Char** attrs) {
    auto* s = static_cast<State*>(self);
    try {
      s->on_start(name, attrs);
    } catch (...) {
      s->exception = std::current_exception();
      XML_StopParser(s->parser, XML_FALSE);
    }
  }
  static void end_cb(void* self, const XML_Char*) {
    auto* s = static_cast<State*>(self);
    try {
      s->on_end();
    } catch (...) {
      s->exception = std::current_exception();
      XML_StopParser(s->parser, XML_FALSE);
    }
  }
  static void text_cb(void* self, const XML_Char* data, int len) {
    auto* s = static_cast<State*>(self);
    if (!s->sink) return;
    try {
      s->sink->append(data, static_cast<size_t>(len));
    } catch (...) {
      s->exception = std::current_exception();
      XML_StopParser(s->parser, XML_FALSE);
    }
  }
  static void doctype_cb(void* self, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    static_cast<State*>(self)->stop("a <!DOCTYPE> declaration, which MediaWiki dumps never have: refused");
  }

  void deliver() {
    for (Page& p : ready) {
      ++handed_out;
      on_page(std::move(p));
    }
    ready.clear();
  }

  std::string where_page() const {
    if (!in_page) return {};
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
    return cat(" near \"", printable(std::string_view(buffer + from, static_cast<size_t>(to - from))), "\"");
  }

  [[noreturn]] void throw_fault() {
    failed = true;
    if (exception) std::rethrow_exception(exception);
    if (!fault.empty()) throw Error(Where::at_offset(source, fault_offset), cat("MediaWiki XML: ", fault, where_page()));
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
    if (final && !exception && fault.empty() && saw_root && ends_early(XML_GetErrorCode(parser))) return end_early();
    throw_fault();
  }

  // Expat tokenizes byte by byte (~200 MB/s), and a dump is ~95% <text> content. So expat gets the
  // markup, and the content of each revision's <text> is scanned here at memory speed: plain
  // UTF-8, the five predefined entities, character references and line-end normalization. Whatever
  // else turns up in the content (CDATA, a comment, a bad byte, an unknown entity) goes back to
  // expat from that byte on, so expat still decides what is well-formed and words every error.
  //
  // Consumes a prefix of data[0, size) and returns its length; the rest is a construct cut by the
  // end of the chunk, to be retried with more bytes.
  size_t consume(const char* data, size_t size) {
    size_t i = 0;
    while (i < size) {
      if (mode == Mode::text) {
        size_t stop = scan_text(data, i, size);
        if (mode == Mode::text) return stop;  // cut construct: wait for more
        i = stop;
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
        size_t keep = cut_prefix_of_text_tag(data + i, size - i);
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
      size_t close = tag_end(data, name_end, size);
      if (close == size) return feed_until(data, i, at);
      to_parser(data + i, close + 1 - i, false);
      i = close + 1;
      if (fast && text_open && text_content_at == to_expat + skipped) mode = Mode::text;
    }
    return size;
  }

  size_t feed_until(const char* data, size_t from, size_t to) {
    to_parser(data + from, to - from, false);
    return to;
  }

  // Bytes at the end of data that could begin "<text": kept back for the next chunk.
  static size_t cut_prefix_of_text_tag(const char* data, size_t size) {
    for (size_t keep = std::min<size_t>(4, size); keep > 0; --keep)
      if (std::memcmp(data + size - keep, "<text", keep) == 0) return keep;
    return 0;
  }

  // Index of the '>' that ends a start tag whose attributes begin at `from` (quoted values may
  // hold '>'), or `size` when the tag goes on past the chunk.
  static size_t tag_end(const char* data, size_t from, size_t size) {
    char quote = 0;
    for (size_t i = from; i < size; ++i) {
      char c = data[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        return i;
      }
    }
    return size;
  }

  // Scans <text> content from data[i]. Returns the index where it stopped: at a '<' or at anything
  // expat must judge (mode is then markup and expat gets the bytes from there), or before a
  // construct cut by the end of the chunk (mode stays text).
  size_t scan_text(const char* data, size_t i, size_t size) {
    std::string& out = page.text;
    const size_t start = i;
    size_t run = i;  // start of the plain bytes not yet appended
    size_t stop = size;
    auto to_expat_from = [&](size_t at) {
      mode = Mode::markup;
      return at;
    };
    while (i < size) {
      i = skip_plain_ascii(data, i, size);
      if (i == size) break;
      auto c = static_cast<unsigned char>(data[i]);
      if (kPlainText[c]) {
        ++i;
        continue;
      }
      if (c >= 0x80) {  // a run of non-ASCII characters (CJK text is little else)
        int length = 0;
        while (i < size && static_cast<unsigned char>(data[i]) >= 0x80) {
          length = xml_char_length(reinterpret_cast<const unsigned char*>(data + i), size - i);
          if (length <= 0) break;
          i += static_cast<size_t>(length);
        }
        if (length == 0) { stop = i; break; }  // cut: wait for more
        if (length < 0) { stop = to_expat_from(i); break; }
        continue;
      }
      if (c == ']') {  // "]]>" may not appear in content
        if (i + 2 >= size) { stop = i; break; }
        if (data[i + 1] == ']' && data[i + 2] == '>') { stop = to_expat_from(i); break; }
        ++i;
        continue;
      }
      out.append(data + run, i - run);
      run = i;
      if (c == '\r') {  // XML reads "\r\n" and a lone "\r" as "\n"
        if (i + 1 >= size) { stop = i; break; }
        out += '\n';
        i += data[i + 1] == '\n' ? 2 : 1;
      } else if (c == '&') {
        size_t used = decode_reference(data + i, size - i, out);
        if (used == 0) { stop = i; break; }  // cut: wait for more
        if (used == SIZE_MAX) { stop = to_expat_from(i); break; }
        i += used;
      } else {  // '<', or a control character that XML forbids
        stop = to_expat_from(i);
        break;
      }
      run = i;
    }
    if (run < stop) out.append(data + run, stop - run);
    skipped += stop - start;
    return stop;
  }

  // Index of the first byte at or after i that is not plain printable ASCII, tab or line feed
  // (16 at a time: stopping at every line's end cost a fifth of the scan on English text). A ']'
  // only counts when "]]>" starts there: every wikilink ends in "]]", and stopping twice per link
  // cost more than the check. The last 17 bytes are left to the caller's byte loop.
  static size_t skip_plain_ascii(const char* data, size_t i, size_t size) {
#ifdef __SSE2__
    const __m128i space = _mm_set1_epi8(0x20), lt = _mm_set1_epi8('<'), amp = _mm_set1_epi8('&'),
                  bracket = _mm_set1_epi8(']'), gt = _mm_set1_epi8('>'), tab = _mm_set1_epi8('\t'),
                  lf = _mm_set1_epi8('\n');
    for (; i + 18 <= size; i += 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
      __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i + 1));
      __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i + 2));
      // A signed compare puts the bytes >= 0x80 below 0x20 too: they all need a closer look.
      __m128i below = _mm_andnot_si128(_mm_or_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(v, lf)),
                                       _mm_cmplt_epi8(v, space));
      __m128i cdata_end = _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(v, bracket), _mm_cmpeq_epi8(v1, bracket)),
                                        _mm_cmpeq_epi8(v2, gt));
      __m128i special = _mm_or_si128(_mm_or_si128(below, _mm_cmpeq_epi8(v, lt)),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, amp), cdata_end));
      if (int mask = _mm_movemask_epi8(special)) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    }
#endif
    (void)data;
    (void)size;
    return i;
  }

  // Bytes of the character at p (lead byte >= 0x80) when it is well-formed UTF-8 (no overlong
  // form, surrogate or value past U+10FFFF) and an XML character (not U+FFFE / U+FFFF); 0 when the
  // chunk ends inside it; -1 otherwise. The same rules as decode_utf8, inlined for CJK text.
  static int xml_char_length(const unsigned char* p, size_t available) {
    unsigned c = p[0];
    // Most characters first: two bytes (Greek, Cyrillic, …) or three (CJK) whose lead byte puts
    // no narrower range on the second byte than 80..BF.
    if (available >= 3) {
      if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : -1;
      if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE) return (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80 ? 3 : -1;
    }
    if (c < 0xC2 || c > 0xF4) return -1;
    size_t length = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (available < length) return 0;
    unsigned low = 0x80, high = 0xBF;  // the second byte's range
    if (c == 0xE0) low = 0xA0;
    else if (c == 0xED) high = 0x9F;
    else if (c == 0xF0) low = 0x90;
    else if (c == 0xF4) high = 0x8F;
    if (p[1] < low || p[1] > high) return -1;
    for (size_t k = 2; k < length; ++k)
      if (p[k] < 0x80 || p[k] > 0xBF) return -1;
    if (c == 0xEF && p[1] == 0xBF && p[2] >= 0xBE) return -1;
    return static_cast<int>(length);
  }

  // The predefined entities and character references at data[0] == '&', appended decoded. Returns
  // the bytes used, 0 when the chunk ends inside the reference, SIZE_MAX for what expat must judge.
  static size_t decode_reference(const char* data, size_t size, std::string& out) {
    if (size < 2) return 0;
    auto entity = [&](std::string_view name, char decoded) -> size_t {
      if (size < name.size()) return std::memcmp(data, name.data(), size) == 0 ? 0 : SIZE_MAX;
      if (std::memcmp(data, name.data(), name.size()) != 0) return SIZE_MAX;
      out += decoded;
      return name.size();
    };
    switch (data[1]) {
      case 'l': return entity("&lt;", '<');
      case 'g': return entity("&gt;", '>');
      case 'a':
        if (size < 3) return 0;
        return data[2] == 'm' ? entity("&amp;", '&') : entity("&apos;", '\'');
      case 'q': return entity("&quot;", '"');
      case '#': break;
      default: return SIZE_MAX;
    }
    // &#123; or &#x1F600; (at most 8 digits: longer runs of leading zeros go to expat)
    bool hex = size >= 3 && data[2] == 'x';
    size_t i = hex ? 3 : 2;
    uint32_t value = 0;
    size_t digits = 0;
    for (; i < size && digits <= 8; ++i, ++digits) {
      char c = data[i];
      int d = c >= '0' && c <= '9' ? c - '0' : !hex ? -1 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) break;
      value = value * (hex ? 16 : 10) + static_cast<uint32_t>(d);
    }
    if (i == size && digits <= 8) return 0;
    if (digits == 0 || digits > 8 || data[i] != ';' || !is_xml_char(value)) return SIZE_MAX;
    append_utf8(static_cast<char32_t>(value), out);
    return i + 1;
  }

  static bool is_xml_char(uint32_t c) {
    return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
           (c >= 0x10000 && c <= 0x10FFFF);
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

  static void xml_decl_cb(void* self, const XML_Char*, const XML_Char* encoding, int) {
    auto* s = static_cast<State*>(self);
    if (encoding && strcasecmp(encoding, "UTF-8") != 0 && strcasecmp(encoding, "utf8") != 0) s->fast = false;
  }

  static bool ends_early(XML_Error code) {
    return code == XML_ERROR_NO_ELEMENTS || code == XML_ERROR_UNCLOSED_TOKEN || code == XML_ERROR_PARTIAL_CHAR ||
           code == XML_ERROR_UNCLOSED_CDATA_SECTION;
  }

  // The input ended before </mediawiki>. Between pages that is a known quirk (jawiki); inside a
  // page or the siteinfo it is a truncated dump.
  void end_early() {
    if (depth == 1) {
      warn(cat(source, ": the input ends without </mediawiki> at byte ", fed, " after ", handed_out,
               " pages; every complete page was read"));
      return;
    }
    failed = true;
    if (in_page)
      throw Error(Where::at_offset(source, static_cast<int64_t>(page.byte_offset)),
                  cat("the input ends at byte ", fed, " inside this <page>",
                      page.title.empty() ? std::string() : cat(" (title \"", page.title, "\")"),
                      ": the dump is truncated; the ", handed_out, " complete pages before it were read"));
    throw Error(Where::at_offset(source, static_cast<int64_t>(fed)),
                cat("the input ends inside <", in_siteinfo ? "siteinfo" : "mediawiki",
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

const SiteInfo& XmlPageReader::siteinfo() const { return state_->site; }
uint64_t XmlPageReader::pages() const { return state_->handed_out; }
uint64_t XmlPageReader::bytes_fed() const { return state_->fed; }
const std::string& XmlPageReader::encoding() const { return state_->encoding; }
const std::vector<std::string>& XmlPageReader::warnings() const { return state_->warnings; }

SiteInfo for_each_page(const std::string& path, const XmlPageReader::PageCallback& on_page) {
  bool use_stdin = path == "-";
  int fd = use_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path);
  struct Closer {
    int fd;
    bool owned;
    ~Closer() {
      if (owned) ::close(fd);
    }
  } closer{fd, !use_stdin};
  XmlPageReader reader(use_stdin ? "<stdin>" : path, on_page);
  std::vector<char> buffer(size_t{4} << 20);
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read", path);
    if (n == 0) break;
    reader.feed(buffer.data(), static_cast<size_t>(n));
  }
  reader.finish();
  return reader.siteinfo();
}

}  // namespace pretrain
