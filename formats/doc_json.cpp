#include "formats/doc_json.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <cstdint>
#include <cstring>
#include <iterator>

#include <nlohmann/json.hpp>

#include "common/utf8.h"

namespace pretrain {

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

// How many bytes from p on need no JSON escaping: printable ASCII other than '"' and '\\'.
// Sixteen bytes at a time with SSE2 (a signed compare puts bytes >= 0x80 below 0x20 too), then
// eight at a time (SWAR): a byte < 0x20, == '"', == '\\' or >= 0x80 stops the word.
inline const uint8_t* skip_plain_ascii(const uint8_t* p, const uint8_t* end) {
#ifdef __SSE2__
  const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  for (; end - p >= 16; p += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i stop = _mm_or_si128(_mm_cmplt_epi8(v, space),
                                _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (int mask = _mm_movemask_epi8(stop)) return p + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  auto has_zero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  while (end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    uint64_t stop = (w & kHigh) | ((w - 0x20 * kOnes) & ~w & kHigh) | has_zero(w ^ ('"' * kOnes)) |
                    has_zero(w ^ ('\\' * kOnes));
    if (stop) break;
    p += 8;
  }
  while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') ++p;
  return p;
}

// Appends s as a JSON string literal. Valid UTF-8 is copied raw; invalid subparts become U+FFFD.
size_t append_json_string(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t replaced = 0;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* end = p + s.size();
  const uint8_t* copy_from = p;  // bytes [copy_from, p) are to be copied as they are
  out.push_back('"');
  while (p < end) {
    p = skip_plain_ascii(p, end);
    if (p == end) break;
    uint8_t c = *p;
    if (c >= 0x80) {
      // A run of non-ASCII characters, checked inline and copied with the plain bytes around it.
      while (p < end && *p >= 0x80) {
        uint32_t length = valid_utf8_sequence(p, end);
        if (length == 0) break;
        p += length;
      }
      if (p == end || *p < 0x80) continue;
      Utf8Step step = decode_utf8(p, end);  // ill-formed: the maximal subpart to replace
      out.append(reinterpret_cast<const char*>(copy_from), static_cast<size_t>(p - copy_from));
      out.append(kReplacementUtf8);
      ++replaced;
      p += step.length;
      copy_from = p;
      continue;
    }
    out.append(reinterpret_cast<const char*>(copy_from), static_cast<size_t>(p - copy_from));
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\t': out.append("\\t"); break;
      case '\r': out.append("\\r"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      default: {
        char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(esc, 6);
      }
    }
    copy_from = ++p;
  }
  out.append(reinterpret_cast<const char*>(copy_from), static_cast<size_t>(end - copy_from));
  out.push_back('"');
  return replaced;
}

}  // namespace

size_t append_doc_json_line(const Document& doc, std::string& out) {
  size_t replaced = 0;
  out.append("{\"id\":");
  replaced += append_json_string(doc.id, out);
  out.append(",\"url\":");
  replaced += append_json_string(doc.url, out);
  out.append(",\"title\":");
  replaced += append_json_string(doc.title, out);
  out.append(",\"text\":");
  replaced += append_json_string(doc.text, out);
  out.append("}\n");
  return replaced;
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

// The value of the four hex digits at p (end - p >= 4), or -1 when they are not four hex digits.
int32_t hex4(const uint8_t* p) {
  int32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    uint8_t c = p[i];
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;
    v = v * 16 + digit;
  }
  return v;
}
bool is_high_surrogate(int32_t cp) { return cp >= 0xD800 && cp <= 0xDBFF; }
bool is_low_surrogate(int32_t cp) { return cp >= 0xDC00 && cp <= 0xDFFF; }
// The character a one-letter escape stands for ('n' -> '\n'), or 0 for a letter that is not one.
char simple_escape(uint8_t letter) {
  switch (letter) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
  }
}

// A pointer into the line that also publishes how far nlohmann has read (*read_to): the SAX
// events carry no position, and the errors our events raise (a field that is not a string,
// nesting too deep) name a column like nlohmann's own.
struct ReadCursor {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p;
  const char** read_to;

