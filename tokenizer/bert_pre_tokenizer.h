// The first two steps of BERT's pipeline, as HF names them:
//
//   BertNormalizer   clean text (drop NUL, U+FFFD and control characters; whitespace → ' '),
//                    spaces around CJK ideographs, strip accents (NFD, drop Mn), lowercase
//   BertPreTokenizer split at whitespace, every punctuation character a word of its own
//
// run() fuses both into one pass over the bytes (an ASCII table fast path, a general path per run
// of non-ASCII characters) and writes words into a reusable buffer: no allocation per word.
// reference() does the same steps one after another on whole strings, the plain way; the tests
// check that both give the same words. With python_compat, run() is reference() following
// Google's tokenization.py: lowercase (Python's str.lower, final sigma included) per
// whitespace-separated token before stripping accents, and Google's character classes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bert_chars.h"

namespace pretrain {

struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;
  bool lowercase = true;
  bool python_compat = false;
};

// Words laid end to end in one string; chars is the word's length in code points (for
// max_input_chars_per_word).
struct BertWords {
  struct Word {
    uint32_t offset, size, chars;
  };
  std::string bytes;
  std::vector<Word> words;
  std::u32string scratch;  // the general path's code points
  void clear() {
    bytes.clear();
    words.clear();
  }
  std::string_view operator[](size_t i) const { return std::string_view(bytes).substr(words[i].offset, words[i].size); }
  size_t size() const { return words.size(); }
};

class BertPreTokenizer {
 public:
  explicit BertPreTokenizer(const BertNormalizerOptions& options);

  // Appends the words of text (valid UTF-8) to out.
  void run(std::string_view text, BertWords& out) const;
  // The same words, the straightforward way (the specification the fast path is tested against).
  std::vector<std::string> reference(std::string_view text) const;
  // BertNormalizer alone, for tests: the normalized text (fast rules).
  std::u32string normalize_reference(std::u32string text) const;

  const BertNormalizerOptions& options() const { return options_; }

 private:
  enum Ascii : uint8_t { kKeep, kSpace, kPunct, kDrop };
  struct Builder;
  void run_non_ascii(std::string_view run, Builder& b) const;
  std::vector<std::string> python_words(std::string_view text) const;

  BertNormalizerOptions options_;
  const BertCharFlags& flags_;  // bert_char_flags(python_compat)
  Ascii ascii_action_[128];
  char ascii_map_[128];  // lowercased when lowercasing
};

}  // namespace pretrain
