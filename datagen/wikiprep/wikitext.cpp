// The wikitext cleaner: three linear passes over the article.
//   1. preprocess: comments, extension tags (<ref>, <math>, <nowiki>, …), templates, <table>.
//   2. links and tables: [[…]] (nested, with namespaces), [url label], {| … |} (nested).
//   3. lines: headings, lists, table leftovers; inline apostrophes, HTML tags, entities, magic
//      words, whitespace; the tidying of what removed templates leave ("()", " ,").
// Each pass writes a new buffer. Nested constructs push a frame that remembers where its output
// began; closing one truncates (or rewrites) the output back to that point, so nothing is ever
// rescanned and an unclosed opener costs nothing extra. <nowiki> text travels between the passes
// wrapped in kLiteralOpen/kLiteralClose, bytes the input cannot contain (pass 1 drops them).
#include "datagen/wikiprep/wikitext.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_set>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/utf8.h"
#include "datagen/wikiprep/wikitext_internal.h"

namespace pretrain {
namespace {

constexpr char kLiteralOpen = '\x01';
constexpr char kLiteralClose = '\x02';
// [[ deeper than this is taken as text: real links nest two or three deep (a link in an image
// caption), and the bound keeps the label copying of nested links linear.
constexpr size_t kMaxLinkDepth = 8;

// The first byte at or after i in data[0, n) that is one of Bytes (n when none): 16 bytes at a
// time, since the passes below spend most of their time looking for the next markup byte in long
// runs of plain text. The byte loop is the reference and does the tail.
template <char... Bytes>
size_t find_byte(const char* data, size_t i, size_t n) {
#ifdef __SSE2__
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
    __m128i hit = _mm_setzero_si128();
    ((hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8(Bytes)))), ...);
    if (int mask = _mm_movemask_epi8(hit)) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  while (i < n && ((data[i] != Bytes) && ...)) ++i;
  return i;
}

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }
inline char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_blank(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool starts_with_ci(std::string_view s, size_t at, std::string_view lower_literal) {
  if (at > s.size() || s.size() - at < lower_literal.size()) return false;
  for (size_t k = 0; k < lower_literal.size(); ++k)
    if (ascii_lower(s[at + k]) != lower_literal[k]) return false;
  return true;
}

// The first `c` at or after `from` (text.size() when none). Remembers its last answer, so a scan
// that asks with growing `from` reads each byte once however many openers go unclosed.
class NextByte {
 public:
  NextByte(std::string_view text, char c) : text_(text), c_(c) {}
  size_t find(size_t from) {
    if (from >= searched_from_ && from <= found_) return found_;
    searched_from_ = from;
    const void* p = from < text_.size() ? std::memchr(text_.data() + from, c_, text_.size() - from)
                                        : nullptr;
    found_ = p ? static_cast<size_t>(static_cast<const char*>(p) - text_.data()) : text_.size();
    return found_;
  }

 private:
  std::string_view text_;
  char c_;
  size_t searched_from_ = 1, found_ = 0;  // empty memo
};

// The first closing tag </name …> at or after `from`, case-insensitive, memoized like NextByte.
class NextClosingTag {
 public:
  NextClosingTag() = default;
  NextClosingTag(std::string_view text, std::string_view lower_name) : text_(text), name_(lower_name) {}
  // Start of the closing tag (text.size() when none); *end gets the position after its '>'.
  size_t find(size_t from, size_t* end) {
    if (!(from >= searched_from_ && from <= found_)) search(from);
    *end = found_end_;
    return found_;
  }

 private:
  void search(size_t from) {
    searched_from_ = from;
    size_t n = text_.size();
    for (size_t p = from; p < n;) {
      const void* lt = std::memchr(text_.data() + p, '<', n - p);
      if (!lt) break;
      p = static_cast<size_t>(static_cast<const char*>(lt) - text_.data());
      if (p + 1 < n && text_[p + 1] == '/' && starts_with_ci(text_, p + 2, name_)) {
        size_t q = p + 2 + name_.size();
        while (q < n && (is_blank(text_[q]) || text_[q] == '\n')) ++q;
        if (q < n && text_[q] == '>') {
          found_ = p;
          found_end_ = q + 1;
          return;
        }
      }
      ++p;
    }
    found_ = found_end_ = n;
  }

  std::string_view text_, name_;
  size_t searched_from_ = 1, found_ = 0, found_end_ = 0;
};

// "<name" or "</name" at `at`: the lowercase name (empty when there is none), whether it closes,
// and where the name ends. Names are ASCII letters and digits, starting with a letter.
struct TagName {
  char lower[24];
  size_t size = 0;
  bool closing = false;
  size_t name_end = 0;
  std::string_view view() const { return {lower, size}; }
};
TagName read_tag_name(std::string_view s, size_t at) {
  TagName t;
  size_t p = at + 1;
  if (p < s.size() && s[p] == '/') {
    t.closing = true;
    ++p;
  }
  if (p >= s.size() || !is_ascii_alpha(s[p])) return t;
  size_t start = p;
  while (p < s.size() && is_ascii_alnum(s[p])) {
    if (p - start >= sizeof(t.lower)) return t;  // no tag has so long a name
    t.lower[p - start] = ascii_lower(s[p]);
    ++p;
  }
  if (p < s.size() && !(is_blank(s[p]) || s[p] == '\n' || s[p] == '/' || s[p] == '>')) return t;
  t.size = p - start;
  t.name_end = p;
  return t;
}

// ---------------------------------------------------------------------------------------------
// Pass 1: comments, extension tags, templates, HTML tables.

enum class ExtAction : uint8_t { kDrop, kLiteral };
struct ExtTag {
  std::string_view name;
  ExtAction action;
};
// Extension tags whose content is not wikitext: dropped whole, or (nowiki) kept verbatim.
// <includeonly> content only shows where a page is transcluded, never in the article itself.
constexpr ExtTag kExtTags[] = {
    {"categorytree", ExtAction::kDrop}, {"ce", ExtAction::kDrop},
    {"charinsert", ExtAction::kDrop},   {"chem", ExtAction::kDrop},
    {"gallery", ExtAction::kDrop},      {"graph", ExtAction::kDrop},
    {"hiero", ExtAction::kDrop},        {"imagemap", ExtAction::kDrop},
    {"includeonly", ExtAction::kDrop},  {"indicator", ExtAction::kDrop},
    {"inputbox", ExtAction::kDrop},     {"mapframe", ExtAction::kDrop},
    {"maplink", ExtAction::kDrop},      {"math", ExtAction::kDrop},
    {"nowiki", ExtAction::kLiteral},    {"pre", ExtAction::kDrop},
    {"quiz", ExtAction::kDrop},         {"ref", ExtAction::kDrop},
    {"references", ExtAction::kDrop},   {"score", ExtAction::kDrop},
    {"section", ExtAction::kDrop},      {"source", ExtAction::kDrop},
    {"syntaxhighlight", ExtAction::kDrop}, {"templatedata", ExtAction::kDrop},
    {"templatestyles", ExtAction::kDrop},  {"timeline", ExtAction::kDrop},
};
constexpr size_t kNumExtTags = std::size(kExtTags);

int find_ext_tag(std::string_view lower_name) {
  for (size_t k = 0; k < kNumExtTags; ++k)
    if (kExtTags[k].name == lower_name) return static_cast<int>(k);
  return -1;
}

enum class FrameKind : uint8_t { kBraces, kHtmlTable, kLink, kExtLink, kTable };
struct Frame {
  size_t offset;   // where the construct's output starts
  uint32_t count;  // kBraces: opening braces still unmatched
  FrameKind kind;
};

// Removes the byte ranges [offset, offset + length) (ascending, disjoint) from s in one pass.
void erase_ranges(std::string& s, const std::vector<std::pair<size_t, size_t>>& ranges) {
  if (ranges.empty()) return;
  size_t write = ranges[0].first, read = ranges[0].first;
  for (size_t r = 0; r < ranges.size(); ++r) {
    size_t begin = ranges[r].first, end = std::min(s.size(), begin + ranges[r].second);
    if (begin < read) begin = read;  // never happens with disjoint ranges; keeps it safe
    std::memmove(&s[write], &s[read], begin - read);
    write += begin - read;
    read = std::max(read, end);
  }
  std::memmove(&s[write], &s[read], s.size() - read);
  s.resize(write + s.size() - read);
}

void append_literal(std::string_view content, std::string& out) {
  out += kLiteralOpen;
  for (char c : content) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';  // HTML shows nowiki line breaks as spaces
    if (c != kLiteralOpen && c != kLiteralClose) out += c;
  }
  out += kLiteralClose;
}

