// Character classes for BERT's basic tokenizer, one byte of flags per code point, built from ICU a
// page of 256 code points at a time when first looked up: the whole table took ~30 ms of ICU calls
// at every start-up (half of make-pretraining-shards' fixed cost), and text touches a few pages.
// Two rule sets, because HF's two tokenizers disagree:
//
//   fast (HF tokenizers, Rust): control = Cc, Co, Cs and Cf as of Unicode 8.0 (the
//     unicode_categories crate HF uses is Unicode 8.0: newer Cf characters are kept, newer
//     punctuation is not split off, newer Mn marks survive strip_accents); whitespace = Rust's
//     char::is_whitespace (White_Space); CJK = the fast normalizer's ranges (no U+2B820..2B91F).
//   python (Google's tokenization.py, HF's slow BertTokenizer): control = Cc and Cf; whitespace =
//     ' ', \t, \n, \r and Zs; CJK adds U+2B820..U+2B91F; punctuation and Mn as today's Unicode.
//
// Both: punctuation = ASCII 33–47, 58–64, 91–96, 123–126 or a P* category.
#pragma once
#include <unicode/normalizer2.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace pretrain {

enum BertCharFlag : uint8_t {
  kBertDrop = 1,          // clean_text removes it (also NUL and U+FFFD)
  kBertSpace = 2,         // clean_text turns it into ' '; the pre-tokenizer splits at it
  kBertCjk = 4,           // handle_chinese_chars puts spaces around it
  kBertPunct = 8,         // the pre-tokenizer makes it a word of its own
  kBertMn = 16,           // strip_accents drops it (after NFD)
  kBertNfdInert = 32,     // NFD leaves it alone in any context: no decomposition, combining class 0
  kBertLowerChanges = 64  // full lowercase mapping changes it
};

inline constexpr char32_t kBertCodePoints = 0x110000;

// One rule set's table; any thread may look up (a page is built once, under a lock).
class BertCharFlags {
 public:
  explicit BertCharFlags(bool python_rules);
  // The flags of cp < kBertCodePoints.
  uint8_t operator[](char32_t cp) const {
    const size_t page = cp >> kPageBits;
    if (!ready_[page].load(std::memory_order_acquire)) [[unlikely]]
      build(page);
    return flags_[cp];
  }

 private:
  static constexpr int kPageBits = 8;
  static constexpr size_t kPages = kBertCodePoints >> kPageBits;
  void build(size_t page) const;
  bool python_;
  std::unique_ptr<uint8_t[]> flags_;
  std::unique_ptr<std::atomic<bool>[]> ready_;
};

// The table of a rule set; it lives for the whole process.
const BertCharFlags& bert_char_flags(bool python_rules);

// Rust's char::to_lowercase: the full, context-free lowercase mapping (U+0130 'İ' → "i̇", the only
// unconditional one-to-many mapping; Σ always → σ). Writes 1 or 2 code points, returns the count.
int bert_lowercase(char32_t cp, char32_t out[2]);

// ICU's NFD normalizer, for kBertNfdInert and strip_accents. ICU's own data: it cannot fail once
// linked (aborts if it does).
const icu::Normalizer2& bert_nfd();

}  // namespace pretrain
