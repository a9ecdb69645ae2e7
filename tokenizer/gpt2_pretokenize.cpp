// Character classes from ICU and GPT-2's byte alphabet.
#include "tokenizer/gpt2_pretokenize.h"

#include <unicode/uchar.h>

#include <vector>

#include "common/utf8.h"

namespace pretrain::gpt2 {
namespace {

CharClass classify_with_icu(char32_t c) {
  UChar32 cp = static_cast<UChar32>(c);
  // White_Space first: none of its members is a letter or number, and it is what \s means to
  // both reference regex engines.
  if (u_isUWhiteSpace(cp)) return CharClass::space;
  switch (u_charType(cp)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::number;
    default:
      return CharClass::other;
  }
}

// One byte per BMP code point (64 KiB), filled once: the scanner asks for every character, and a
// table read is several times cheaper than ICU's property lookups.
const std::vector<CharClass>& bmp_classes() {
  static const std::vector<CharClass> table = [] {
    std::vector<CharClass> t(0x10000);
    for (char32_t c = 0; c < 0x10000; ++c) t[c] = classify_with_icu(c);
    return t;
  }();
  return table;
}

}  // namespace

CharClass char_class(char32_t c) {
  static const CharClass* bmp = bmp_classes().data();
  return c < 0x10000 ? bmp[c] : classify_with_icu(c);
}

const std::array<char32_t, 256>& bytes_to_unicode() {
  static const std::array<char32_t, 256> map = [] {
    std::array<char32_t, 256> m{};
    char32_t shifted = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      m[b] = printable ? static_cast<char32_t>(b) : shifted++;
    }
    return m;
  }();
  return map;
}

int unicode_to_byte(char32_t c) {
  static const std::array<int16_t, 512> inverse = [] {
    std::array<int16_t, 512> inv;
    inv.fill(-1);
    const auto& m = bytes_to_unicode();
    for (int b = 0; b < 256; ++b) inv[m[b]] = static_cast<int16_t>(b);
    return inv;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

std::string byte_token(uint8_t byte) {
  std::string token;
  append_utf8(bytes_to_unicode()[byte], token);
  return token;
}

}  // namespace pretrain::gpt2