void preprocess(std::string_view in, std::string& out, std::vector<Frame>& stack) {
  out.clear();
  out.reserve(in.size() + 16);
  stack.clear();
  const size_t n = in.size();
  NextByte next_gt(in, '>'), next_lt(in, '<');
  std::array<NextClosingTag, kNumExtTags> closers;
  std::array<bool, kNumExtTags> closer_ready{};
  size_t brace_frames = 0, html_table_frames = 0;

  size_t i = 0;
  while (i < n) {
    size_t j = find_byte<'{', '}', '<', kLiteralOpen, kLiteralClose>(in.data(), i, n);
    out.append(in.data() + i, j - i);
    i = j;
    if (i >= n) break;
    char c = in[i];
    if (c == '{') {
      size_t k = i;
      while (k < n && in[k] == '{') ++k;
      size_t run = k - i;
      if (run >= 2) {
        stack.push_back({out.size(), static_cast<uint32_t>(std::min<size_t>(run, UINT32_MAX)),
                         FrameKind::kBraces});
        ++brace_frames;
      }
      out.append(run, '{');
      i = k;
    } else if (c == '}') {
      size_t k = i;
      while (k < n && in[k] == '}') ++k;
      size_t run = k - i;
      i = k;
      // Match like MediaWiki's preprocessor: three braces a side make a {{{parameter}}}, two a
      // {{template}}; leftover braces stay open (or stay text) for the next match.
      // A <table> left open inside the template ends with it.
      while (run >= 2 && brace_frames > 0 && stack.back().kind == FrameKind::kHtmlTable) {
        stack.pop_back();
        --html_table_frames;
      }
      while (run >= 2 && !stack.empty() && stack.back().kind == FrameKind::kBraces) {
        Frame& f = stack.back();
        uint32_t use = static_cast<uint32_t>(std::min<size_t>({f.count, run, 3}));
        f.count -= use;
        run -= use;
        out.resize(f.offset + f.count);
        if (f.count < 2) {
          stack.pop_back();
          --brace_frames;
        }
      }
      if (run == 1) out += '}';  // a lone brace is text; unmatched "}}" is dropped
    } else if (c == '<') {
      if (in.compare(i, 4, "<!--") == 0) {  // comment, to "-->" or to the end when unterminated
        size_t e = in.find("-->", i + 4);
        i = e == std::string_view::npos ? n : e + 3;
        continue;
      }
      TagName tag = read_tag_name(in, i);
      int ext = tag.size ? find_ext_tag(tag.view()) : -1;
      bool html_table = tag.view() == "table";
      size_t gt = (ext >= 0 || html_table) ? next_gt.find(tag.name_end) : n;
      if (gt >= n || next_lt.find(i + 1) < gt) {  // not a tag: a '<' of the text
        out += '<';
        ++i;
        continue;
      }
      bool self_closing = in[gt - 1] == '/';
      i = gt + 1;
      if (html_table) {
        if (!tag.closing && !self_closing) {
          stack.push_back({out.size(), 0, FrameKind::kHtmlTable});
          ++html_table_frames;
        } else if (tag.closing && html_table_frames > 0) {
          while (stack.back().kind != FrameKind::kHtmlTable) {  // {{ left open inside it
            stack.pop_back();
            --brace_frames;
          }
          out.resize(stack.back().offset);
          stack.pop_back();
          --html_table_frames;
        }
        continue;
      }
      if (tag.closing || self_closing) continue;  // <ref name="x"/>, stray </ref>: nothing
      if (!closer_ready[ext]) {
        closers[ext] = NextClosingTag(in, kExtTags[ext].name);
        closer_ready[ext] = true;
      }
      size_t close_end;
      size_t close = closers[ext].find(i, &close_end);
      if (close >= n) continue;  // unterminated: only the opening tag goes
      if (kExtTags[ext].action == ExtAction::kLiteral) append_literal(in.substr(i, close - i), out);
      i = close_end;
    } else {
      ++i;  // kLiteralOpen/kLiteralClose in the input: dropped so ours stay unambiguous
    }
  }
  // Unclosed {{: MediaWiki shows them as text; we keep the text but not the braces.
  std::vector<std::pair<size_t, size_t>> braces;
  for (const Frame& f : stack)
    if (f.kind == FrameKind::kBraces && f.offset < out.size()) braces.emplace_back(f.offset, f.count);
  erase_ranges(out, braces);
}

