#include "datagen/dedup/shingles.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/hash.h"
#include "common/utf8.h"
#include "tokenizer/bert_chars.h"

namespace pretrain {

namespace {

// datatrove's PUNCTUATION string, as code points (datatrove/utils/text.py): the printable ASCII
// punctuation, C0 controls but \t and \n, DEL and the C1 controls, and these.
constexpr char32_t kPunctuationAbove127[] = {
    0xAB,   0xB4,   0xBB,   0x2013, 0x2014, 0x2019, 0x201C, 0x201D, 0x201E, 0x2026, 0x2236, 0x2501,
    0x25BA, 0x3001, 0x3002, 0x3008, 0x3009, 0x300A, 0x300B, 0x300C, 0x300D, 0x3010, 0x3011, 0xFF01,
    0xFF05, 0xFF08, 0xFF09, 0xFF0C, 0xFF0E, 0xFF11, 0xFF1A, 0xFF1B, 0xFF1F, 0xFF5E};

bool is_punctuation(char32_t c) {
  if (c < 9 || c == 11 || c == 12 || (c >= 13 && c < 32) || (c >= 127 && c < 160)) return true;
  if (c < 127) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return std::find(std::begin(kPunctuationAbove127), std::end(kPunctuationAbove127), c) !=
         std::end(kPunctuationAbove127);
}

// Python's str.isspace (and so re's \s on str): category Zs or bidirectional class WS, B or S.
bool is_python_space(char32_t c) {
  if (u_charType(static_cast<UChar32>(c)) == U_SPACE_SEPARATOR) return true;
  UCharDirection d = u_charDirection(static_cast<UChar32>(c));
  return d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR || d == U_SEGMENT_SEPARATOR;
}

// The separators the number pattern allows between two runs of digits.
bool is_decimal_separator(char32_t c) {
  return c == '.' || c == ',' || c == 0x060C || c == 0x066B || c == 0x2396 || c == 0x2397 || c == 0x2398;
}

// What one code point becomes: a digit (numbers are handled as a whole), or `bytes`: nothing, a
// space, or the lowercased, decomposed characters without their nonspacing marks.
struct CharMapping {
  static constexpr size_t kMaxBytes = 22;
  bool digit = false;
  bool separator = false;
  uint8_t size = 0;
  char bytes[kMaxBytes];
};

CharMapping map_char(char32_t c) {
  CharMapping m;
  m.digit = u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
  m.separator = is_decimal_separator(c);
  std::string out;
  char32_t lower[2];
  int n = bert_lowercase(c, lower);
  for (int i = 0; i < n; ++i) {
    char32_t l = lower[i];
    if (is_punctuation(l) || is_python_space(l)) {
      out.push_back(' ');
      continue;
    }
    UErrorCode status = U_ZERO_ERROR;
    icu::UnicodeString decomposed = bert_nfd().normalize(icu::UnicodeString(static_cast<UChar32>(l)), status);
    if (U_FAILURE(status)) decomposed = icu::UnicodeString(static_cast<UChar32>(l));
    for (int32_t k = 0; k < decomposed.length();) {
      UChar32 d = decomposed.char32At(k);
      k += U16_LENGTH(d);
      if (u_charType(d) != U_NON_SPACING_MARK) append_utf8(static_cast<char32_t>(d), out);
    }
  }
  // No code point maps to more than a few characters (the longest are 3 jamo of a Hangul syllable).
  m.size = static_cast<uint8_t>(std::min(out.size(), CharMapping::kMaxBytes));
  std::memcpy(m.bytes, out.data(), m.size);
  return m;
}

// Mappings built a page of 256 code points at a time when first looked up (as bert_chars.h does:
// text touches a few pages, and ICU's answers for all 1.1M code points would cost ~1 s).
class CharMappings {
 public:
  CharMappings() : pages_(std::make_unique<std::atomic<const Page*>[]>(kPages)) {
    for (size_t p = 0; p < kPages; ++p) pages_[p].store(nullptr, std::memory_order_relaxed);
  }
  ~CharMappings() {
    for (size_t p = 0; p < kPages; ++p) delete pages_[p].load(std::memory_order_relaxed);
  }
  const CharMapping& operator[](char32_t c) const {
    const Page* page = pages_[c >> kPageBits].load(std::memory_order_acquire);
    if (!page) [[unlikely]]
      page = build(c >> kPageBits);
    return (*page)[c & (kPageSize - 1)];
  }

