// GPT-2 byte-level BPE, as HF's GPT2TokenizerFast and tiktoken's "gpt2" encoding:
//
//   normalizer      none
//   added tokens    "<|endoftext|>" (and a tokenizer.json's added tokens) are cut out of the text
//                   first and kept whole (added_vocabulary.h; tiktoken: allowed_special="all")
//   pre-tokenizer   GPT-2's pattern as a scanner (gpt2_pretokenize.h), each piece's bytes spelled
//                   in the byte alphabet
//   model           merges by rank (bpe_merges.h), behind two word tables (bpe_word_table.h)
//   post-processor  adds nothing
//
// Loading reads encoder.json/vocab.json + vocab.bpe/merges.txt, or an HF tokenizer.json
// (tokenizer_json.h); any malformed entry is an Error naming the file and line (or the JSON entry).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/utf8.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_merges.h"
#include "tokenizer/bpe_word_table.h"
#include "tokenizer/gpt2_pretokenize.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer_json.h"

namespace pretrain {
namespace {

// Words longer than this are merged every time instead of cached (rare, and they would crowd out
// the short ones).
constexpr size_t kMaxCachedWordBytes = 128;

// HF's lstrip/rstrip would move whitespace into or out of the byte-level tokens ("Ġthe") and
// single_word is not checked against HF here: a token asking for any of them is refused.
constexpr AddedTokenFlags kBpeAddedFlags{};

// What a loader hands over: the vocabulary (id → spelling in the byte alphabet), the merges, the
// added tokens and the ByteLevel options.
struct BpeSpec {
  std::string source;
  std::vector<std::string> tokens;   // "" for ids the vocabulary skips
  std::vector<uint8_t> in_alphabet;  // per id: its spelling is all byte-alphabet characters
  TokenTable vocab{{}, 0};           // spelling → id, over `tokens` once they are all read
  std::unique_ptr<BpeMerges> merges;
  AddedVocabulary added;
  bool add_prefix_space = false;
  bool ignore_merges = false;  // HF's option: a word that is a vocabulary entry is that entry
};

// A token's spelling back to the bytes it stands for. A spelling with a character outside the
// byte alphabet (an added token such as "<|endoftext|>" is inside it; others may not be) stands for
// its own UTF-8, as HF's ByteLevel decoder does; in_alphabet says which it was.
std::string spelling_to_bytes(std::string_view spelling, bool& in_alphabet) {
  std::string bytes;
  const auto* p = reinterpret_cast<const uint8_t*>(spelling.data());
  const auto* end = p + spelling.size();
  while (p < end) {
    Utf8Step step = decode_utf8(p, end);
    int b = step.valid ? gpt2::unicode_to_byte(step.code_point) : -1;
    if (b < 0) {
      in_alphabet = false;
      return std::string(spelling);
    }
    bytes.push_back(static_cast<char>(b));
    p += step.length;
  }
  in_alphabet = true;
  return bytes;
}

// The vocabulary (read_vocab_object's checked entries), refusing an id given twice. A spelling
// given twice keeps its later id, as a JSON object's repeated key does.
void add_vocab(BpeSpec& spec, const std::vector<std::pair<std::string, TokenId>>& entries, const Where& where) {
  for (const auto& [token, id] : entries) {
    if (static_cast<size_t>(id) >= spec.tokens.size()) spec.tokens.resize(static_cast<size_t>(id) + 1);
    if (!spec.tokens[id].empty())
      throw Error(where, cat("id ", id, " is given to both \"", spec.tokens[id], "\" and \"", token, "\""));
    spec.tokens[id] = token;
  }
  spec.vocab = TokenTable(spec.tokens, 0);
  for (const auto& [token, id] : entries) spec.vocab.insert(token, id);
}

// The single-byte tokens and the merge table, once the vocabulary is read.
void start_merges(BpeSpec& spec, const Where& where) {
  std::array<TokenId, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    const std::string spelling = gpt2::byte_token(static_cast<uint8_t>(b));
    byte_ids[b] = spec.vocab.find(spelling);
    if (byte_ids[b] < 0)
      throw Error(where, cat("the vocabulary lacks the token \"", spelling, "\" for byte ", b,
                             ": a byte-level BPE vocabulary needs all 256"));
  }
  // Each spelling decoded once, here: the merges keep the bytes, the tokenizer copies them.
  std::vector<std::string> bytes(spec.tokens.size());
  spec.in_alphabet.assign(spec.tokens.size(), 0);
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    bool in_alphabet = false;
    bytes[id] = spelling_to_bytes(spec.tokens[id], in_alphabet);
    spec.in_alphabet[id] = in_alphabet;
  }
  spec.merges = std::make_unique<BpeMerges>(byte_ids, std::move(bytes));
}

