#include "tokenizer/bert_chars.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <memory>
#include <cstdlib>
#include <mutex>

namespace pretrain {
namespace {

bool is_ascii_punct(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

bool is_p_category(int8_t type) {
  return type == U_DASH_PUNCTUATION || type == U_START_PUNCTUATION || type == U_END_PUNCTUATION ||
         type == U_CONNECTOR_PUNCTUATION || type == U_OTHER_PUNCTUATION || type == U_INITIAL_PUNCTUATION ||
         type == U_FINAL_PUNCTUATION;
}

// Assigned by Unicode 8.0, the version of the category tables in HF's Rust normalizer.
bool in_unicode_8(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] != 0 && (age[0] < 8 || (age[0] == 8 && age[1] == 0));
}

// Characters whose general category changed after Unicode 8.0, as HF's fast tokenizer sees them
// (found by comparing every code point with tokenizers 0.20.3).
bool hf_punct_exception(char32_t c) { return c == 0x166D || c == 0x111C9; }  // were Po
bool hf_was_mn(char32_t c) { return c == 0x1734; }                            // now Mc
bool hf_was_not_mn(char32_t c) { return c == 0x1885 || c == 0x1886 || c == 0xA9BD || c == 0x111C9; }

bool is_cjk_fast(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Google's _is_chinese_char: its fifth range starts at U+2B820 (HF's Rust code has U+2B920).
bool is_cjk_python(char32_t c) { return is_cjk_fast(c) || (c >= 0x2B820 && c <= 0x2B91F); }

uint8_t flags_for(char32_t c, bool python, const icu::Normalizer2& nfd) {
  const auto u = static_cast<UChar32>(c);
  const int8_t type = u_charType(u);
  uint8_t f = 0;
  const bool tab_nl_cr = c == '\t' || c == '\n' || c == '\r';
  if (python) {
    if (c == 0 || c == 0xFFFD || (!tab_nl_cr && (type == U_CONTROL_CHAR || type == U_FORMAT_CHAR))) f |= kBertDrop;
    // _is_whitespace maps these to ' '; whitespace_tokenize's str.split() also splits at
    // U+2028/2029 (and at U+001C..001F, which clean_text has dropped already).
    if (c == ' ' || tab_nl_cr || type == U_SPACE_SEPARATOR || c == 0x2028 || c == 0x2029) f |= kBertSpace;
    if (is_cjk_python(c)) f |= kBertCjk;
    if (is_ascii_punct(c) || is_p_category(type)) f |= kBertPunct;
    if (type == U_NON_SPACING_MARK) f |= kBertMn;
  } else {
    const bool old = in_unicode_8(c);
    const bool other = type == U_CONTROL_CHAR || type == U_PRIVATE_USE_CHAR || type == U_SURROGATE ||
                       (type == U_FORMAT_CHAR && old);
    if (c == 0 || c == 0xFFFD || (!tab_nl_cr && other)) f |= kBertDrop;
    if (u_hasBinaryProperty(u, UCHAR_WHITE_SPACE)) f |= kBertSpace;
    if (is_cjk_fast(c)) f |= kBertCjk;
    if (is_ascii_punct(c) || (is_p_category(type) && old) || hf_punct_exception(c)) f |= kBertPunct;
    if (((type == U_NON_SPACING_MARK && old) || hf_was_mn(c)) && !hf_was_not_mn(c)) f |= kBertMn;
  }
  icu::UnicodeString decomposition;
  if (!nfd.getDecomposition(u, decomposition) && u_getCombiningClass(u) == 0) f |= kBertNfdInert;
  char32_t lower[2];
  if (bert_lowercase(c, lower) != 1 || lower[0] != c) f |= kBertLowerChanges;
  return f;
}

}  // namespace

const icu::Normalizer2& bert_nfd() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status)) std::abort();
  return *nfd;
}

BertCharFlags::BertCharFlags(bool python_rules)
    : python_(python_rules),
      flags_(std::make_unique_for_overwrite<uint8_t[]>(kBertCodePoints)),  // untouched until built
      ready_(std::make_unique<std::atomic<bool>[]>(kPages)) {}

void BertCharFlags::build(size_t page) const {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  if (ready_[page].load(std::memory_order_relaxed)) return;  // another thread built it meanwhile
  const icu::Normalizer2& nfd = bert_nfd();
  const char32_t first = static_cast<char32_t>(page << kPageBits);
  for (char32_t c = first; c < first + (char32_t{1} << kPageBits); ++c) flags_[c] = flags_for(c, python_, nfd);
  ready_[page].store(true, std::memory_order_release);
}

const BertCharFlags& bert_char_flags(bool python_rules) {
  static const BertCharFlags tables[2] = {BertCharFlags(false), BertCharFlags(true)};
  return tables[python_rules ? 1 : 0];
}

int bert_lowercase(char32_t cp, char32_t out[2]) {
  if (cp == 0x130) {
    out[0] = 'i';
    out[1] = 0x307;
    return 2;
  }
  out[0] = static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp)));
  return 1;
}

}  // namespace pretrain
