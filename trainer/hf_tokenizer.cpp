#include "trainer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/manifest.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tokenizer.h"

namespace pretrain {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// make-pretraining-shards' --tokenizer (as given: "--tokenizer P" or "--tokenizer=P") and, set
// there, --lowercase / --no-lowercase; the tokenizer is loaded the way it was then.
struct ShardsTokenizer {
  std::string path;
  TokenizerOptions options;
};

ShardsTokenizer tokenizer_from_args(const std::vector<std::string>& args) {
  ShardsTokenizer t;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--tokenizer" && i + 1 < args.size()) t.path = args[i + 1];
    else if (args[i].starts_with("--tokenizer=")) t.path = args[i].substr(12);
    else if (args[i] == "--lowercase") t.options.lowercase = true;
    else if (args[i] == "--no-lowercase") t.options.lowercase = false;
    else if (args[i] == "--python-compat") t.options.python_compat = true;
  }
  return t;
}

// The path as given (relative to where make-pretraining-shards ran, maybe here), else beside the manifest.
std::string resolve(const std::string& given, const std::string& manifest_path) {
  if (given.empty() || file_exists(given)) return given;
  const std::string beside = path_join(dir_name(manifest_path), given);
  return file_exists(beside) ? beside : "";
}

void copy_file(const std::string& from, const std::string& to) { write_file_atomic(to, read_file(from)); }

std::string token(const Tokenizer& tok, const char* role) {
  const auto& ids = tok.special_ids();
  auto it = ids.find(role);
  return it == ids.end() ? std::string() : tok.id_to_token(it->second);
}

// Whether the tokenizer lowercases (strips accents) is read off its behaviour, which folds in
// --lowercase, a tokenizer.json's normalizer and the vocabulary's own casing alike: a plain word of
// its vocabulary, uppercased (accented), still encodes as that word when it does.
bool folds(const Tokenizer& tok, std::string_view a, std::string_view b) { return tok.encode(a) == tok.encode(b); }

// The first vocabulary entry of lowercase ASCII letters only (holding `letter` when given).
std::optional<std::string> plain_word(const Tokenizer& tok, char letter = 0) {
  for (int64_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string t = tok.id_to_token(TokenId(id));
    const bool plain = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    if (plain && (!letter || t.find(letter) != std::string::npos)) return t;
  }
  return std::nullopt;
}

bool lowercases(const Tokenizer& tok) {
  const std::string word = plain_word(tok).value_or("abcdefghijklmnopqrstuvwxyz");
  std::string upper = word;
  for (char& c : upper) c = char(c - 'a' + 'A');
  return folds(tok, upper, word);
}

// null (HF: follow do_lower_case) when the vocabulary has no plain word with an 'e' to accent.
nlohmann::json strips_accents(const Tokenizer& tok) {
  const std::optional<std::string> word = plain_word(tok, 'e');
  if (!word) return nullptr;
  std::string accented = *word;
  accented.replace(accented.find('e'), 1, "\xc3\xa9");  // é
  return folds(tok, accented, *word);
}

void write_wordpiece(const std::string& dir, const Tokenizer& tok, int64_t max_length) {
  std::string vocab;
  for (int64_t id = 0; id < tok.vocab_size(); ++id) vocab += tok.id_to_token(TokenId(id)) + "\n";
  write_file_atomic(path_join(dir, "vocab.txt"), vocab);
  const bool lower = lowercases(tok);
  const json strip = strips_accents(tok);
  json specials = json::object();
  for (const char* role : {"unk", "sep", "pad", "cls", "mask"})
    if (std::string t = token(tok, role); !t.empty()) specials[cat(role, "_token")] = t;
  json config = {{"tokenizer_class", "BertTokenizer"}, {"do_lower_case", lower}, {"strip_accents", strip},
                 {"tokenize_chinese_chars", true},     {"model_max_length", max_length}};
  config.update(specials);
  write_file_atomic(path_join(dir, "tokenizer_config.json"), config.dump(2) + "\n");
  write_file_atomic(path_join(dir, "special_tokens_map.json"), specials.dump(2) + "\n");
}

void write_bpe(const std::string& dir, const Tokenizer& tok, int64_t max_length) {
  // Loaded from "<vocab> + <merges>" (encoder.json/vocab.bpe are vocab.json/merges.txt by other
  // names) or from one tokenizer.json, which AutoTokenizer reads as it is.
  const std::string& source = tok.source();
  if (const size_t plus = source.find(" + "); plus != std::string::npos) {
    copy_file(source.substr(0, plus), path_join(dir, "vocab.json"));
    copy_file(source.substr(plus + 3), path_join(dir, "merges.txt"));
  } else {
    copy_file(source, path_join(dir, "tokenizer.json"));
  }
  json specials = json::object();
  if (std::string eod = token(tok, "eod"); !eod.empty())
    specials = {{"bos_token", eod}, {"eos_token", eod}, {"unk_token", eod}};
  json config = {{"tokenizer_class", "GPT2Tokenizer"}, {"add_prefix_space", false}, {"model_max_length", max_length}};
  config.update(specials);
  write_file_atomic(path_join(dir, "tokenizer_config.json"), config.dump(2) + "\n");
  write_file_atomic(path_join(dir, "special_tokens_map.json"), specials.dump(2) + "\n");
}