// Merge "left right" (spellings) as the next rank; an error names where() when a part or the
// result is not in the vocabulary. `joined` is scratch for left + right.
template <typename WhereFn>
void add_merge(BpeSpec& spec, std::string_view left, std::string_view right, std::string& joined, WhereFn where) {
  auto lookup = [&](std::string_view token, const char* what) {
    TokenId id = spec.vocab.find(token);
    if (id < 0) throw Error(where(), cat("the merge's ", what, " \"", token, "\" is not in the vocabulary"));
    return id;
  };
  TokenId a = lookup(left, "left part");
  TokenId b = lookup(right, "right part");
  joined.assign(left).append(right);
  TokenId m = lookup(joined, "result");
  spec.merges->add(a, b, m);
}

int64_t line_of_offset(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(offset), '\n');
}

// ---------------------------------------------------------------------------------------------

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(BpeSpec spec, const TokenizerOptions& options)
      : source_(std::move(spec.source)),
        tokens_(std::move(spec.tokens)),
        vocab_(std::move(spec.vocab)),
        merges_(std::move(spec.merges)),
        added_(std::move(spec.added)),
        add_prefix_space_(spec.add_prefix_space),
        ignore_merges_(spec.ignore_merges),
        cache_words_(options.bpe_cache_words),
        instance_(next_instance_++),
        whole_words_(SIZE_MAX) {
    merges_->finish();
    vocab_size_ = static_cast<int64_t>(tokens_.size());
    for (const auto& a : added_.tokens()) vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{a.id} + 1);
    id_bytes_ = merges_->token_bytes();
    id_bytes_.resize(static_cast<size_t>(vocab_size_));
    is_added_.assign(static_cast<size_t>(vocab_size_), 0);
    for (const auto& a : added_.tokens()) {
      id_bytes_[a.id] = a.content;
      is_added_[a.id] = a.special ? 2 : 1;
      if (a.content == "<|endoftext|>") special_ids_["eod"] = a.id;
    }
    build_whole_words(spec.in_alphabet);
  }

  std::string_view kind() const override { return "bpe"; }
  // Byte-level BPE has no normalizer: the text's bytes reach the model unchanged.
  TokenizerCasing casing() const override { return {.lowercase = false, .strip_accents = false}; }

  void encode_into(std::string_view text, std::vector<TokenId>& ids) const override {
    std::string repaired;
    if (!is_valid_utf8(text)) {
      append_repaired_utf8(text, repaired);
      text = repaired;
    }
    WordTable* cache = cache_words_ ? &thread_cache() : nullptr;
    added_.split(text, [&](std::string_view segment, const AddedToken* added) {
      if (added)
        ids.push_back(added->id);
      else
        encode_segment(segment, cache, ids);
    });
  }

  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::string bytes;
    for (TokenId id : ids) {
      check_id(id);
      if (skip_special_tokens && is_added_[id] == 2) continue;
      bytes += id_bytes_[id];
    }
    // Arbitrary id sequences can cut a character's bytes apart: each invalid part becomes U+FFFD
    // (HF: String::from_utf8_lossy; Python: errors="replace").
    repair_utf8(bytes);
    return bytes;
  }

  std::optional<TokenId> token_to_id(std::string_view token) const override {
    if (const AddedToken* a = added_.find(token)) return a->id;
    TokenId id = vocab_.find(token);
    if (id < 0) return std::nullopt;
    return id;
  }

  std::string id_to_token(TokenId id) const override {
    check_id(id);
    if (is_added_[id]) return id_bytes_[id];
    return static_cast<size_t>(id) < tokens_.size() ? tokens_[id] : std::string();
  }

  int64_t vocab_size() const override { return vocab_size_; }
  const std::map<std::string, TokenId>& special_ids() const override { return special_ids_; }

  // The model step alone, for the tests.
  std::vector<TokenId> merge_word(std::string_view word, BpeMergeAlgorithm algorithm) const {
    if (word.empty()) return {};
    if (algorithm == BpeMergeAlgorithm::reference) return merges_->reference_merge(word);
    std::vector<TokenId> ids;
    merges_->merge(word, ids, static_cast<BpeMerges::Algorithm>(algorithm));
    return ids;
  }

 private:
  void check_id(TokenId id) const {
    if (id < 0 || id >= vocab_size_)
      throw UsageError(Where{source_}, cat("token id ", id, " is outside the vocabulary (size ", vocab_size_, ")"));
  }

  // Pre-tokenizer then model, for text with no added tokens in it.
  void encode_segment(std::string_view segment, WordTable* cache, std::vector<TokenId>& ids) const {
    std::string prefixed;
    if (add_prefix_space_ && !segment.empty() && segment.front() != ' ') {
      prefixed = " ";
      prefixed += segment;
      segment = prefixed;
    }
    gpt2::pre_tokenize(segment, [&](size_t begin, size_t end) {
      encode_word(segment.substr(begin, end - begin), cache, ids);
    });
  }

  // One pre-token: a single byte, a vocabulary word BPE maps to itself, a cached word, or merges.
  void encode_word(std::string_view word, WordTable* cache, std::vector<TokenId>& ids) const {
    if (word.size() == 1) {
      ids.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
      return;
    }
    const uint64_t hash = word_hash(word);
    if (whole_words_.find(word, hash, ids)) return;
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    if (cacheable && cache && cache->find(word, hash, ids)) return;
    size_t first = ids.size();
    merges_->merge(word, ids);
    if (cacheable && cache) cache->insert(word, hash, ids.data() + first, ids.size() - first);
  }

  // Every vocabulary entry whose bytes BPE merges back into that one entry (with ignore_merges:
  // every entry, by definition). Checking each at load keeps the shortcut exact.
  void build_whole_words(const std::vector<uint8_t>& in_alphabet) {
    for (int b = 0; b < 256; ++b) byte_ids_[b] = merges_->byte_id(static_cast<unsigned char>(b));
    std::vector<TokenId> ids;
    for (size_t id = 0; id < tokens_.size(); ++id) {
      const std::string& bytes = merges_->token_bytes()[id];
      if (!in_alphabet[id] || bytes.size() < 2) continue;
      ids.clear();
      if (ignore_merges_)
        ids.push_back(static_cast<TokenId>(id));
      else
        merges_->merge(bytes, ids);
      if (ids.size() == 1 && ids[0] == static_cast<TokenId>(id)) {
        TokenId tid = ids[0];
        uint64_t h = word_hash(bytes);
        std::vector<TokenId> found;
        if (!whole_words_.find(bytes, h, found)) whole_words_.insert(bytes, h, &tid, 1);
      }
    }
  }

  // This thread's word cache for this tokenizer. A thread keeps caches for its few most recent
  // tokenizers (keyed by a never-reused instance number), so no lock is taken and no cache is
  // shared between threads.
  WordTable& thread_cache() const {
    struct Entry {
      uint64_t instance;
      std::unique_ptr<WordTable> table;
    };
    thread_local std::vector<Entry> caches;  // most recently used first
    if (!caches.empty() && caches.front().instance == instance_) return *caches.front().table;
    auto it = std::find_if(caches.begin(), caches.end(), [&](const Entry& e) { return e.instance == instance_; });
    if (it == caches.end()) {
      if (caches.size() >= 4) caches.pop_back();
      caches.insert(caches.begin(), Entry{instance_, std::make_unique<WordTable>(cache_words_)});
    } else {
      std::rotate(caches.begin(), it, it + 1);
    }
    return *caches.front().table;
  }

  std::string source_;
  std::vector<std::string> tokens_;
  TokenTable vocab_;  // over the elements of tokens_, which moved in with them
  std::unique_ptr<BpeMerges> merges_;
  AddedVocabulary added_;
  bool add_prefix_space_;
  bool ignore_merges_;
  size_t cache_words_;
  uint64_t instance_;
  WordTable whole_words_;
  std::array<TokenId, 256> byte_ids_{};
  int64_t vocab_size_ = 0;
  std::vector<std::string> id_bytes_;  // what each id decodes to
  std::vector<uint8_t> is_added_;      // 0 model token, 1 added token, 2 special added token
  std::map<std::string, TokenId> special_ids_;

  static inline std::atomic<uint64_t> next_instance_{1};
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// encoder.json + vocab.bpe

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const std::string& vocab_path, const std::string& merges_path,
                                              const TokenizerOptions& options) {
  BpeSpec spec;
  spec.source = vocab_path + " + " + merges_path;
  {
    std::string text = read_file(vocab_path);
    auto entries = read_flat_vocab_json(text);
    if (!entries) {  // not the usual shape: the document's errors say what is wrong
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(text);
      } catch (const nlohmann::json::parse_error& e) {
        throw Error(Where::at_line(vocab_path, line_of_offset(text, e.byte ? e.byte - 1 : 0)),
                    cat("not valid JSON: ", e.what()));
      }
      if (!j.is_object()) throw Error(Where::at_line(vocab_path, 1), "expected a JSON object of token → id");
      entries = read_vocab_object(j, Where{vocab_path});
    }
    add_vocab(spec, *entries, Where{vocab_path});
    start_merges(spec, Where{vocab_path});
  }
  std::ifstream in(merges_path, std::ios::binary);
  if (!in) throw_errno("cannot open", merges_path);
  std::string line, joined;
  int64_t line_no = 0;
  int64_t first_blank_line = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    // A blank line is an error unless only blank lines follow it (a file ending in "\n\n").
    if (line.empty()) {
      if (!first_blank_line) first_blank_line = line_no;
      continue;
    }
    auto where = [&] { return Where::at_line(merges_path, line_no); };
    if (first_blank_line)
      throw Error(Where::at_line(merges_path, first_blank_line), "expected a merge \"left right\", found an empty line");
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw Error(where(), cat("expected a merge of two tokens separated by one space, found \"", line, "\""));
    add_merge(spec, std::string_view(line).substr(0, space), std::string_view(line).substr(space + 1), joined, where);
  }
  if (in.bad()) throw Error(Where{merges_path}, "read error");
  std::vector<AddedToken> added;
  if (TokenId eod = spec.vocab.find("<|endoftext|>"); eod >= 0)
    added.push_back({.content = "<|endoftext|>", .id = eod, .special = true});
  spec.added = AddedVocabulary(std::move(added), kBpeAddedFlags, spec.source);
  return std::make_unique<BpeTokenizer>(std::move(spec), options);
}