// ---------------------------------------------------------------------------------------------
// Pass 2: links and tables.

constexpr std::string_view kUrlProtocols[] = {
    "//", "bitcoin:", "ftp://", "ftps://", "geo:", "git://", "gopher://", "http://", "https://",
    "irc://", "ircs://", "magnet:", "mailto:", "mms://", "news:", "nntp://", "redis://",
    "sftp://", "sip:", "sips:", "sms:", "ssh://", "svn://", "tel:", "telnet://", "urn:",
    "worldwind://", "xmpp:"};

// End of the URL that starts at `at` (after '['), or 0 when no URL starts there.
size_t match_url(std::string_view s, size_t at) {
  size_t p = 0;
  for (std::string_view proto : kUrlProtocols)
    if (starts_with_ci(s, at, proto)) {
      p = at + proto.size();
      break;
    }
  if (p == 0) return 0;
  size_t start = p;
  while (p < s.size()) {
    auto b = static_cast<uint8_t>(s[p]);
    if (b <= 0x20 || b == 0x7F || b == '[' || b == ']' || b == '<' || b == '>' || b == '"') break;
    ++p;
  }
  return p > start ? p : 0;
}

class LinkResolver {
 public:
  LinkResolver(const WikitextCleaner& cleaner) : cleaner_(cleaner) {}

