// UTF-8 validation and repair, as the Unicode standard (§3.9, "U+FFFD substitution of maximal
// subparts") and WHATWG's decoder define it: every maximal subpart of an ill-formed sequence becomes
// one U+FFFD. Valid means: no overlong forms, no surrogates (U+D800..U+DFFF), nothing past U+10FFFF.
// Every stage that takes text from outside (dumps, JSON lines, vocabularies, tokenizer input)
// goes through here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pretrain {

inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";  // U+FFFD
inline constexpr char32_t kReplacementChar = 0xFFFD;

// One step of decoding at p (p < end). When valid, `length` is the sequence's byte count (1..4)
// and `code_point` its value; when not, `length` is the maximal subpart to replace (>= 1).
struct Utf8Step {
  char32_t code_point;
  uint32_t length;
  bool valid;
};
Utf8Step decode_utf8(const uint8_t* p, const uint8_t* end);

// Bytes of the well-formed sequence that starts at p (p < end, *p >= 0x80), or 0 when it is
// ill-formed or cut by `end`: decode_utf8's validity rules without the decoding, inline for the
// loops that only need to know that non-ASCII text is valid (CJK text is little else, and a call
// per character cost more than the check).
inline uint32_t valid_utf8_sequence(const uint8_t* p, const uint8_t* end) {
  uint8_t lead = p[0], lo = 0x80, hi = 0xBF;  // lo..hi: allowed range of the second byte
  uint32_t length;
  // Most characters first: two bytes (Greek, Cyrillic, …) or three (CJK) with a lead byte that
  // puts no narrower range on the second byte.
  if (end - p >= 3) {
    if (lead >= 0xC2 && lead <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (lead >= 0xE1 && lead <= 0xEF && lead != 0xED)
      return (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80 ? 3 : 0;
  }
  if (lead < 0xC2) return 0;  // 80..C1 never start a sequence
  if (lead <= 0xDF) {
    length = 2;
  } else if (lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;       // overlong below U+0800
    else if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;       // overlong below U+10000
    else if (lead == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (end - p < static_cast<ptrdiff_t>(length) || p[1] < lo || p[1] > hi) return 0;
  for (uint32_t i = 2; i < length; ++i)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return length;
}

// Bytes of the longest valid prefix of s (s.size() when all of s is valid).
size_t valid_utf8_prefix(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return valid_utf8_prefix(s) == s.size(); }

// Appends s to out, each maximal invalid subpart replaced by U+FFFD. Returns the replacements made.
size_t append_repaired_utf8(std::string_view s, std::string& out);
// Repairs s in place (no copy when it is already valid). Returns the replacements made.
size_t repair_utf8(std::string& s);

// Appends the UTF-8 encoding of cp; surrogates and values past U+10FFFF append U+FFFD instead.
void append_utf8(char32_t cp, std::string& out);

}  // namespace pretrain