 private:
  static constexpr int kPageBits = 8;
  static constexpr size_t kPageSize = size_t{1} << kPageBits;
  static constexpr size_t kPages = 0x110000 >> kPageBits;
  using Page = std::array<CharMapping, kPageSize>;

  const Page* build(size_t index) const {
    std::lock_guard lock(mutex_);
    if (const Page* page = pages_[index].load(std::memory_order_acquire)) return page;
    auto page = std::make_unique<Page>();
    for (size_t i = 0; i < kPageSize; ++i) (*page)[i] = map_char(static_cast<char32_t>((index << kPageBits) | i));
    const Page* built = page.release();
    pages_[index].store(built, std::memory_order_release);
    return built;
  }

  std::unique_ptr<std::atomic<const Page*>[]> pages_;
  mutable std::mutex mutex_;
};

const CharMappings& char_mappings() {
  static const CharMappings mappings;
  return mappings;
}

// Appends text's words: a space byte in `bytes` separates, anything else extends the current word.
class WordWriter {
 public:
  explicit WordWriter(std::string& out) : out_(out) {}
  void put(const char* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (bytes[i] == ' ') {
        space_ = true;
        continue;
      }
      if (space_ && !out_.empty()) out_.push_back(' ');
      space_ = false;
      out_.push_back(bytes[i]);
    }
  }

 private:
  std::string& out_;
  bool space_ = false;
};

struct Decoded {
  char32_t c;
  size_t length;
};

Decoded decode_at(const uint8_t* p, const uint8_t* end) {
  if (*p < 0x80) return {*p, 1};
  Utf8Step step = decode_utf8(p, end);
  return {step.valid ? step.code_point : kReplacementChar, step.length};
}

}  // namespace

void simplify_for_shingles(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  const CharMappings& mappings = char_mappings();
  WordWriter words(out);
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t* end = p + text.size();
  while (p < end) {
    Decoded d = decode_at(p, end);
    const CharMapping* m = &mappings[d.c];
    if (!m->digit) {
      words.put(m->bytes, m->size);
      p += d.length;
      continue;
    }
    // A number: digits, then at most one separator followed by more digits; all of it is "0".
    auto skip_digits = [&](const uint8_t* q) {
      while (q < end) {
        Decoded e = decode_at(q, end);
        if (!mappings[e.c].digit) break;
        q += e.length;
      }
      return q;
    };
    p = skip_digits(p);
    if (p < end) {
      Decoded sep = decode_at(p, end);
      if (mappings[sep.c].separator && p + sep.length < end) {
        Decoded next = decode_at(p + sep.length, end);
        if (mappings[next.c].digit) p = skip_digits(p + sep.length);
      }
    }
    words.put("0", 1);
  }
}

void shingle_hashes(std::string_view simplified, int n, std::vector<uint64_t>& out) {
  out.clear();
  if (n <= 0 || simplified.empty()) return;
  // Words are separated by single spaces: a shingle runs from the start of word w to the space
  // before word w+n (or the end of the text).
  std::vector<size_t> starts;
  starts.push_back(0);
  for (size_t i = simplified.find(' '); i != std::string_view::npos; i = simplified.find(' ', i + 1))
    starts.push_back(i + 1);
  const size_t words = starts.size(), width = static_cast<size_t>(n);
  if (words < width) return;
  out.reserve(words - width + 1);
  for (size_t w = 0; w + width <= words; ++w) {
    size_t end = w + width < words ? starts[w + width] - 1 : simplified.size();
    out.push_back(xxh3_bytes(simplified.data() + starts[w], end - starts[w]));
  }
}

}  // namespace pretrain