  reference operator*() const { return *p; }
  ReadCursor& operator++() {
    *read_to = ++p;
    return *this;
  }
  ReadCursor operator++(int) {
    ReadCursor before = *this;
    ++*this;
    return before;
  }
  bool operator==(const ReadCursor& other) const { return p == other.p; }
};

// nlohmann's message without its location ("[json.exception.parse_error.101] parse error at line
// 1, column 16: "; ours names file, line and column), in the words of our other errors.
// "syntax error while parsing object - unexpected string literal; expected '}'" names one of the
// two tokens that may follow a field, so it becomes "expected ',' or '}' after a field, found a
// string". A lexer error keeps nlohmann's words with the end of the token it read (a whole
// unterminated text would be too long).
std::string json_error_message(std::string_view what) {
  constexpr std::string_view kContext = "syntax error while parsing ", kUnexpected = "unexpected ",
                             kLastRead = "; last read: '", kExpected = "; expected ";
  if (size_t id_end = what.find("] "); what.starts_with('[') && id_end != std::string_view::npos)
    what.remove_prefix(id_end + 2);  // "[json.exception.parse_error.101] "
  if (size_t colon = what.find(": "); what.starts_with("parse error") && colon != std::string_view::npos)
    what.remove_prefix(colon + 2);  // "parse error at line 1, column 16: "
  std::string_view context, problem = what, token, expected;
  bool read_token = false;
  if (size_t dash = what.find(" - "); what.starts_with(kContext) && dash != std::string_view::npos) {
    context = what.substr(kContext.size(), dash - kContext.size());
    problem = what.substr(dash + 3);
  }
  if (size_t at = problem.find(kLastRead); at != std::string_view::npos) {
    read_token = true;
    token = problem.substr(at + kLastRead.size());
    problem = problem.substr(0, at);
    size_t close = token.rfind('\'');
    if (close != std::string_view::npos) {
      if (token.substr(close + 1).starts_with(kExpected)) expected = token.substr(close + 1 + kExpected.size());
      token = token.substr(0, close);
    }
  } else if (size_t at = problem.rfind(kExpected); at != std::string_view::npos) {
    expected = problem.substr(at + kExpected.size());
    problem = problem.substr(0, at);
  }
  std::string found;
  if (problem.starts_with(kUnexpected)) {
    std::string_view t = problem.substr(kUnexpected.size());
    found = t == "string literal" ? "a string" : t == "number literal" ? "a number"
          : t == "true literal" || t == "false literal" ? "a boolean" : t == "null literal" ? "null"
          : t == "'{'" ? "an object" : t == "'['" ? "an array" : t == "end of input" ? "the end of the line"
          : std::string(t);
  } else if (!read_token) {
    found = problem;  // "number overflow parsing '1e400'"
  } else {
    size_t cut = token.size() > 32 ? token.size() - 32 : 0;
    while (cut < token.size() && (static_cast<uint8_t>(token[cut]) & 0xC0) == 0x80) ++cut;  // whole characters
    found = cat(problem, " (last read: '", cut ? "…" : "", token.substr(cut), "')");
  }
  std::string_view wanted = context == "object" ? "',' or '}' after a field"
                          : context == "array" ? "',' or ']' after a value"
                          : expected == "end of input" ? "the end of the line after the JSON object"
                          : expected == "string literal" ? "'\"' starting a field name"
                          : expected == "':'" ? "':' after a field name"
                          : expected.empty() ? "" : "a JSON value";
  if (wanted.empty() || problem.starts_with("invalid string")) return found;
  return cat("expected ", wanted, ", found ", found);
}

// nlohmann's SAX events for one line: the top-level string fields are moved out of the parser
// into the document, everything else is only checked. Returning false stops the parse; error()
// then says why and error_at() where (an offset in the parsed line).
class DocumentEvents {
 public:
  using json = nlohmann::json;
  static constexpr std::string_view kNames[4] = {"id", "url", "title", "text"};

  DocumentEvents(Document& doc, std::string_view line, const std::vector<size_t>& elided,
                 std::vector<std::string>& decoded)
      : read_to(line.data()),
        fields_{&doc.id, &doc.url, &doc.title, &doc.text},
        line_(line),
        elided_(elided),
        decoded_(decoded) {}

