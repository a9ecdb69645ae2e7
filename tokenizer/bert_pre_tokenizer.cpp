#include "tokenizer/bert_pre_tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <cstdlib>

#include "common/utf8.h"
#include "tokenizer/bert_chars.h"

namespace pretrain {
namespace {

std::u32string decode(std::string_view text) {
  std::u32string cps;
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    Utf8Step step = decode_utf8(p, end);
    cps.push_back(step.valid ? step.code_point : kReplacementChar);
    p += step.length;
  }
  return cps;
}

// U+11938 (Unicode 13) got a canonical decomposition after the tables of HF's NFD; HF leaves it
// whole. It has combining class 0, so NFD on each side of it is NFD of the whole.
constexpr char32_t kNewerDecomposition = 0x11938;

// NFD of cps in place (ICU works in UTF-16); hf_tables keeps U+11938 whole, as HF does.
void nfd_in_place(std::u32string& cps, bool hf_tables) {
  std::u32string out;
  size_t begin = 0;
  while (begin <= cps.size()) {
    size_t end = hf_tables ? cps.find(kNewerDecomposition, begin) : std::u32string::npos;
    if (end == std::u32string::npos) end = cps.size();
    icu::UnicodeString s = icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(cps.data() + begin),
                                                         static_cast<int32_t>(end - begin));
    UErrorCode status = U_ZERO_ERROR;
    icu::UnicodeString d = bert_nfd().normalize(s, status);
    if (U_FAILURE(status)) std::abort();  // only on memory exhaustion
    for (int32_t i = 0; i < d.length(); i = d.moveIndex32(i, 1)) out.push_back(static_cast<char32_t>(d.char32At(i)));
    if (end < cps.size()) out.push_back(cps[end]);
    begin = end + 1;
  }
  cps.swap(out);
}

std::string to_utf8(const std::u32string& cps) {
  std::string out;
  for (char32_t c : cps) append_utf8(c, out);
  return out;
}

}  // namespace

// Builds words at the end of out.bytes; flush() closes the current one.
struct BertPreTokenizer::Builder {
  BertWords& out;
  uint32_t start;
  uint32_t chars = 0;

  void flush() {
    auto size = static_cast<uint32_t>(out.bytes.size());
    if (size > start) out.words.push_back({start, size - start, chars});
    start = size;
    chars = 0;
  }
  void keep_ascii(char c) {
    out.bytes.push_back(c);
    ++chars;
  }
  void keep(char32_t c) {
    append_utf8(c, out.bytes);
    ++chars;
  }
  void alone(char32_t c) {
    flush();
    keep(c);
    flush();
  }
};

BertPreTokenizer::BertPreTokenizer(const BertNormalizerOptions& options)
    : options_(options), flags_(bert_char_flags(options.python_compat)) {
  for (int c = 0; c < 128; ++c) {
    uint8_t f = flags_[c];
    ascii_action_[c] = (options_.clean_text && (f & kBertDrop)) ? kDrop
                       : (f & kBertSpace)                       ? kSpace
                       : (f & kBertPunct)                       ? kPunct
                                                                : kKeep;
    ascii_map_[c] = static_cast<char>(options_.lowercase && c >= 'A' && c <= 'Z' ? c + 32 : c);
  }
}

void BertPreTokenizer::run(std::string_view text, BertWords& out) const {
  if (options_.python_compat) {
    for (const std::string& w : python_words(text)) {
      auto offset = static_cast<uint32_t>(out.bytes.size());
      out.bytes += w;
      out.words.push_back({offset, static_cast<uint32_t>(w.size()), static_cast<uint32_t>(decode(w).size())});
    }
    return;
  }
  Builder b{out, static_cast<uint32_t>(out.bytes.size())};
  const char* s = text.data();
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (ascii_action_[c]) {
        case kKeep: b.keep_ascii(ascii_map_[c]); break;
        case kSpace: b.flush(); break;
        case kPunct: b.alone(c); break;
        case kDrop: break;
      }
      ++i;
      continue;
    }
    // A run of non-ASCII characters goes through the general path as a whole: NFD reorders
    // combining marks within it, and ASCII characters (combining class 0) are boundaries NFD
    // never reorders across.
    size_t j = i + 1;
    while (j < n && static_cast<unsigned char>(s[j]) >= 0x80) ++j;
    run_non_ascii(text.substr(i, j - i), b);
    i = j;
  }
  b.flush();
}

