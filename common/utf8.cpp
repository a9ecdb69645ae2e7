#include "common/utf8.h"

#include <cstring>

namespace pretrain {

namespace {

// Bytes from p on that are plain ASCII, eight at a time: most text is mostly ASCII.
size_t ascii_run(const uint8_t* p, const uint8_t* end) {
  const uint8_t* start = p;
  while (end - p >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    if (word & 0x8080808080808080ull) break;
    p += 8;
  }
  while (p < end && *p < 0x80) ++p;
  return static_cast<size_t>(p - start);
}

}  // namespace

// Table 3-7 of the Unicode standard: the lead byte fixes the length and the range of the second
// byte; later bytes are always 80..BF. Decoding stops at the first byte outside its range, and the
// bytes accepted so far are the maximal subpart.
Utf8Step decode_utf8(const uint8_t* p, const uint8_t* end) {
  uint8_t lead = p[0];
  if (lead < 0x80) return {lead, 1, true};
  uint32_t length;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  char32_t cp;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;       // overlong below U+0800
    else if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;       // overlong below U+10000
    else if (lead == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return {kReplacementChar, 1, false};  // 80..C1, F5..FF never start a sequence
  }
  for (uint32_t i = 1; i < length; ++i) {
    if (p + i >= end) return {kReplacementChar, i, false};
    uint8_t b = p[i];
    if (b < lo || b > hi) return {kReplacementChar, i, false};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80, hi = 0xBF;
  }
  return {cp, length, true};
}

size_t valid_utf8_prefix(std::string_view s) {
  const uint8_t* begin = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* p = begin;
  const uint8_t* end = p + s.size();
  while (p < end) {
    p += ascii_run(p, end);
    if (p == end) break;
    uint32_t length = valid_utf8_sequence(p, end);
    if (length == 0) break;
    p += length;
  }
  return static_cast<size_t>(p - begin);
}

size_t append_repaired_utf8(std::string_view s, std::string& out) {
  size_t replaced = 0;
  while (!s.empty()) {
    size_t good = valid_utf8_prefix(s);
    out.append(s.data(), good);
    s.remove_prefix(good);
    if (s.empty()) break;
    auto* p = reinterpret_cast<const uint8_t*>(s.data());
    Utf8Step step = decode_utf8(p, p + s.size());
    out.append(kReplacementUtf8);
    ++replaced;
    s.remove_prefix(step.length);
  }
  return replaced;
}

size_t repair_utf8(std::string& s) {
  size_t good = valid_utf8_prefix(s);
  if (good == s.size()) return 0;
  std::string out;
  out.reserve(s.size() + 16);
  out.append(s, 0, good);
  size_t replaced = append_repaired_utf8(std::string_view(s).substr(good), out);
  s = std::move(out);
  return replaced;
}

void append_utf8(char32_t cp, std::string& out) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace pretrain