  bool null() { return scalar("null"); }
  bool boolean(bool) { return scalar("a boolean"); }
  bool number_integer(json::number_integer_t) { return scalar("a number"); }
  bool number_unsigned(json::number_unsigned_t) { return scalar("a number"); }
  bool number_float(json::number_float_t, const std::string&) { return scalar("a number"); }
  bool binary(json::binary_t&) { return scalar("binary data"); }  // only from binary formats
  bool string(std::string& value) {
    std::string* decoded = next_string();
    if (depth_ == 0) return not_an_object("a string");
    if (depth_ == 1 && field_ >= 0) {
      // Swapped, not copied: the field's old buffer serves the pre-pass on the next line.
      if (decoded) std::swap(*fields_[field_], *decoded);
      else *fields_[field_] = std::move(value);  // the lexer's buffer: not copied again
      seen_ |= 1u << field_;
    }
    return true;
  }
  bool start_object(std::size_t) {
    if (depth_ == 0) return ++depth_, true;
    return open("an object");
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return not_an_object("an array");
    return open("an array");
  }
  bool end_object() { return --depth_, true; }
  bool end_array() { return --depth_, true; }
  bool key(std::string& name) {
    if (std::string* decoded = next_string()) std::swap(name, *decoded);
    if (depth_ != 1) return true;
    field_ = -1;
    for (int i = 0; i < 4; ++i)
      if (name == kNames[i]) field_ = i;
    key_end_ = offset();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // position counts the bytes read, the one that showed the error included (or the end).
    return fail(json_error_message(e.what()), position > 0 ? position - 1 : 0);
  }

  // After a successful parse: `text` was there; the fields not given are emptied.
  bool finish() {
    if (!(seen_ & 8u)) return fail("expected field 'text' (a string) in the JSON object", line_.size());
    for (int i = 0; i < 3; ++i)
      if (!(seen_ & (1u << i))) fields_[i]->clear();
    return true;
  }
  const std::string& error() const { return error_; }
  size_t error_at() const { return error_at_; }

  const char* read_to;  // how far nlohmann has read (ReadCursor keeps it)

 private:
  size_t offset() const { return static_cast<size_t>(read_to - line_.data()); }
  // The string nlohmann just read, when it stands for a long string the pre-pass took out. Its
  // events come in the order of the line's string literals, which the pre-pass counted too.
  std::string* next_string() {
    size_t index = strings_++;
    if (next_elided_ == elided_.size() || elided_[next_elided_] != index) return nullptr;
    return &decoded_[next_elided_++];
  }
  bool fail(std::string message, size_t at) {
    error_ = std::move(message);
    error_at_ = at;
    return false;
  }
  bool not_an_object(const char* found) {
    return fail(cat("expected '{' starting a JSON object, found ", found), line_.find_first_not_of(" \t\r\n"));
  }
  // The value of a wanted field that is not a string; the column is where the value starts.
  bool not_a_string(const char* found) {
    size_t at = line_.find_first_not_of(" \t\r\n:", key_end_);
    return fail(cat("expected field '", kNames[field_], "' to be a string, found ", found), at);
  }
  bool scalar(const char* found) {
    if (depth_ == 0) return not_an_object(found);
    if (depth_ == 1 && field_ >= 0) return not_a_string(found);
    return true;
  }
  bool open(const char* found) {
    if (depth_ == 1 && field_ >= 0) return not_a_string(found);
    if (depth_ == DocJsonLineReader::kMaxDepth)
      return fail(cat("expected JSON nested at most ", DocJsonLineReader::kMaxDepth, " deep"), offset() - 1);
    return ++depth_, true;
  }

  std::string* fields_[4];
  std::string_view line_;
  const std::vector<size_t>& elided_;     // which string literals the pre-pass took out
  std::vector<std::string>& decoded_;     // and their values
  size_t strings_ = 0, next_elided_ = 0;  // string literals read; elided_ used
  int depth_ = 0;      // objects and arrays open
  int field_ = -1;     // which of kNames the last top-level key was, or -1
  unsigned seen_ = 0;  // bit i: kNames[i] was read
  size_t key_end_ = 0;
  std::string error_;
  size_t error_at_ = 0;
};

}  // namespace

size_t DocJsonLineReader::read(std::string_view line, Document& doc, const Where& where) {
  size_t replaced = prepare(line);
  std::string_view json = rewritten_ ? std::string_view(parsed_) : line;
  DocumentEvents events(doc, json, elided_, decoded_);
  const char* begin = json.data();
  bool ok = nlohmann::json::sax_parse(ReadCursor{begin, &events.read_to},
                                      ReadCursor{begin + json.size(), nullptr}, &events) &&
            events.finish();
  if (!ok) throw Error(where, cat(events.error(), " (column ", original_column(events.error_at()), ")"));
  return replaced;
}

