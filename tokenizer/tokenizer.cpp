// The parts of Tokenizer every model shares, and load_tokenizer's recognition of vocabulary files.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include <tbb/parallel_for.h>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/json_integer.h"
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

namespace {

// The first vocabulary entry of lowercase ASCII letters only (holding `letter` when given).
std::optional<std::string> plain_word(const Tokenizer& tok, char letter = 0) {
  for (int64_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string t = tok.id_to_token(TokenId(id));
    const bool plain = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    if (plain && (!letter || t.find(letter) != std::string::npos)) return t;
  }
  return std::nullopt;
}

bool folds(const Tokenizer& tok, std::string_view a, std::string_view b) { return tok.encode(a) == tok.encode(b); }

}  // namespace

TokenizerCasing Tokenizer::casing() const {
  TokenizerCasing casing;
  const std::string word = plain_word(*this).value_or("abcdefghijklmnopqrstuvwxyz");
  std::string upper = word;
  for (char& c : upper) c = char(c - 'a' + 'A');
  casing.lowercase = folds(*this, upper, word);
  if (const std::optional<std::string> e_word = plain_word(*this, 'e')) {
    std::string accented = *e_word;
    accented.replace(accented.find('e'), 1, "\xc3\xa9");  // é
    casing.strip_accents = folds(*this, accented, *e_word);
  }
  return casing;
}

TokenizerInfo Tokenizer::info() const {
  TokenizerInfo info = loaded_;
  info.kind = std::string(kind());
  info.vocab_size = vocab_size();
  for (const auto& [role, id] : special_ids()) {
    info.special_ids[role] = id;
    if (info.has_record()) info.special_tokens[role] = {id, id_to_token(id)};
  }
  return info;
}

void Tokenizer::set_source(std::vector<TokenizerFile> files, const TokenizerOptions& options) {
  source_.clear();
  std::string joined;
  for (const TokenizerFile& f : files) {
    source_ += (source_.empty() ? "" : " + ") + f.path;
    joined += f.xxh3;
  }
  // One file: its xxh3; several: the xxh3 of their xxh3s, in order.
  loaded_.vocab_hash = files.size() == 1 ? joined : hex64(xxh3_bytes(joined.data(), joined.size()));
  loaded_.files = std::move(files);
  loaded_.options = tokenizer_options_to_json(options);
  loaded_.casing = casing();
}

nlohmann::json tokenizer_options_to_json(const TokenizerOptions& o) {
  auto optional = [](const std::optional<bool>& b) { return b ? nlohmann::json(*b) : nlohmann::json(nullptr); };
  return {{"lowercase", optional(o.lowercase)},
          {"strip_accents", optional(o.strip_accents)},
          {"split_cjk", o.split_cjk},
          {"max_input_chars_per_word", o.max_input_chars_per_word},
          {"python_compat", o.python_compat}};
}

TokenizerOptions tokenizer_options_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(Where{source}, cat("expected the tokenizer's options to be an object, found ", j.type_name()));
  TokenizerOptions o;
  // A key this version does not know is left alone: the files and the record's casing are what
  // the readers of the record need.
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "lowercase") o.lowercase = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
      else if (key == "strip_accents") o.strip_accents = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
      else if (key == "split_cjk") o.split_cjk = v.get<bool>();
      else if (key == "max_input_chars_per_word") o.max_input_chars_per_word = json_integer<int>(v);
      else if (key == "python_compat") o.python_compat = v.get<bool>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(Where{source}, cat("tokenizer option '", key, "': ", e.what()));
    }
  }
  return o;
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

// The file as the record names it: its path, size and xxh3.
TokenizerFile describe_file(const std::string& role, const std::string& path) {
  return {role, path, file_size(path), hex64(xxh3_file(path))};
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
  std::vector<TokenizerFile> files;
  if (path.extension() == ".model") {
    tok = make_sentencepiece_tokenizer(p, options);
    files = {describe_file("model", p)};
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
    files = {describe_file("vocab", vocab), describe_file("merges", merges)};
  } else if (path.extension() == ".json") {
    tok = load_hf_json(p, options);
    files = {describe_file("tokenizer.json", p)};
  } else {
    tok = make_wordpiece_tokenizer(p, options);
    files = {describe_file("vocab", p)};
  }
  tok->set_source(std::move(files), options);
  return tok;
}

}  // namespace pretrain