// ---------------------------------------------------------------------------------------------
// HF tokenizer.json

std::unique_ptr<Tokenizer> make_bpe_tokenizer_from_hf(const TokenizerJson& j, const TokenizerOptions& options) {
  auto fail = [&](const std::string& what) { throw Error(Where{j.source}, what); };
  if (j.model_type != "BPE") fail(cat("expected a BPE model in tokenizer.json, found \"", j.model_type, "\""));
  BpeSpec spec;
  spec.source = j.source;

  // Normalizer: none (GPT-2 has none; another would change the text before the pattern).
  if (j.normalizer) fail("a byte-level BPE tokenizer.json with a normalizer is not supported (GPT-2's has none)");
  // Pre-tokenizer: ByteLevel (the reader takes it out of a one-step Sequence).
  if (!j.pre_tokenizer || j.pre_tokenizer->type != "ByteLevel")
    fail("expected a ByteLevel pre-tokenizer in tokenizer.json (GPT-2 style byte-level BPE)");
  if (!j.pre_tokenizer->use_regex) fail("ByteLevel with use_regex=false is not supported");
  spec.add_prefix_space = j.pre_tokenizer->add_prefix_space;

  if (!j.continuing_subword_prefix.value_or("").empty() || !j.end_of_word_suffix.value_or("").empty())
    fail("BPE with continuing_subword_prefix or end_of_word_suffix is not byte-level GPT-2 BPE");
  if (j.dropout > 0) fail("BPE dropout is a training-time option; it is not supported here");
  spec.ignore_merges = j.ignore_merges;

  add_vocab(spec, j.vocab, Where{j.source});
  start_merges(spec, Where{j.source});
  std::string joined;
  for (size_t i = 0; i < j.merges.size(); ++i)
    add_merge(spec, j.merges[i].first, j.merges[i].second, joined,
              [&] { return Where::at_record(j.source, static_cast<int64_t>(i)); });
  spec.added = AddedVocabulary(j.added_tokens, kBpeAddedFlags, j.source);
  return std::make_unique<BpeTokenizer>(std::move(spec), options);
}

std::unique_ptr<Tokenizer> make_bpe_tokenizer_from_hf(const nlohmann::json& tokenizer_json, const std::string& source,
                                                      const TokenizerOptions& options) {
  return make_bpe_tokenizer_from_hf(parse_tokenizer_json(tokenizer_json, source), options);
}

std::vector<TokenId> bpe_merge_word(const Tokenizer& tokenizer, std::string_view word, BpeMergeAlgorithm algorithm) {
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer);
  if (!bpe) throw UsageError("bpe_merge_word needs a byte-level BPE tokenizer");
  return bpe->merge_word(word, algorithm);
}

}  // namespace pretrain