  // out[f.offset..] is "[[" + the link's inner text, its nested links already resolved. Replaces it
  // with what the reader sees: the label, or nothing for files, categories and interlanguage.
  void resolve(const Frame& f, std::string& out) const {
    size_t start = f.offset + 2;
    std::string_view inner(out.data() + start, out.size() - start);
    size_t pipe = inner.find('|');
    std::string_view target = trim(inner.substr(0, pipe));
    if (target.find('\n') != std::string_view::npos) {  // no link: a title has no line break
      out.erase(f.offset, 2);
      return;
    }
    if (!target.empty() && target.back() == ':') {  // "[[wikipedia:el:{{PAGENAME}}]]": no title left
      out.resize(f.offset);
      return;
    }
    bool leading_colon = !target.empty() && target[0] == ':';
    if (leading_colon) {
      target = trim(target.substr(1));  // [[:Category:X]] is a visible link to the category
    } else if (size_t colon = target.find(':'); colon != std::string_view::npos) {
      std::string_view prefix = trim(target.substr(0, colon));
      if (cleaner_.is_dropped_namespace(prefix) ||
          (cleaner_.options().drop_interlanguage && is_language_code(prefix))) {
        out.resize(f.offset);
        return;
      }
    }
    std::string_view label = pipe == std::string_view::npos ? target : trim(inner.substr(pipe + 1));
    if (label.empty()) label = target;  // [[Target|]]
    std::memmove(out.data() + f.offset, label.data(), label.size());
    out.resize(f.offset + label.size());
  }

 private:
  const WikitextCleaner& cleaner_;
};

void links_and_tables(std::string_view in, std::string& out, std::vector<Frame>& stack,
                      const LinkResolver& resolver) {
  out.clear();
  out.reserve(in.size() + 16);
  stack.clear();
  const size_t n = in.size();
  size_t link_frames = 0, table_frames = 0;
  NextByte next_bracket(in, ']'), next_newline(in, '\n');

  size_t i = 0;
  bool line_start = true;
  while (i < n) {
    if (line_start) {
      line_start = false;
      size_t k = i;
      while (k < n && (is_blank(in[k]) || in[k] == ':')) ++k;
      if (k + 1 < n && in[k] == '{' && in[k + 1] == '|') {  // table start: its line is attributes
        stack.push_back({out.size(), 0, FrameKind::kTable});
        ++table_frames;
        i = next_newline.find(k);
        continue;
      }
      k = i;
      while (k < n && is_blank(in[k])) ++k;
      if (k + 1 < n && in[k] == '|' && in[k + 1] == '}') {
        if (table_frames > 0) {  // drop the table, with any link left open inside it
          while (stack.back().kind != FrameKind::kTable) {
            if (stack.back().kind == FrameKind::kLink) --link_frames;
            stack.pop_back();
          }
          out.resize(stack.back().offset);
          stack.pop_back();
          --table_frames;
        }
        i = k + 2;
        continue;
      }
    }
    size_t j = find_byte<'[', ']', '\n', kLiteralOpen>(in.data(), i, n);
    out.append(in.data() + i, j - i);
    i = j;
    if (i >= n) break;
    char c = in[i];
    if (c == '\n') {
      while (!stack.empty() && stack.back().kind == FrameKind::kExtLink) stack.pop_back();
      out += '\n';
      ++i;
      line_start = true;
    } else if (c == kLiteralOpen) {
      size_t e = in.find(kLiteralClose, i);
      e = e == std::string_view::npos ? n : e + 1;
      out.append(in.data() + i, e - i);
      i = e;
    } else if (c == '[') {
      if (i + 1 < n && in[i + 1] == '[') {
        if (link_frames < kMaxLinkDepth) {
          stack.push_back({out.size(), 0, FrameKind::kLink});
          ++link_frames;
        }
        out += "[[";
        i += 2;
        continue;
      }
      if (size_t url_end = match_url(in, i + 1)) {
        // [url label] → label, [url] → nothing. The label may hold [[links]]: it is scanned like
        // any text, and the first ']' that closes no link ends it (on this line).
        if (next_bracket.find(url_end) < next_newline.find(url_end)) {
          stack.push_back({out.size(), 0, FrameKind::kExtLink});
          i = url_end;
          while (i < n && is_blank(in[i])) ++i;
          continue;
        }
      }
      out += '[';
      ++i;
    } else {  // ']'
      if (!stack.empty() && stack.back().kind == FrameKind::kExtLink) {
        stack.pop_back();
        ++i;
        continue;
      }
      if (i + 1 < n && in[i + 1] == ']') {
        if (!stack.empty() && stack.back().kind == FrameKind::kLink) {
          resolver.resolve(stack.back(), out);
          stack.pop_back();
          --link_frames;
          i += 2;
          continue;
        }
        if (link_frames == 0) {  // stray "]]"
          i += 2;
          continue;
        }
      }
      out += ']';
      ++i;
    }
  }
  // Unclosed [[: keep the text, not the brackets. An unclosed table keeps its text too (as
  // wikiextractor does); pass 3 drops its row markup lines.
  std::vector<std::pair<size_t, size_t>> brackets;
  for (const Frame& f : stack)
    if (f.kind == FrameKind::kLink && f.offset < out.size()) brackets.emplace_back(f.offset, 2);
  erase_ranges(out, brackets);
}