void BertPreTokenizer::run_non_ascii(std::string_view run, Builder& b) const {
  // BertNormalizer: clean text and CJK spacing per character, then NFD over the run.
  std::u32string& cps = b.out.scratch;
  cps.clear();
  bool needs_nfd = false;
  const auto* p = reinterpret_cast<const uint8_t*>(run.data());
  const auto* end = p + run.size();
  while (p < end) {
    Utf8Step step = decode_utf8(p, end);
    p += step.length;
    char32_t c = step.valid ? step.code_point : kReplacementChar;
    uint8_t f = flags_[c];
    if (options_.clean_text && (f & kBertDrop)) continue;
    if (options_.clean_text && (f & kBertSpace)) c = ' ';
    if (!(f & kBertNfdInert)) needs_nfd = true;
    if (options_.handle_chinese_chars && (f & kBertCjk)) {
      cps += U' ';
      cps += c;
      cps += U' ';
    } else {
      cps += c;
    }
  }
  if (options_.strip_accents && needs_nfd) nfd_in_place(cps, true);
  // Strip accents, lowercase, then the pre-tokenizer's split of what results.
  auto emit = [&](char32_t c) {
    uint8_t f = flags_[c];
    if (f & kBertSpace)
      b.flush();
    else if (f & kBertPunct)
      b.alone(c);
    else
      b.keep(c);
  };
  for (char32_t c : cps) {
    uint8_t f = flags_[c];
    if (options_.strip_accents && (f & kBertMn)) continue;
    if (options_.lowercase && (f & kBertLowerChanges)) {
      char32_t lower[2];
      int k = bert_lowercase(c, lower);
      for (int i = 0; i < k; ++i) emit(lower[i]);
    } else {
      emit(c);
    }
  }
}

std::u32string BertPreTokenizer::normalize_reference(std::u32string text) const {
  std::u32string out;
  if (options_.clean_text) {
    for (char32_t c : text)
      if (!(flags_[c] & kBertDrop)) out += (flags_[c] & kBertSpace) ? U' ' : c;
    text.swap(out);
    out.clear();
  }
  if (options_.handle_chinese_chars) {
    for (char32_t c : text)
      if (flags_[c] & kBertCjk)
        out += std::u32string{U' ', c, U' '};
      else
        out += c;
    text.swap(out);
    out.clear();
  }
  if (options_.strip_accents) {
    nfd_in_place(text, true);
    for (char32_t c : text)
      if (!(flags_[c] & kBertMn)) out += c;
    text.swap(out);
    out.clear();
  }
  if (options_.lowercase) {
    for (char32_t c : text) {
      char32_t lower[2];
      int k = bert_lowercase(c, lower);
      out.append(lower, lower + k);
    }
    text.swap(out);
  }
  return text;
}

std::vector<std::string> BertPreTokenizer::reference(std::string_view text) const {
  if (options_.python_compat) return python_words(text);
  std::u32string normalized = normalize_reference(decode(text));
  std::vector<std::string> words;
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(to_utf8(word));
    word.clear();
  };
  for (char32_t c : normalized) {
    if (flags_[c] & kBertSpace) {
      flush();
    } else if (flags_[c] & kBertPunct) {
      flush();
      word = c;
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return words;
}

// Google's BasicTokenizer.tokenize, step by step.
std::vector<std::string> BertPreTokenizer::python_words(std::string_view text) const {
  std::u32string cps;
  for (char32_t c : decode(text)) {  // _clean_text, _tokenize_chinese_chars
    uint8_t f = flags_[c];
    if (options_.clean_text && (f & kBertDrop)) continue;
    if (options_.clean_text && (f & kBertSpace)) c = ' ';
    if (options_.handle_chinese_chars && (f & kBertCjk))
      cps += std::u32string{U' ', c, U' '};
    else
      cps += c;
  }
  std::vector<std::string> words;
  std::u32string token, word;
  auto flush_word = [&] {
    if (!word.empty()) words.push_back(to_utf8(word));
    word.clear();
  };
  auto finish_token = [&] {  // lower() and _run_strip_accents per token, then _run_split_on_punc
    if (token.empty()) return;
    if (options_.lowercase) {
      icu::UnicodeString s = icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(token.data()),
                                                           static_cast<int32_t>(token.size()));
      s.toLower(icu::Locale::getRoot());  // full mapping with final sigma, as Python's str.lower()
      token.clear();
      for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) token += static_cast<char32_t>(s.char32At(i));
    }
    if (options_.strip_accents) {
      nfd_in_place(token, false);
      std::u32string kept;
      for (char32_t c : token)
        if (!(flags_[c] & kBertMn)) kept += c;
      token.swap(kept);
    }
    for (char32_t c : token) {
      if (flags_[c] & kBertSpace) {  // whitespace_tokenize(" ".join(...)) splits again
        flush_word();
      } else if (flags_[c] & kBertPunct) {
        flush_word();
        word = c;
        flush_word();
      } else {
        word += c;
      }
    }
    flush_word();
    token.clear();
  };
  for (char32_t c : cps) {  // whitespace_tokenize
    if (flags_[c] & kBertSpace)
      finish_token();
    else
      token += c;
  }
  finish_token();
  return words;
}

}  // namespace pretrain