// SentencePiece → tokenizer.json (the tokenizer library's conversion) for PreTrainedTokenizerFast.
// The special tokens are the model's own pieces: unk/bos/eos/pad where the model defines them, and
// [CLS]/[SEP]/[MASK]/[PAD] where it has those pieces (make-pretraining-shards finds BERT's by
// name, as in a WordPiece vocabulary). With [CLS] and [SEP], add_special_tokens wraps a sequence
// as the BERT shards did; otherwise it adds nothing, as spm_encode and the GPT shards.
// Returns false after a warning when HF cannot express the model (word/char types, …).
bool write_sentencepiece(const std::string& dir, const Tokenizer& tok, const std::string& path, int64_t max_length) {
  json tokenizer;
  try {
    tokenizer = json::parse(sentencepiece_to_hf_json(path));
  } catch (const Error& e) {
    log_warn("--export ", dir, ": ", e.what(), "; model files only");
    return false;
  }
  json specials = json::object();
  for (const char* role : {"unk", "bos", "eos", "pad"})
    if (std::string t = token(tok, role); !t.empty()) specials[cat(role, "_token")] = t;
  for (auto [role, piece] : {std::pair{"cls", "[CLS]"}, std::pair{"sep", "[SEP]"}, std::pair{"mask", "[MASK]"},
                             std::pair{"pad", "[PAD]"}})
    if (tok.token_to_id(piece) && !specials.contains(cat(role, "_token"))) specials[cat(role, "_token")] = piece;
  if (specials.contains("cls_token") && specials.contains("sep_token")) {
    const std::string cls = specials["cls_token"], sep = specials["sep_token"];
    const TokenId cls_id = *tok.token_to_id(cls), sep_id = *tok.token_to_id(sep);
    auto part = [](const char* id, int type) { return json{{"SpecialToken", {{"id", id}, {"type_id", type}}}}; };
    auto seq = [](const char* id, int type) { return json{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
    tokenizer["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {part(cls.c_str(), 0), seq("A", 0), part(sep.c_str(), 0)}},
        {"pair", {part(cls.c_str(), 0), seq("A", 0), part(sep.c_str(), 0), seq("B", 1), part(sep.c_str(), 1)}},
        {"special_tokens",
         {{cls, {{"id", cls}, {"ids", {cls_id}}, {"tokens", {cls}}}},
          {sep, {{"id", sep}, {"ids", {sep_id}}, {"tokens", {sep}}}}}}};
  }
  write_file_atomic(path_join(dir, "tokenizer.json"), tokenizer.dump(1) + "\n");
  json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", max_length}};
  config.update(specials);
  write_file_atomic(path_join(dir, "tokenizer_config.json"), config.dump(2) + "\n");
  write_file_atomic(path_join(dir, "special_tokens_map.json"), specials.dump(2) + "\n");
  return true;
}

}  // namespace

std::string find_shards_manifest(const std::vector<std::string>& sources) {
  std::error_code ec;
  for (const std::string& s : sources) {
    const std::string candidate = fs::is_directory(s, ec)        ? path_join(s, kManifestName)
                                  : base_name(s) == kManifestName ? s
                                                                  : path_join(dir_name(s), kManifestName);
    if (file_exists(candidate)) return candidate;
  }
  return "";
}

bool write_hf_tokenizer(const std::string& dir, const std::string& manifest_path, int64_t model_max_length) {
  if (manifest_path.empty()) {
    log_warn("--export ", dir, ": the shards have no manifest.json, so the tokenizer that made them is unknown; "
             "model files only");
    return false;
  }
  const Manifest manifest = Manifest::read(manifest_path);
  const ShardsTokenizer given = tokenizer_from_args(manifest.args);
  const std::string path = resolve(given.path, manifest_path);
  if (path.empty()) {
    log_warn("--export ", dir, ": the tokenizer that made the shards (", manifest_path, ": --tokenizer '", given.path,
             "') cannot be found; model files only");
    return false;
  }
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(path, given.options);
  const TokenizerInfo info = tok->info();
  if (!manifest.tokenizer.vocab_hash.empty() && info.vocab_hash != manifest.tokenizer.vocab_hash) {
    log_warn("--export ", dir, ": ", path, " has changed since it made the shards (hash ", info.vocab_hash, ", ",
             manifest_path, " says ", manifest.tokenizer.vocab_hash, "); model files only");
    return false;
  }
  make_dirs(dir);
  if (tok->kind() == "wordpiece") {
    write_wordpiece(dir, *tok, model_max_length);
  } else if (tok->kind() == "bpe") {
    write_bpe(dir, *tok, model_max_length);
  } else if (tok->kind() == "sentencepiece") {
    return write_sentencepiece(dir, *tok, path, model_max_length);
  } else {
    log_warn("--export ", dir, ": the shards' tokenizer ", path, " is ", tok->kind(),
             ", which the export does not convert; model files only");
    return false;
  }
  return true;
}

}  // namespace pretrain