// ---------------------------------------------------------------------------------------------
// Pass 3: lines and inline markup.

struct HtmlTag {
  std::string_view name;
  bool breaks;  // renders as a break between words (a space for us)
};
// HTML tags MediaWiki allows (and the extension tags, whose strays are dropped too): removed,
// their text kept. Any other "<…" is text.
constexpr HtmlTag kHtmlTags[] = {
    {"a", false}, {"abbr", false}, {"b", false}, {"bdi", false}, {"bdo", false}, {"big", false},
    {"blockquote", true}, {"br", true}, {"caption", true}, {"categorytree", false}, {"ce", false},
    {"center", true}, {"charinsert", false}, {"chem", false}, {"cite", false}, {"code", false},
    {"data", false}, {"dd", true}, {"del", false}, {"dfn", false}, {"div", true}, {"dl", true},
    {"dt", true}, {"em", false}, {"font", false}, {"gallery", true}, {"h1", true}, {"h2", true},
    {"h3", true}, {"h4", true}, {"h5", true}, {"h6", true}, {"hiero", false}, {"hr", true},
    {"i", false}, {"imagemap", true}, {"img", false}, {"includeonly", false},
    {"indicator", false}, {"ins", false}, {"kbd", false}, {"li", true}, {"mark", false},
    {"math", false}, {"noinclude", false}, {"nowiki", false}, {"ol", true},
    {"onlyinclude", false}, {"p", true}, {"poem", true}, {"pre", true}, {"q", false},
    {"rb", false}, {"ref", false}, {"references", true}, {"rp", false}, {"rt", false},
    {"rtc", false}, {"ruby", false}, {"s", false}, {"samp", false}, {"score", false},
    {"section", false}, {"small", false}, {"source", true}, {"span", false}, {"strike", false},
    {"strong", false}, {"sub", false}, {"sup", false}, {"syntaxhighlight", true}, {"table", true},
    {"tbody", true}, {"td", true}, {"templatestyles", false}, {"tfoot", true}, {"th", true},
    {"thead", true}, {"time", false}, {"timeline", true}, {"tr", true}, {"tt", false},
    {"u", false}, {"ul", true}, {"var", false}, {"wbr", false},
};
constexpr bool html_tags_sorted() {
  for (size_t i = 1; i < std::size(kHtmlTags); ++i)
    if (!(kHtmlTags[i - 1].name < kHtmlTags[i].name)) return false;
  return true;
}
static_assert(html_tags_sorted(), "kHtmlTags must be sorted for binary search");

const HtmlTag* find_html_tag(std::string_view lower_name) {
  auto it = std::lower_bound(std::begin(kHtmlTags), std::end(kHtmlTags), lower_name,
                             [](const HtmlTag& t, std::string_view n) { return t.name < n; });
  return it != std::end(kHtmlTags) && it->name == lower_name ? &*it : nullptr;
}

// Code points that are spacing, for whitespace normalisation: NBSP and the typographic spaces.
bool is_space_code_point(char32_t cp) {
  return cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F;
}

// Whether a line says anything: a letter or digit, or a non-ASCII character that is not
// punctuation (lines of only "—", "•" or "." are leftovers).
bool has_word(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      if (is_ascii_alnum(static_cast<char>(*p))) return true;
      ++p;
      continue;
    }
    Utf8Step step = decode_utf8(p, end);
    char32_t cp = step.code_point;
    if (step.valid && !(cp <= 0xBF || (cp >= 0x2000 && cp <= 0x2BFF) ||
                        (cp >= 0x3000 && cp <= 0x3003) || (cp >= 0x3008 && cp <= 0x3011) ||
                        (cp >= 0xFF01 && cp <= 0xFF0F)))
      return true;
    p += step.length;
  }
  return false;
}

