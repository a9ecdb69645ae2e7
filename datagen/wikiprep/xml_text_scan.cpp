#include "datagen/wikiprep/xml_text_scan.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "common/utf8.h"

namespace pretrain::xml_text {
namespace {

// Content bytes that stand for themselves: printable ASCII and tab / line feed, but not the ones
// that start markup ('<', '&'), may end a forbidden "]]>" (']') or are normalized ('\r').
constexpr auto kPlainText = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '<' && c != '&' && c != ']';
  plain['\t'] = plain['\n'] = true;
  return plain;
}();

// Index of the first byte at or after i that is not plain printable ASCII, tab or line feed
// (16 at a time: stopping at every line's end cost a fifth of the scan on English text). A ']'
// only counts when "]]>" starts there: every wikilink ends in "]]", and stopping twice per link
// cost more than the check. The last 17 bytes are left to the caller's byte loop.
size_t skip_plain_ascii(const char* data, size_t i, size_t size) {
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

}  // namespace

Scan scan_content(const char* data, size_t from, size_t size, std::string& out) {
  size_t i = from;
  size_t run = i;  // start of the plain bytes not yet appended
  Scan scan{size, ScanEnd::chunk_end};
  auto stop_at = [&](size_t at, ScanEnd end) { scan = Scan{at, end}; };
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
      if (length == 0) { stop_at(i, ScanEnd::cut); break; }
      if (length < 0) { stop_at(i, ScanEnd::markup); break; }
      continue;
    }
    if (c == ']') {  // "]]>" may not appear in content
      if (i + 2 >= size) { stop_at(i, ScanEnd::cut); break; }
      if (data[i + 1] == ']' && data[i + 2] == '>') { stop_at(i, ScanEnd::markup); break; }
      ++i;
      continue;
    }
    out.append(data + run, i - run);
    run = i;
    if (c == '\r') {  // XML reads "\r\n" and a lone "\r" as "\n"
      if (i + 1 >= size) { stop_at(i, ScanEnd::cut); break; }
      out += '\n';
      i += data[i + 1] == '\n' ? 2 : 1;
    } else if (c == '&') {
      size_t used = decode_reference(data + i, size - i, out);
      if (used == 0) { stop_at(i, ScanEnd::cut); break; }
      if (used == kNotAReference) { stop_at(i, ScanEnd::markup); break; }
      i += used;
    } else {  // '<', or a control character that XML forbids
      stop_at(i, ScanEnd::markup);
      break;
    }
    run = i;
  }
  if (run < scan.stop) out.append(data + run, scan.stop - run);
  return scan;
}

int xml_char_length(const unsigned char* p, size_t available) {
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

size_t decode_reference(const char* data, size_t size, std::string& out) {
  if (size < 2) return 0;
  auto entity = [&](std::string_view name, char decoded) -> size_t {
    if (size < name.size()) return std::memcmp(data, name.data(), size) == 0 ? 0 : kNotAReference;
    if (std::memcmp(data, name.data(), name.size()) != 0) return kNotAReference;
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
    default: return kNotAReference;
  }
  // &#123; or &#x1F600; (at most 8 digits: longer runs of leading zeros go to expat)
  bool hex = size >= 3 && data[2] == 'x';
  size_t i = hex ? 3 : 2;
  uint32_t value = 0;
  size_t digits = 0;
  for (; i < size && digits <= 8; ++i, ++digits) {
    char c = data[i];
    int d = c >= '0' && c <= '9' ? c - '0'
            : !hex                 ? -1
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) break;
    value = value * (hex ? 16 : 10) + static_cast<uint32_t>(d);
  }
  if (i == size && digits <= 8) return 0;
  if (digits == 0 || digits > 8 || data[i] != ';' || !is_xml_char(value)) return kNotAReference;
  append_utf8(static_cast<char32_t>(value), out);
  return i + 1;
}

bool is_xml_char(uint32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
         (c >= 0x10000 && c <= 0x10FFFF);
}

size_t tag_end(const char* data, size_t from, size_t size) {
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

size_t cut_prefix_of_text_tag(const char* data, size_t size) {
  for (size_t keep = std::min<size_t>(4, size); keep > 0; --keep)
    if (std::memcmp(data + size - keep, "<text", keep) == 0) return keep;
  return 0;
}

}  // namespace pretrain::xml_text
