#include "tokenizer/sentences.h"

#include <unicode/brkiter.h>
#include <unicode/filteredbrk.h>
#include <unicode/locid.h>
#include <unicode/utext.h>

#include <climits>

#include "common/error.h"

namespace pretrain {

struct SentenceSplitter::Icu {
  std::unique_ptr<icu::BreakIterator> iterator;
  UText* text = nullptr;  // reopened on each line without allocating
  ~Icu() { utext_close(text); }
};

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

void append_sentence(std::string_view sentence, std::string& out, size_t& count) {
  sentence = trimmed(sentence);
  if (sentence.empty()) return;
  out.append(sentence);
  out.push_back('\n');
  ++count;
}

// Titles common in English Wikipedia that CLDR's English suppression list (what "ss=standard"
// loads) leaves out, so that "Dr. Smith" or "St. Louis" would end a sentence; ICU has Mr., Mrs.,
// Ms., Prof., Lt., Col., Capt., Rev., Mt. and the like already.
constexpr const char* kEnglishExtraAbbreviations[] = {"Dr.", "Drs.", "Jr.", "Sr.", "St.", "Gen.", "Gov.",
                                                      "Sen.", "Fr.", "Mx.", "Messrs.", "Mmes."};

}  // namespace

SentenceSplitter::SentenceSplitter(const std::string& lang) : icu_(std::make_unique<Icu>()) {
  UErrorCode status = U_ZERO_ERROR;
  // Wikipedia's "simple" (Simple English) is no language tag ICU knows.
  std::string tag = lang.empty() || lang == "simple" ? "en" : lang;
  icu::Locale locale = icu::Locale::forLanguageTag(tag, status);
  if (U_FAILURE(status) || locale.isBogus() || std::string(locale.getLanguage()).empty()) {
    status = U_ZERO_ERROR;
    locale = icu::Locale("en");
  }
  icu::Locale named = locale;
  named.setKeywordValue("ss", "standard", status);
  locale_ = named.getName();
  std::unique_ptr<icu::BreakIterator> rules(icu::BreakIterator::createSentenceInstance(locale, status));
  if (U_FAILURE(status) || !rules)
    throw Error(cat("ICU cannot split sentences for locale '", locale_, "': ", u_errorName(status)));
  // What "ss=standard" does (the locale's abbreviation filter around the rule-based iterator),
  // done by hand so that English can have a few more abbreviations. Languages without a list in
  // ICU's data (el, ja, …) have nothing to suppress: the rules alone serve them.
  UErrorCode filter_status = U_ZERO_ERROR;
  std::unique_ptr<icu::FilteredBreakIteratorBuilder> filter(
      icu::FilteredBreakIteratorBuilder::createInstance(locale, filter_status));
  if (U_FAILURE(filter_status) || !filter) {
    icu_->iterator = std::move(rules);
    return;
  }
  if (std::string(locale.getLanguage()) == "en")
    for (const char* abbreviation : kEnglishExtraAbbreviations)
      filter->suppressBreakAfter(icu::UnicodeString::fromUTF8(abbreviation), filter_status);
  icu_->iterator.reset(filter->wrapIteratorWithFilter(rules.release(), filter_status));
  if (U_FAILURE(filter_status) || !icu_->iterator)
    throw Error(cat("ICU cannot filter sentence breaks for locale '", locale_, "': ", u_errorName(filter_status)));
}

SentenceSplitter::SentenceSplitter(const SentenceSplitter& other)
    : locale_(other.locale_), icu_(std::make_unique<Icu>()) {
  icu_->iterator.reset(other.icu_->iterator->clone());
  if (!icu_->iterator) throw Error(cat("ICU cannot clone the sentence iterator for ", locale_));
}

SentenceSplitter::~SentenceSplitter() = default;

size_t SentenceSplitter::append_lines(std::string_view text, std::string& out) {
  size_t count = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (trimmed(line).empty()) continue;
    if (line.size() > static_cast<size_t>(INT32_MAX)) {  // beyond ICU's int32 offsets: keep whole
      append_sentence(line, out, count);
      continue;
    }
    UErrorCode status = U_ZERO_ERROR;
    icu_->text = utext_openUTF8(icu_->text, line.data(), static_cast<int64_t>(line.size()), &status);
    icu_->iterator->setText(icu_->text, status);
    if (U_FAILURE(status)) throw Error(cat("ICU cannot take a line of text: ", u_errorName(status)));
    // UTF-8 UText: the iterator's positions are byte offsets into `line`.
    int32_t start = icu_->iterator->first();
    for (int32_t end = icu_->iterator->next(); end != icu::BreakIterator::DONE;
         start = end, end = icu_->iterator->next())
      append_sentence(line.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)), out, count);
  }
  return count;
}

std::vector<std::string> SentenceSplitter::split(std::string_view text) {
  std::string lines;
  append_lines(text, lines);
  std::vector<std::string> sentences;
  std::string_view rest = lines;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    sentences.emplace_back(rest.substr(0, eol));
    rest.remove_prefix(eol + 1);
  }
  return sentences;
}

}  // namespace pretrain