class LineRenderer {
 public:
  explicit LineRenderer(const WikitextOptions& options) : options_(options) {}

  void render(std::string_view in, std::string& out) {
    text_begin_ = in.data();
    text_end_ = in.data() + in.size();
    out.clear();
    for (auto& h : headings_) h.clear();
    size_t i = 0;
    while (i < in.size()) {
      size_t e = in.find('\n', i);
      if (e == std::string_view::npos) e = in.size();
      line(in.substr(i, e - i), out);
      i = e + 1;
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
  }

 private:
  void line(std::string_view raw, std::string& out) {
    if (raw.empty()) return;
    if (raw[0] == '=' && trim(raw).back() == '=') {  // "== Title ==" ("=x" alone is text)
      heading(raw);
      return;
    }
    std::string_view t = trim(raw);
    if (t.empty() || t[0] == '|' || (t.size() >= 2 && t[0] == '{' && t[1] == '|')) return;  // table rows
    std::string_view content = raw;
    if (raw[0] == '*' || raw[0] == '#' || raw[0] == ';' || raw[0] == ':') {
      if (!options_.keep_lists && raw[0] != ':') return;  // wikiextractor keeps ':' indents only
      size_t k = 0;
      while (k < raw.size() && (raw[k] == '*' || raw[k] == '#' || raw[k] == ';' || raw[k] == ':')) ++k;
      content = raw.substr(k);
    } else if (raw.size() >= 4 && raw.compare(0, 4, "----") == 0) {
      size_t k = 0;
      while (k < raw.size() && raw[k] == '-') ++k;  // horizontal rule
      content = raw.substr(k);
    }
    inline_text(content, text_);
    tidy(text_);
    if (!has_word(text_)) return;
    if (options_.keep_headings) {
      for (auto& h : headings_) {
        if (h.empty()) continue;
        out += h;
        out += '\n';
        h.clear();
      }
    }
    out += text_;
    out += '\n';
  }

  // "== Title ==": pending until its section shows text (wikiextractor drops empty sections'
  // headings too); a new heading replaces those of its level and below.
  void heading(std::string_view raw) {
    std::string_view r = trim(raw);
    size_t lead = 0, trail = 0;
    while (lead < r.size() && r[lead] == '=') ++lead;
    while (trail < r.size() && r[r.size() - 1 - trail] == '=') ++trail;
    if (lead == r.size()) return;  // "====": nothing but markup
    size_t level = std::min({lead, trail, size_t{6}});
    std::string_view title = r.substr(level, r.size() - 2 * level);
    inline_text(title, text_);
    tidy(text_);
    for (size_t l = level; l < headings_.size(); ++l) headings_[l].clear();
    if (!has_word(text_)) return;
    if (options_.heading_period && text_.back() != '!' && text_.back() != '?' && text_.back() != '.')
      text_ += '.';
    headings_[level] = text_;
  }

  void space(std::string& dst) {
    if (!dst.empty() && dst.back() != ' ') dst += ' ';
  }

  // Inline markup of one line: apostrophes, HTML tags, entities, magic words, whitespace.
  void inline_text(std::string_view s, std::string& dst) {
    dst.clear();
    const size_t n = s.size();
    NextByte next_gt(s, '>'), next_lt(s, '<');
    bool literal = false;  // inside <nowiki>
    // Lines lie inside the text render() was given: the 16-byte loads may read on past a line.
    bool inside = s.data() >= text_begin_ && s.data() + n <= text_end_;
    const size_t readable = inside ? static_cast<size_t>(text_end_ - s.data()) : n;
    size_t i = 0;
    while (i < n) {
      size_t j = run_end(s.data(), i, n, readable);
      dst.append(s.data() + i, j - i);
      i = j;
      if (i >= n) break;
      char c = s[i];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n') {
        space(dst);
        ++i;
      } else if (c == kLiteralOpen || c == kLiteralClose) {
        literal = c == kLiteralOpen;
        ++i;
      } else if (static_cast<uint8_t>(c) < 0x20 || c == '\x7f') {
        ++i;  // control characters are no text
      } else if (c == '\xc2') {
        if (i + 1 < n && s[i + 1] == '\xa0') {  // raw no-break space
          space(dst);
          i += 2;
        } else {
          dst += c;
          ++i;
        }
      } else if (c == '&') {
        entity_.clear();
        size_t used = decode_html_entity(s.substr(i), entity_);
        if (used == 0) {
          dst += '&';
          ++i;
          continue;
        }
        i += used;
        if (!entity_.empty()) {
          Utf8Step step = decode_utf8(reinterpret_cast<const uint8_t*>(entity_.data()),
                                      reinterpret_cast<const uint8_t*>(entity_.data()) + entity_.size());
          if (is_space_code_point(step.code_point) || entity_ == "\t" || entity_ == "\n")
            space(dst);
          else
            dst += entity_;
        }
      } else if (literal) {
        dst += c;
        ++i;
      } else if (c == '\'') {
        size_t k = i;
        while (k < n && s[k] == '\'') ++k;
        size_t run = k - i;
        // '' italic, ''' bold, ''''' both: markup. Four is an apostrophe before bold; more than
        // five leaves the extra ones as text.
        if (run == 1 || run == 4) dst += '\'';
        if (run > 5) dst.append(run - 5, '\'');
        i = k;
      } else if (c == '<') {
        TagName tag = read_tag_name(s, i);
        const HtmlTag* known = tag.size ? find_html_tag(tag.view()) : nullptr;
        size_t gt = known ? next_gt.find(tag.name_end) : n;
        if (gt >= n || next_lt.find(i + 1) < gt) {
          dst += '<';
          ++i;
          continue;
        }
        if (known->breaks) space(dst);
        i = gt + 1;
      } else {  // '_': behaviour switches such as __TOC__, __NOTOC__, __目次__
        size_t k = i + 2;
        if (i + 1 < n && s[i + 1] == '_') {
          while (k < n && k - i < 48 && ((s[k] >= 'A' && s[k] <= 'Z') || static_cast<uint8_t>(s[k]) >= 0x80)) ++k;
          if (k > i + 2 && k + 1 < n && s[k] == '_' && s[k + 1] == '_') {
            i = k + 2;
            continue;
          }
        }
        dst += '_';
        ++i;
      }
    }
    while (!dst.empty() && dst.back() == ' ') dst.pop_back();
  }

