// The parts of Tokenizer every model shares, and load_tokenizer's recognition of vocabulary files.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include <tbb/parallel_for.h>

#include "common/error.h"
#include "common/hash.h"
#include "tokenizer/bpe.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/wordpiece.h"

namespace pretrain {

void Tokenizer::tokenize_into(std::string_view text, std::vector<std::string>& tokens) const {
  std::vector<TokenId> ids;
  encode_into(text, ids);
  for (TokenId id : ids) tokens.push_back(id_to_token(id));
}

std::vector<TokenId> Tokenizer::post_process(std::span<const TokenId> a, const std::span<const TokenId>* b) const {
  std::vector<TokenId> out(a.begin(), a.end());
  if (b) out.insert(out.end(), b->begin(), b->end());
  return out;
}

bool Tokenizer::is_special(TokenId id) const {
  for (const auto& [role, special] : special_ids())
    if (special == id) return true;
  return false;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<TokenId> ids;
  encode_into(text, ids);
  return add_special_tokens ? post_process(ids) : ids;
}

std::vector<std::string> Tokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  tokenize_into(text, tokens);
  return tokens;
}

std::vector<std::vector<TokenId>> Tokenizer::encode_batch(std::span<const std::string_view> texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<TokenId>> out(texts.size());
  // Small grains keep long and short texts balanced; each result lands in its own slot, so the
  // order is the input's whatever the schedule.
  tbb::parallel_for(tbb::blocked_range<size_t>(0, texts.size(), 16), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i != r.end(); ++i) out[i] = encode(texts[i], add_special_tokens);
  });
  return out;
}

std::vector<std::vector<TokenId>> Tokenizer::encode_batch(std::span<const std::string> texts,
                                                          bool add_special_tokens) const {
  std::vector<std::string_view> views(texts.begin(), texts.end());
  return encode_batch(std::span<const std::string_view>(views), add_special_tokens);
}

TokenizerInfo Tokenizer::info() const {
  TokenizerInfo info;
  info.kind = std::string(kind());
  info.vocab_hash = vocab_hash_;
  info.vocab_size = vocab_size();
  for (const auto& [role, id] : special_ids()) info.special_ids[role] = id;
  return info;
}

void Tokenizer::set_source(std::string source, std::string vocab_hash) {
  source_ = std::move(source);
  vocab_hash_ = std::move(vocab_hash);
}

namespace {

namespace fs = std::filesystem;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The BPE file that goes with `given` (an encoder/vocab json or a merges/bpe file): same
// directory, the partner name, with any prefix the given name has ("gpt2-encoder.json" →
// "gpt2-vocab.bpe"). Returns "" when none exists.
std::string bpe_partner(const fs::path& given) {
  static const std::pair<std::string_view, std::string_view> kPairs[] = {
      {"encoder.json", "vocab.bpe"}, {"vocab.json", "merges.txt"},
      {"vocab.bpe", "encoder.json"}, {"merges.txt", "vocab.json"}};
  std::string name = given.filename().string();
  for (auto [mine, theirs] : kPairs) {
    if (!ends_with(name, mine)) continue;
    fs::path partner = given.parent_path() / (name.substr(0, name.size() - mine.size()) + std::string(theirs));
    if (fs::exists(partner)) return partner.string();
  }
  return "";
}

std::string hash_files(const std::vector<std::string>& files) {
  std::string joined;
  for (const auto& f : files) joined += hex64(xxh3_file(f));
  return files.size() == 1 ? joined : hex64(xxh3_bytes(joined.data(), joined.size()));
}

// HF's tokenizer.json: the reader refuses models other than WordPiece and BPE.
std::unique_ptr<Tokenizer> load_hf_json(const std::string& path, const TokenizerOptions& options) {
  TokenizerJson j = read_tokenizer_json(path);
  if (j.model_type == "WordPiece") return make_wordpiece_tokenizer_from_hf(j, options);
  return make_bpe_tokenizer_from_hf(j, options);
}

// Picks the tokenizer file inside a directory, in the documented order.
std::string pick_in_directory(const fs::path& dir) {
  for (const char* name : {"tokenizer.json", "vocab.txt", "encoder.json", "vocab.json"})
    if (fs::exists(dir / name)) return (dir / name).string();
  std::vector<std::string> models;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".model") models.push_back(e.path().string());
  std::sort(models.begin(), models.end());
  if (!models.empty()) return models.front();
  throw Error(Where{dir.string()},
              "no tokenizer here: expected tokenizer.json, vocab.txt, encoder.json, vocab.json or a .model file");
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path_in, const TokenizerOptions& options) {
  fs::path path(path_in);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(Where{path_in}, "no such tokenizer file or directory");
  if (fs::is_directory(path)) path = pick_in_directory(path);
  const std::string p = path.string();
  const std::string name = path.filename().string();

  std::unique_ptr<Tokenizer> tok;
  std::vector<std::string> files{p};
  if (path.extension() == ".model") {
    tok = make_sentencepiece_tokenizer(p, options);
  } else if (ends_with(name, "encoder.json") || ends_with(name, "vocab.json") || ends_with(name, "vocab.bpe") ||
             ends_with(name, "merges.txt")) {
    std::string partner = bpe_partner(path);
    if (partner.empty())
      throw Error(Where{p}, "a byte-level BPE tokenizer needs both encoder.json/vocab.json and vocab.bpe/merges.txt; "
                            "the partner file is not beside this one");
    bool given_is_vocab = path.extension() == ".json";
    const std::string& vocab = given_is_vocab ? p : partner;
    const std::string& merges = given_is_vocab ? partner : p;
    tok = make_bpe_tokenizer(vocab, merges, options);
    files = {vocab, merges};
  } else if (path.extension() == ".json") {
    tok = load_hf_json(p, options);
  } else {
    tok = make_wordpiece_tokenizer(p, options);
  }
  std::string source = files.size() == 1 ? files[0] : files[0] + " + " + files[1];
  tok->set_source(source, hash_files(files));
  return tok;
}

}  // namespace pretrain
