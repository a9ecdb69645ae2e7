// Sentence splitting for Google BERT's input format (one sentence per line, a blank line between
// documents), with ICU's sentence BreakIterator and its abbreviation suppression ("@ss=standard":
// "Mr. Smith went home." stays one sentence) for the dump's language. English also gets a few
// titles CLDR's list lacks (Dr., St., Jr., Gen., …; see sentences.cpp).
//
// A sentence never spans a '\n': each line of clean text (a paragraph, heading or list item) is
// split on its own. Sentences are trimmed of surrounding white space; empty ones are dropped.
//
// ICU break iterators keep per-text state, so a SentenceSplitter is for one thread at a time;
// parallel code holds one per thread (they are cheap to clone from a first one).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

class SentenceSplitter {
 public:
  // `lang`: a BCP-47 / ICU language ("en", "ja", "zh-yue"); "" uses English. Throws Error when
  // ICU cannot make a sentence iterator for it.
  explicit SentenceSplitter(const std::string& lang);
  ~SentenceSplitter();
  SentenceSplitter(const SentenceSplitter& other);  // clones the iterator: for another thread
  SentenceSplitter& operator=(const SentenceSplitter&) = delete;

  // Appends every sentence of `text` (valid UTF-8) to `out`, each followed by '\n'. Returns the
  // number of sentences appended.
  size_t append_lines(std::string_view text, std::string& out);
  std::vector<std::string> split(std::string_view text);

  const std::string& locale() const { return locale_; }  // "en@ss=standard"

 private:
  struct Icu;
  std::string locale_;
  std::unique_ptr<Icu> icu_;
};

}  // namespace pretrain