  // Bytes inline_text acts on: controls, space, and the starts of markup, entities, magic words
  // and the no-break space.
  static bool is_inline_special(uint8_t c) {
    return c <= 0x20 || c == '\'' || c == '<' || c == '&' || c == '_' || c == 0x7f || c == 0xc2;
  }

  // The end of the run inline_text copies as it is, from s[i]: the next special byte, except that
  // one space after a non-space is what space() would write and stays in the run (a line is
  // copied a phrase, not a word, at a time). `readable` >= n bytes at s may be loaded.
  static size_t run_end(const char* s, size_t i, size_t n, size_t readable) {
    if (is_inline_special(static_cast<uint8_t>(s[i]))) return i;
    size_t j = i + 1;
#ifdef __SSE2__
    const __m128i space = _mm_set1_epi8(' ');
    for (; j < n && j + 16 <= readable; j += 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j));
      __m128i before = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j - 1));  // s[j-1] >= s[i]
      __m128i special = _mm_cmpeq_epi8(_mm_min_epu8(v, space), v);  // <= 0x20
      for (char c : {'\'', '<', '&', '_', '\x7f', '\xc2'}) special = _mm_or_si128(special, _mm_cmpeq_epi8(v, _mm_set1_epi8(c)));
      __m128i single_space = _mm_andnot_si128(_mm_cmpeq_epi8(before, space), _mm_cmpeq_epi8(v, space));
      if (int mask = _mm_movemask_epi8(_mm_andnot_si128(single_space, special)))
        return std::min(n, j + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask))));
    }
    if (j >= n) return n;