// One pass over the line, stopping only at quotes, escapes, control characters and non-ASCII
// bytes, for two jobs:
//  - repairs: nlohmann refuses ill-formed UTF-8 and \u escapes of lone surrogates; we replace them
//    (U+FFFD, \ufffd), as Python's json with errors="replace" does, and count them;
//  - speed: nlohmann's lexer takes a string byte by byte, pushing each into two buffers, at a
//    tenth of the speed of the rest of reading. A long string that needs nothing but decoding
//    (valid UTF-8, valid escapes, no control character) is decoded here, in the same pass, and
//    handed to nlohmann as ""; nlohmann still parses and checks everything around it.
// parsed_ is written only for a line with a repair or a long string.
size_t DocJsonLineReader::prepare(std::string_view line) {
  constexpr size_t kElideBytes = 32;  // shorter strings cost nlohmann little
  const uint8_t* begin = reinterpret_cast<const uint8_t*>(line.data());
  const uint8_t* end = begin + line.size();
  const uint8_t* p = begin;
  const uint8_t* copy_from = begin;  // bytes [copy_from, p) still to be copied into parsed_
  const uint8_t* string_start = nullptr;  // the opening quote of the string p is in, if any
  const uint8_t* run = nullptr;           // bytes [run, p) of that string still to be decoded
  std::string* decoded = nullptr;         // its value so far, while it needs nothing but decoding
  size_t replaced = 0, strings = 0;
  parsed_.clear();
  shifts_.clear();
  elided_.clear();
  rewritten_ = false;
  auto copy_to = [&](const uint8_t* to) {
    parsed_.append(reinterpret_cast<const char*>(copy_from), static_cast<size_t>(to - copy_from));
    rewritten_ = true;
  };
  auto replace = [&](size_t length, std::string_view with) {
    ++replaced;
    decoded = nullptr;  // nlohmann reads this string
    copy_to(p);
    parsed_.append(with);
    p += length;
    copy_from = p;
    if (length != with.size()) shifts_.push_back({parsed_.size(), static_cast<size_t>(p - begin)});
  };
  auto decode = [&](size_t length, auto&& append) {  // an escape of `length` bytes at p
    if (decoded) {
      decoded->append(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
      append(*decoded);
    }
    p += length;
    run = p;
  };
  while (p < end) {
    p = skip_plain_ascii(p, end);
    if (p == end) break;
    uint8_t c = *p;
    if (c == '"') {
      if (!string_start) {
        string_start = p, run = p + 1;
        if (decoded_.size() == elided_.size()) decoded_.emplace_back();
        decoded = &decoded_[elided_.size()];
        decoded->clear();
      } else {
        if (decoded && static_cast<size_t>(p - string_start - 1) >= kElideBytes) {
          decoded->append(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
          copy_to(string_start + 1);  // the opening quote; the closing one follows
          copy_from = p;
          elided_.push_back(strings);
          shifts_.push_back({parsed_.size(), static_cast<size_t>(p - begin)});
        }
        string_start = nullptr, decoded = nullptr;
        ++strings;
      }
      ++p;
    } else if (c == '\\') {
      int32_t cp = end - p >= 6 && p[1] == 'u' ? hex4(p + 2) : -1;
      int32_t low = is_high_surrogate(cp) && end - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8) : -1;
      char letter = end - p >= 2 ? simple_escape(p[1]) : 0;
      if (is_low_surrogate(low)) {
        char32_t pair = 0x10000 + ((static_cast<char32_t>(cp) - 0xD800) << 10) + (static_cast<char32_t>(low) - 0xDC00);
        decode(12, [&](std::string& out) { append_utf8(pair, out); });
      } else if (is_high_surrogate(cp) || is_low_surrogate(cp)) {
        replace(6, "\\ufffd");
      } else if (cp >= 0) {
        decode(6, [&](std::string& out) { append_utf8(static_cast<char32_t>(cp), out); });
      } else if (letter) {
        decode(2, [&](std::string& out) { out.push_back(letter); });
      } else {
        decoded = nullptr;  // nlohmann will say what is wrong
        p += end - p >= 2 && p[1] < 0x80 ? 2 : 1;  // a non-ASCII byte after '\' is checked next
      }
    } else if (c < 0x20) {
      decoded = nullptr;  // whitespace between tokens, or a raw control character in a string
      ++p;
    } else if (uint32_t length = valid_utf8_sequence(p, end)) {
      p += length;
    } else {
      replace(decode_utf8(p, end).length, kReplacementUtf8);
    }
  }
  if (rewritten_) copy_to(end);
  return replaced;
}

// The 1-based column in the line as read of an offset in the line as parsed.
int64_t DocJsonLineReader::original_column(size_t parsed_offset) const {
  size_t offset = parsed_offset;
  for (auto s = shifts_.rbegin(); s != shifts_.rend(); ++s) {
    if (s->parsed_end <= parsed_offset) {
      offset = parsed_offset - s->parsed_end + s->original_end;
      break;
    }
  }
  return static_cast<int64_t>(offset) + 1;
}

}  // namespace pretrain
