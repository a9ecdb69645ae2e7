// pretrain_tokenizer: one Tokenizer interface over WordPiece (BERT), GPT-2 byte-level BPE and
// SentencePiece, shaped like HF tokenizers' pipeline:
//
//   added tokens → normalizer → pre-tokenizer → model → post-processor
//
// WordPiece and BPE cut the added tokens out of the raw text with one shared module
// (added_vocabulary.h) and read HF's tokenizer.json with one reader (tokenizer_json.h); each lays
// out the other steps in its own .cpp, in that order (WordPiece fuses normalizer and
// pre-tokenizer into one pass, bert_pre_tokenizer.h). SentencePiece's library runs the whole
// pipeline itself. This header is what users and the other stages see; wordpiece.h, bpe.h and
// sentencepiece.h only make tokenizers.
//
// Text in is UTF-8; invalid bytes are read as U+FFFD (common/utf8.h), never undefined behaviour.
// Every const member is thread-safe, so one tokenizer serves all encode_batch workers.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/manifest.h"

namespace pretrain {

using TokenId = int32_t;
struct TokenizerOptions;
// Ids at or past this in a vocabulary's JSON (encoder.json, tokenizer.json) are refused: a file
// cannot make us allocate gigabytes.
constexpr int64_t kMaxTokenId = 1 << 24;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "wordpiece" | "bpe" | "sentencepiece" (the manifest's TokenizerInfo::kind).
  virtual std::string_view kind() const = 0;

  // Appends the model's ids for text to ids: added tokens, normalizer, pre-tokenizer and model, no
  // special tokens added (HF's add_special_tokens=False, spm_encode's default). Added tokens
  // written in the text ("[MASK]", "<|endoftext|>") are kept whole (WordPiece, BPE).
  virtual void encode_into(std::string_view text, std::vector<TokenId>& ids) const = 0;

  // The same tokens as strings, as the vocabulary spells them ("##ing", "Ġthe", "▁the").
  virtual void tokenize_into(std::string_view text, std::vector<std::string>& tokens) const;

  // Post-processor: wraps one sequence (b == nullptr) or a pair in the model's special tokens,
  // as HF's post-processor does ([CLS] a [SEP] b [SEP] for BERT; nothing for GPT-2 and
  // SentencePiece). Returns the result; a and b are unchanged.
  virtual std::vector<TokenId> post_process(std::span<const TokenId> a,
                                            const std::span<const TokenId>* b = nullptr) const;

  // ids back to text. skip_special_tokens drops the special tokens (HF's skip_special_tokens;
  // off, the default here as in HF and `tokenize --decode`, shows them).
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const = 0;

  virtual std::optional<TokenId> token_to_id(std::string_view token) const = 0;
  // The vocabulary entry for id; throws UsageError when id is outside [0, vocab_size()).
  virtual std::string id_to_token(TokenId id) const = 0;
  virtual int64_t vocab_size() const = 0;

  // Ids of the special tokens this vocabulary has, by role: "pad", "unk", "cls", "sep", "mask"
  // (WordPiece: [PAD], the unk token, [CLS], [SEP], [MASK]), "eod" (BPE: the added token
  // <|endoftext|>), "unk", "bos", "eos", "pad" (SentencePiece, where defined). Roles the
  // vocabulary lacks are absent. decode's skip_special_tokens also drops the added tokens a
  // tokenizer.json marks special, which have no role.
  // A reference to the tokenizer's own map: is_special() and decode loops call it per token.
  virtual const std::map<std::string, TokenId>& special_ids() const = 0;
  bool is_special(TokenId id) const;

  // Conveniences over the virtuals above.
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = false) const;
  std::vector<std::string> tokenize(std::string_view text) const;
  // Encodes every text on oneTBB workers (capped by --threads); result i belongs to texts[i].
  std::vector<std::vector<TokenId>> encode_batch(std::span<const std::string_view> texts,
                                                 bool add_special_tokens = false) const;
  std::vector<std::vector<TokenId>> encode_batch(std::span<const std::string> texts,
                                                 bool add_special_tokens = false) const;

  // Whether it lowercases and strips accents before the model (HF's do_lower_case,
  // strip_accents). WordPiece and BPE say what their normalizer does; the default finds it out by
  // encoding words of the vocabulary (SentencePiece's normalizer is a compiled table):
  // lowercase when a plain word uppercased still encodes as the word, strip_accents likewise
  // with an 'e' accented, unset when the vocabulary has no such word.
  virtual TokenizerCasing casing() const;

  // What the manifest records (TokenizerInfo): kind, vocab hash (xxh3 of the files it was loaded
  // from), size, special ids and tokens, and — for a tokenizer load_tokenizer made — the record:
  // its files, the options it was given and its casing.
  TokenizerInfo info() const;
  // The file(s) it was loaded from ("vocab.json + merges.txt"), for messages.
  const std::string& source() const { return source_; }
  // load_tokenizer's: the files read (in order, each hashed) and the options given.
  void set_source(std::vector<TokenizerFile> files, const TokenizerOptions& options);

 private:
  std::string source_;
  TokenizerInfo loaded_;  // vocab_hash and the record's files, options and casing
};

struct TokenizerOptions {
  // WordPiece. Set, these override a tokenizer.json's BertNormalizer. lowercase unset: the
  // tokenizer.json's setting, else lowercase iff no vocabulary entry outside [brackets] or
  // <angles> has an uppercase letter (bert-base-uncased: yes; bert-base-cased: no).
  // strip_accents unset: the tokenizer.json's setting, else follow lowercase, as HF.
  std::optional<bool> lowercase;
  std::optional<bool> strip_accents;
  bool split_cjk = true;  // spaces around CJK ideographs (tokenize_chinese_chars); false turns it off
  // HF's default; Google's code uses 200. Left at 100, a tokenizer.json's own value applies.
  int max_input_chars_per_word = 100;
  // Follow HF's slow (Python) BertTokenizer / Google's tokenization.py where it differs from the
  // fast (Rust) one; the differences are documented in tests/tokenizer/bert_pre_tokenizer_test.cpp.
  bool python_compat = false;
  // BPE: words cached per tokenizer (0 disables the cache).
  size_t bpe_cache_words = 1 << 16;
};

// The options that change ids (all but bpe_cache_words), as the manifest's tokenizer record keeps
// them, and back: absent fields take the defaults, a field of the wrong type is an Error naming
// `source` and the field.
nlohmann::json tokenizer_options_to_json(const TokenizerOptions& options);
TokenizerOptions tokenizer_options_from_json(const nlohmann::json& options, const std::string& source);

// Recognises, by name and content:
//   vocab.txt (any other file, one token per line)      → WordPiece
//   encoder.json + vocab.bpe, vocab.json + merges.txt    → byte-level BPE (either file may be given;
//                                                           the other is found beside it, also with
//                                                           a shared prefix: gpt2-encoder.json +
//                                                           gpt2-vocab.bpe)
//   *.model (SentencePiece ModelProto)                   → SentencePiece
//   any other *.json: HF tokenizer.json whose model is   → WordPiece or byte-level BPE
//     WordPiece or BPE (tokenizer_json.h)
//   a directory                                          → the first of tokenizer.json, vocab.txt,
//                                                           encoder.json, vocab.json, *.model in it
// A missing or malformed file is an Error naming the file and line, byte offset or entry.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, const TokenizerOptions& options = {});

}  // namespace pretrain
