// WordPiece (BERT) as HF's BertTokenizerFast builds it:
//
//   BertNormalizer → BertPreTokenizer   bert_pre_tokenizer.h (one fused pass, plus a reference)
//   WordPiece model                     greedy longest-match-first, "##" continuations, [UNK]
//   BertProcessing post-processor       [CLS] a [SEP] / [CLS] a [SEP] b [SEP]
//
// Special tokens written in the text ([CLS], [MASK], …, and a tokenizer.json's added tokens) are
// cut out of the raw text first and kept whole (added_vocabulary.h): "[MASK]" is one token,
// "[mask]" is not, even when lowercasing.
#include "tokenizer/wordpiece.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "common/error.h"
#include "common/file.h"
#include "common/utf8.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bert_pre_tokenizer.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer_json.h"

namespace pretrain {
namespace {

// What WordPiece takes of HF's added-token flags: single_word, and lstrip/rstrip ignored. Those
// only move whitespace between a match and the text beside it, and BertPreTokenizer drops
// whitespace, so the ids are the same either way.
constexpr AddedTokenFlags kWordPieceAddedFlags{.single_word = true, .ignore_strip = true};

struct WordPieceConfig {
  std::string source;                 // for messages
  std::vector<std::string> tokens;    // id → token ("" for ids the vocabulary skips)
  std::string unk_token = "[UNK]";
  std::string prefix = "##";          // continuing_subword_prefix
  int max_chars = 100;                // max_input_chars_per_word
  BertNormalizerOptions normalizer;
  AddedVocabulary added;
};

// Reused per thread so that encoding allocates nothing once warm.
struct Scratch {
  std::string repaired;
  BertWords words;
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  explicit WordPieceTokenizer(WordPieceConfig config)
      : config_(std::move(config)),
        pre_tokenizer_(config_.normalizer),
        vocab_(config_.tokens, 0),
        continuation_(config_.tokens, config_.prefix.size()) {
    const auto& tokens = config_.tokens;
    for (size_t id = 0; id < tokens.size(); ++id) {
      std::string_view t = tokens[id];
      if (t.empty()) continue;
      auto tid = static_cast<TokenId>(id);
      vocab_.insert(t, tid);  // a duplicate's later id wins, as in HF's load_vocab
      max_initial_bytes_ = std::max(max_initial_bytes_, t.size());
      if (!config_.prefix.empty() && t.size() > config_.prefix.size() && t.starts_with(config_.prefix)) {
        continuation_.insert(t.substr(config_.prefix.size()), tid);
        max_continuation_bytes_ = std::max(max_continuation_bytes_, t.size() - config_.prefix.size());
      }
    }
    unk_id_ = vocab_.find(config_.unk_token);
    if (unk_id_ < 0)
      throw Error(Where{config_.source}, cat("the vocabulary has no unknown token \"", config_.unk_token, "\""));
    for (const char* role : {"pad", "unk", "cls", "sep", "mask"}) {
      std::string name = std::string(role) == "unk" ? config_.unk_token : cat("[", upper(role), "]");
      TokenId id = vocab_.find(name);
      if (id >= 0) special_ids_[role] = id;
    }
    for (const AddedToken& a : config_.added.tokens())
      if (a.special) special_set_.push_back(a.id);
  }

  std::string_view kind() const override { return "wordpiece"; }
  TokenizerCasing casing() const override {
    return {.lowercase = config_.normalizer.lowercase, .strip_accents = config_.normalizer.strip_accents};
  }

  void encode_into(std::string_view text, std::vector<TokenId>& ids) const override {
    thread_local Scratch scratch;
    if (!is_valid_utf8(text)) {
      scratch.repaired.clear();
      append_repaired_utf8(text, scratch.repaired);
      text = scratch.repaired;
    }
    // Added tokens first, on the raw text; the pieces between go through the pipeline.
    config_.added.split(text, [&](std::string_view piece, const AddedToken* added) {
      if (added)
        ids.push_back(added->id);
      else
        encode_plain(piece, scratch.words, ids);
    });
  }

