// GPT-2's byte-level pre-tokenizer: the pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// hand-written as a scanner over code points (no regex engine), and the byte → unicode map that
// spells every byte as a printable character ("Ġ" for the space).
//
// Character classes are the ones tiktoken (Rust regex / fancy-regex) and HF tokenizers
// (Oniguruma) use: \p{L} is the general category L* (not ICU's Alphabetic property), \p{N} is
// Nd|Nl|No, and \s is the Unicode White_Space property (U+0009..U+000D, U+0020, U+0085, U+00A0,
// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) — not Python's \s, which adds
// U+001C..U+001F.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pretrain::gpt2 {

enum class CharClass : uint8_t { letter, number, space, other };

// The class of a code point; BMP code points come from a table built once from ICU.
CharClass char_class(char32_t c);

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// are shifted to U+0100.. so that every byte is one visible character.
const std::array<char32_t, 256>& bytes_to_unicode();
// The inverse: code point → byte, or -1 for code points outside the byte alphabet.
int unicode_to_byte(char32_t c);
// The vocabulary's spelling of one byte: its character in UTF-8 ("Ġ" for the space).
std::string byte_token(uint8_t byte);

namespace detail {
struct CodePoint {
  char32_t value;
  uint32_t length;
};
// Decodes one code point of *valid* UTF-8 (the tokenizer repairs its input first).
inline CodePoint decode_valid(const unsigned char* p) {
  unsigned char b = p[0];
  if (b < 0x80) return {b, 1};
  if (b < 0xE0) return {static_cast<char32_t>(((b & 0x1F) << 6) | (p[1] & 0x3F)), 2};
  if (b < 0xF0) return {static_cast<char32_t>(((b & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F)), 3};
  return {static_cast<char32_t>(((b & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F)), 4};
}
}  // namespace detail

// Splits valid UTF-8 `text` into GPT-2 pre-tokens, calling emit(begin, end) with byte offsets, in
// order; the pieces cover the text exactly. Each step follows the regex's first matching
// alternative at the current position (alternation is ordered, not longest-match).
template <typename Emit>
void pre_tokenize(std::string_view text, Emit&& emit) {
  using detail::decode_valid;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const size_t start = i;
    // 's 't 're 've 'm 'll 'd: lowercase only, as in GPT-2's pattern (no (?i)).
    if (s[i] == '\'' && i + 1 < n) {
      unsigned char a = s[i + 1];
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(start, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        unsigned char b = s[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
          emit(start, i + 3);
          i += 3;
          continue;
        }
      }
    }
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional U+0020, then a run of one class.
    size_t j = i;
    if (s[i] == ' ' && i + 1 < n) j = i + 1;
    detail::CodePoint c = decode_valid(s + j);
    CharClass cls = char_class(c.value);
    if (cls == CharClass::space && j != i) {  // the space is followed by more space: see below
      j = i;
      c = {' ', 1};
    }
    if (cls != CharClass::space) {
      j += c.length;
      while (j < n) {
        detail::CodePoint d = decode_valid(s + j);
        if (char_class(d.value) != cls) break;
        j += d.length;
      }
      emit(start, j);
      i = j;
      continue;
    }
    // "\s+(?!\S)|\s+": the whole whitespace run when it ends the text; before a non-space, all but
    // its last character (which then prefixes the next word: "   word" → "  ", " word"); a single
    // whitespace character before a non-space stands alone.
    size_t last = i;  // start of the run's last character
    j = i;
    while (j < n) {
      detail::CodePoint d = decode_valid(s + j);
      if (char_class(d.value) != CharClass::space) break;
      last = j;
      j += d.length;
    }
    size_t end = (j == n || last == i) ? j : last;
    emit(start, end);
    i = end;
  }
}

}  // namespace pretrain::gpt2
