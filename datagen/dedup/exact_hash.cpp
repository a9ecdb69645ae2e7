#include "datagen/dedup/exact_hash.h"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <xxhash.h>

#include <algorithm>

#include "common/error.h"
#include "common/utf8.h"

namespace pretrain {

namespace {

bool all_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

const icu::Normalizer2& nfc() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status) || !n) throw Error(cat("ICU: no NFC normalizer: ", u_errorName(status)));
  return *n;
}

std::string case_fold(std::string_view s) {
  std::string out;
  if (all_ascii(s)) {
    out.assign(s);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(s.size()));
  UErrorCode status = U_ZERO_ERROR;
  icu::CaseMap::utf8Fold(0, icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), sink, nullptr, status);
  if (U_FAILURE(status)) throw Error(cat("ICU case folding failed: ", u_errorName(status)));
  return out;
}

std::string to_nfc(std::string_view s) {
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(s.size()));
  UErrorCode status = U_ZERO_ERROR;
  nfc().normalizeUTF8(0, icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), sink, nullptr, status);
  if (U_FAILURE(status)) throw Error(cat("ICU NFC normalization failed: ", u_errorName(status)));
  return out;
}

bool is_white_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

std::string fold_white_space(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* end = p + s.size();
  while (p < end) {
    Utf8Step step = *p < 0x80 ? Utf8Step{*p, 1, true} : decode_utf8(p, end);
    if (step.valid && is_white_space(step.code_point)) {
      space = true;
    } else {
      if (space && !out.empty()) out.push_back(' ');
      space = false;
      out.append(reinterpret_cast<const char*>(p), step.length);
    }
    p += step.length;
  }
  return out;
}

}  // namespace

std::string normalize_for_exact(std::string_view text, const ExactOptions& options) {
  std::string s(text);
  if (options.fold_case) s = case_fold(s);
  if (options.nfc && !all_ascii(s)) {
    UErrorCode status = U_ZERO_ERROR;
    bool normalized = nfc().isNormalizedUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), status);
    if (U_FAILURE(status) || !normalized) s = to_nfc(s);
  }
  if (options.fold_whitespace) s = fold_white_space(s);
  return s;
}

Hash128 xxh3_128(std::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.low64, h.high64};
}

Hash128 exact_hash(std::string_view text, const ExactOptions& options) {
  if (!options.fold_case && !options.nfc && !options.fold_whitespace) return xxh3_128(text);
  return xxh3_128(normalize_for_exact(text, options));
}

}  // namespace pretrain