  void tokenize_into(std::string_view text, std::vector<std::string>& tokens) const override {
    std::vector<TokenId> ids;
    encode_into(text, ids);
    for (TokenId id : ids) tokens.push_back(config_.tokens[static_cast<size_t>(id)]);
  }

  // BertProcessing: [CLS] a [SEP], or [CLS] a [SEP] b [SEP].
  std::vector<TokenId> post_process(std::span<const TokenId> a, const std::span<const TokenId>* b) const override {
    auto cls = special_ids_.find("cls"), sep = special_ids_.find("sep");
    if (cls == special_ids_.end() || sep == special_ids_.end())
      throw UsageError(Where{config_.source}, "the vocabulary has no [CLS] or no [SEP] token to add");
    std::vector<TokenId> out;
    out.reserve(a.size() + (b ? b->size() : 0) + 3);
    out.push_back(cls->second);
    out.insert(out.end(), a.begin(), a.end());
    out.push_back(sep->second);
    if (b) {
      out.insert(out.end(), b->begin(), b->end());
      out.push_back(sep->second);
    }
    return out;
  }

  // HF's WordPiece decoder (join, "##" glues, per-token cleanup), then transformers'
  // clean_up_tokenization over the whole text (BERT's clean_up_tokenization_spaces=True).
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::string out;
    bool first = true;
    for (TokenId id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= config_.tokens.size())
        throw UsageError(Where{config_.source}, cat("token id ", id, " is outside the vocabulary (size ",
                                                    config_.tokens.size(), ")"));
      if (skip_special_tokens && is_special_id(id)) continue;
      // A "##" piece glues to the previous token; any other token after the first gets a space
      // (built by appending: GCC 12's -O3 -Wrestrict misfires on std::string::insert(0, …)).
      const std::string& stored = config_.tokens[static_cast<size_t>(id)];
      std::string token;
      if (first) token = stored;
      else if (!config_.prefix.empty() && stored.starts_with(config_.prefix)) token = stored.substr(config_.prefix.size());
      else token.append(" ").append(stored);
      first = false;
      out += cleanup(std::move(token), true);
    }
    return cleanup(std::move(out), false);
  }

  std::optional<TokenId> token_to_id(std::string_view token) const override {
    TokenId id = vocab_.find(token);
    if (id >= 0) return id;
    if (const AddedToken* a = config_.added.find(token)) return a->id;
    return std::nullopt;
  }

  std::string id_to_token(TokenId id) const override {
    if (id < 0 || static_cast<size_t>(id) >= config_.tokens.size())
      throw UsageError(Where{config_.source},
                       cat("token id ", id, " is outside the vocabulary (size ", config_.tokens.size(), ")"));
    return config_.tokens[static_cast<size_t>(id)];
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(config_.tokens.size()); }
  const std::map<std::string, TokenId>& special_ids() const override { return special_ids_; }