#endif
    (void)readable;
    for (; j < n; ++j) {
      auto c = static_cast<uint8_t>(s[j]);
      if (is_inline_special(c) && !(c == ' ' && s[j - 1] != ' ')) break;
    }
    return j;
  }

  // What removed templates leave behind: "()" and "(; " and " ," and " ." and "; )".
  void tidy(std::string& line) {
    static constexpr std::string_view kFullOpen = "\xef\xbc\x88", kFullClose = "\xef\xbc\x89";
    auto at = [&](size_t k, std::string_view what) { return line.compare(k, what.size(), what) == 0; };
    // Separators left at the start of a parenthesis: " ,;:" and the CJK "、，；".
    auto separator_length = [&](size_t k) -> size_t {
      char c = line[k];
      if (c == ' ' || c == ',' || c == ';' || c == ':') return 1;
      if ((c == '\xe3' || c == '\xef') && (at(k, "\xe3\x80\x81") || at(k, "\xef\xbc\x8c") || at(k, "\xef\xbc\x9b")))
        return 3;
      return 0;
    };
    const size_t n = line.size();
    // Nothing to tidy (most CJK lines): the line stays as it is, without a copy.
    if (find_byte<'(', ')', ',', '.', '\xef'>(line.data(), 0, n) == n && (n == 0 || (line[0] != ' ' && line[n - 1] != ' ')))
      return;
    std::string& t = tidy_;
    t.clear();
    size_t i = 0;
    while (i < n) {
      size_t j = find_byte<'(', ')', ',', '.', '\xef'>(line.data(), i, n);
      t.append(line, i, j - i);
      i = j;
      if (i >= n) break;
      char c = line[i];
      // The full-width forms start with 0xEF: only then is a compare worth its call.
      size_t open_len = c == '(' ? 1 : c == '\xef' && at(i, kFullOpen) ? 3 : 0;
      size_t close_len = c == ')' ? 1 : c == '\xef' && at(i, kFullClose) ? 3 : 0;
      if (open_len) {
        size_t k = i + open_len;
        while (k < n) {
          size_t len = separator_length(k);
          if (len == 0) break;
          k += len;
        }
        size_t inner_close = k < n && line[k] == ')' ? 1 : k < n && at(k, kFullClose) ? 3 : 0;
        if (inner_close) {  // nothing inside: drop the pair and the space before it
          while (!t.empty() && t.back() == ' ') t.pop_back();
          i = k + inner_close;
          if (i < n && line[i] == ' ' && (t.empty() || i + 1 >= n || line[i + 1] == ',' || line[i + 1] == '.'))
            ++i;
          continue;
        }
        t.append(line, i, open_len);
        i = k;
      } else if (close_len) {
        while (!t.empty() && (t.back() == ' ' || t.back() == ',' || t.back() == ';')) t.pop_back();
        t.append(line, i, close_len);
        i += close_len;
      } else if (c == ',' || c == '.') {
        // " ," and " ." (a clause end, not ".NET"): the space was a removed template's.
        bool clause_end = c == ',' || i + 1 >= n || line[i + 1] == ' ';
        if (clause_end && !t.empty() && t.back() == ' ') t.pop_back();
        t += c;
        ++i;
      } else {
        t += c;
        ++i;
      }
    }
    while (!t.empty() && t.back() == ' ') t.pop_back();
    size_t lead = 0;
    while (lead < t.size() && t[lead] == ' ') ++lead;
    if (lead == 0) {
      line.swap(t);  // the usual case: no copy back (line's buffer becomes the next scratch)
    } else {
      line.assign(t, lead, std::string::npos);
    }
  }

  const WikitextOptions& options_;
  std::array<std::string, 7> headings_;  // pending heading per level 1..6
  std::string text_, entity_, tidy_;
  const char* text_begin_ = nullptr;  // the text render() was given
  const char* text_end_ = nullptr;
};

std::string namespace_key(std::string_view name) {
  std::string key;
  for (char c : trim(name)) {
    if (c == '_') c = ' ';
    if (c == ' ' && !key.empty() && key.back() == ' ') continue;
    key += ascii_lower(c);
  }
  return key;
}

}  // namespace

struct WikitextCleaner::Names {
  std::unordered_set<std::string> dropped;  // namespace_key of File and Category names
};

WikitextCleaner::WikitextCleaner(WikitextOptions options) : options_(std::move(options)) {
  auto names = std::make_unique<Names>();
  for (std::string_view n : builtin_dropped_namespaces()) names->dropped.insert(namespace_key(n));
  for (const auto& n : options_.file_namespaces) names->dropped.insert(namespace_key(n));
  for (const auto& n : options_.category_namespaces) names->dropped.insert(namespace_key(n));
  names->dropped.erase("");
  names_ = std::move(names);
}

WikitextCleaner::~WikitextCleaner() = default;

bool WikitextCleaner::is_dropped_namespace(std::string_view prefix) const {
  if (prefix.empty() || prefix.size() > 64) return false;
  return names_->dropped.count(namespace_key(prefix)) > 0;
}

void WikitextCleaner::clean(std::string_view wikitext, std::string& out) const {
  // Per-thread scratch: wikiprep calls this from many workers, each reusing its own buffers.
  thread_local std::string pass1, pass2;
  thread_local std::vector<Frame> stack;
  preprocess(wikitext, pass1, stack);
  links_and_tables(pass1, pass2, stack, LinkResolver(*this));
  LineRenderer(options_).render(pass2, out);
  if (pass1.capacity() > (size_t{64} << 20)) std::string().swap(pass1);  // one huge page
  if (pass2.capacity() > (size_t{64} << 20)) std::string().swap(pass2);
}

std::string WikitextCleaner::clean(std::string_view wikitext) const {
  std::string out;
  clean(wikitext, out);
  return out;
}

std::string clean_wikitext(std::string_view wikitext, const WikitextOptions& options) {
  return WikitextCleaner(options).clean(wikitext);
}

void clean_wikitext(std::string_view wikitext, std::string& out, const WikitextOptions& options) {
  WikitextCleaner(options).clean(wikitext, out);
}

}  // namespace pretrain
