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