 private:
  static std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(c - 'a' + 'A');
    return s;
  }

  bool is_special_id(TokenId id) const {
    for (const auto& [role, s] : special_ids_)
      if (s == id) return true;
    return std::find(special_set_.begin(), special_set_.end(), id) != special_set_.end();
  }

  void encode_plain(std::string_view text, BertWords& words, std::vector<TokenId>& ids) const {
    if (text.empty()) return;
    words.clear();
    pre_tokenizer_.run(text, words);
    for (size_t w = 0; w < words.size(); ++w) word_piece(words[w], words.words[w].chars, ids);
  }

  // The WordPiece model: the whole word if the vocabulary has it, else greedy longest-match-first
  // from the left, continuations looked up without their "##" (no string is built per lookup);
  // [UNK] for the whole word when a piece has no match or the word is too long.
  void word_piece(std::string_view word, uint32_t chars, std::vector<TokenId>& ids) const {
    if (chars > static_cast<uint32_t>(config_.max_chars)) {
      ids.push_back(unk_id_);
      return;
    }
    TokenId whole = vocab_.find(word);
    if (whole >= 0) {
      ids.push_back(whole);
      return;
    }
    const size_t mark = ids.size();
    size_t start = 0;
    while (start < word.size()) {
      const bool initial = start == 0;
      const TokenTable& table = initial || config_.prefix.empty() ? vocab_ : continuation_;
      size_t end = std::min(word.size(), start + (initial ? max_initial_bytes_ : max_continuation_bytes_));
      TokenId found = -1;
      for (;; --end) {
        while (end > start && end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
        if (end <= start) break;
        found = table.find(word.substr(start, end - start));
        if (found >= 0) break;
      }
      if (found < 0) {
        ids.resize(mark);
        ids.push_back(unk_id_);
        return;
      }
      ids.push_back(found);
      start = end;
    }
  }

  static void replace_all(std::string& s, std::string_view from, std::string_view to) {
    for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  }
  // The decoder's per-token cleanup has " do not" → " don't"; transformers' whole-text one does not.
  static std::string cleanup(std::string s, bool decoder) {
    if (s.find_first_of(" ") == std::string::npos) return s;
    replace_all(s, " .", ".");
    replace_all(s, " ?", "?");
    replace_all(s, " !", "!");
    replace_all(s, " ,", ",");
    replace_all(s, " ' ", "'");
    replace_all(s, " n't", "n't");
    replace_all(s, " 'm", "'m");
    if (decoder) replace_all(s, " do not", " don't");
    replace_all(s, " 's", "'s");
    replace_all(s, " 've", "'ve");
    replace_all(s, " 're", "'re");
    return s;
  }

  WordPieceConfig config_;
  BertPreTokenizer pre_tokenizer_;
  TokenTable vocab_;         // every token
  TokenTable continuation_;  // "##" tokens, keyed without the "##"
  size_t max_initial_bytes_ = 0, max_continuation_bytes_ = 0;
  TokenId unk_id_ = -1;
  std::map<std::string, TokenId> special_ids_;
  std::vector<TokenId> special_set_;  // added tokens marked special
};

// True when lowercasing would change some entry: a cased vocabulary. Bracketed entries ([UNK],
// [unused0], <S>) are markup, not text.
bool vocab_has_uppercase(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    if (t.size() >= 2 && ((t.front() == '[' && t.back() == ']') || (t.front() == '<' && t.back() == '>'))) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    const auto* end = p + t.size();
    while (p < end) {
      Utf8Step step = decode_utf8(p, end);
      p += step.length;
      if (step.valid && u_hasBinaryProperty(static_cast<UChar32>(step.code_point), UCHAR_CHANGES_WHEN_LOWERCASED))
        return true;
    }
  }
  return false;
}

// The options override what the vocabulary or tokenizer.json says.
void apply_options(WordPieceConfig& config, const TokenizerOptions& options, std::optional<bool> json_lowercase,
                   std::optional<bool> json_strip_accents) {
  auto& n = config.normalizer;
  n.lowercase = options.lowercase ? *options.lowercase
                : json_lowercase  ? *json_lowercase
                                  : !vocab_has_uppercase(config.tokens);
  std::optional<bool> strip = options.strip_accents ? options.strip_accents : json_strip_accents;
  n.strip_accents = strip ? *strip : n.lowercase;
  n.python_compat = options.python_compat;
  if (!options.split_cjk) n.handle_chinese_chars = false;
}

}  // namespace

std::unique_ptr<Tokenizer> make_wordpiece_tokenizer(const std::string& vocab_path, const TokenizerOptions& options) {
  WordPieceConfig config;
  config.source = vocab_path;
  std::string text = read_file(vocab_path);
  if (text.empty()) throw Error(Where{vocab_path}, "empty vocabulary (expected one token per line)");
  // One token per line; id = line index. Python's universal newlines (HF's load_vocab opens the
  // file as text) end a line at \n, \r\n or \r, and rstrip("\n") keeps everything else.
  size_t line_start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n' && text[i] != '\r') continue;
    if (i == text.size() && line_start == text.size()) break;  // no token after the last newline
    std::string token = text.substr(line_start, i - line_start);
    const auto line = static_cast<int64_t>(config.tokens.size() + 1);
    if (!is_valid_utf8(token))
      throw Error(Where::at_line(vocab_path, line), "the vocabulary entry is not valid UTF-8");
    config.tokens.push_back(std::move(token));
    if (i + 1 < text.size() && text[i] == '\r' && text[i + 1] == '\n') ++i;
    line_start = i + 1;
  }
  config.max_chars = options.max_input_chars_per_word;
  std::vector<AddedToken> specials;
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    auto it = std::find(config.tokens.rbegin(), config.tokens.rend(), s);  // the id HF's dict keeps
    if (it != config.tokens.rend())
      specials.push_back({.content = s, .id = static_cast<TokenId>(config.tokens.rend() - it - 1), .special = true});
  }
  config.added = AddedVocabulary(std::move(specials), kWordPieceAddedFlags, vocab_path);
  apply_options(config, options, std::nullopt, std::nullopt);
  return std::make_unique<WordPieceTokenizer>(std::move(config));
}

std::unique_ptr<Tokenizer> make_wordpiece_tokenizer_from_hf(const TokenizerJson& j, const TokenizerOptions& options) {
  const std::string& source = j.source;
  if (j.model_type != "WordPiece")
    throw Error(Where{source}, cat("expected a WordPiece model in tokenizer.json, found \"", j.model_type, "\""));
  WordPieceConfig config;
  config.source = source;
  for (const auto& [token, id] : j.vocab) {  // a duplicate id: the later entry (key order) wins
    if (static_cast<size_t>(id) >= config.tokens.size()) config.tokens.resize(static_cast<size_t>(id) + 1);
    config.tokens[static_cast<size_t>(id)] = token;
  }
  if (config.tokens.empty()) throw Error(Where{source}, "the WordPiece vocab is empty");
  config.unk_token = j.unk_token.value_or("[UNK]");
  config.prefix = j.continuing_subword_prefix.value_or("##");
  config.max_chars = options.max_input_chars_per_word != 100 ? options.max_input_chars_per_word
                                                              : j.max_input_chars_per_word.value_or(100);
  std::optional<bool> lowercase, strip_accents;
  if (j.normalizer) {
    if (j.normalizer->type != "BertNormalizer")
      throw Error(Where{source},
                  cat("expected a BertNormalizer for a WordPiece model, found \"", j.normalizer->type, "\""));
    config.normalizer.clean_text = j.normalizer->clean_text;
    config.normalizer.handle_chinese_chars = j.normalizer->handle_chinese_chars;
    lowercase = j.normalizer->lowercase;
    strip_accents = j.normalizer->strip_accents;
  } else {  // no normalizer: nothing changes the text (the pre-tokenizer still splits)
    config.normalizer.clean_text = config.normalizer.handle_chinese_chars = false;
    lowercase = strip_accents = false;
  }
  // Our pre-tokenizer is BERT's; another one would split differently, so refuse it.
  if (j.pre_tokenizer && j.pre_tokenizer->type != "BertPreTokenizer")
    throw Error(Where{source},
                cat("expected a BertPreTokenizer for a WordPiece model, found \"", j.pre_tokenizer->type, "\""));
  // An added token's id may lie past the model's vocabulary, or name an id it skips.
  for (const AddedToken& t : j.added_tokens) {
    if (static_cast<size_t>(t.id) >= config.tokens.size()) config.tokens.resize(static_cast<size_t>(t.id) + 1);
    if (config.tokens[static_cast<size_t>(t.id)].empty()) config.tokens[static_cast<size_t>(t.id)] = t.content;
  }
  config.added = AddedVocabulary(j.added_tokens, kWordPieceAddedFlags, source);
  apply_options(config, options, lowercase, strip_accents);
  return std::make_unique<WordPieceTokenizer>(std::move(config));
}

std::unique_ptr<Tokenizer> make_wordpiece_tokenizer_from_hf(const nlohmann::json& tokenizer_json,
                                                            const std::string& source, const TokenizerOptions& options) {
  return make_wordpiece_tokenizer_from_hf(parse_tokenizer_json(tokenizer_json, source), options);
}

}  // namespace pretrain
