#include "trainer/hf_tokenizer.h"

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/manifest.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_record.h"

namespace pretrain {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The tokenizer that made the shards, loaded again, and what the manifest's record says of it.
struct ShardsTokenizer {
  std::unique_ptr<Tokenizer> tok;
  TokenizerInfo record;
  std::vector<std::string> paths;  // record.files, found here
};

// From the manifest's tokenizer record (tokenizer_record.h: each file found, unchanged, loaded with
// the recorded options). Nothing, after a warning naming the file or field and why, when that
// cannot be had.
std::optional<ShardsTokenizer> from_record(const std::string& dir, const Manifest& manifest,
                                           const std::string& manifest_path) {
  ShardsTokenizer t;
  t.record = manifest.tokenizer;
  try {
    t.tok = load_recorded_tokenizer(t.record, manifest_path, &t.paths);
  } catch (const Error& e) {
    log_warn("--export ", dir, ": ", e.what(), "; model files only");
    return std::nullopt;
  }
  return t;
}

// A manifest written before the tokenizer record: make-pretraining-shards' --tokenizer among the
// saved arguments ("--tokenizer P" or "--tokenizer=P") and --lowercase / --no-lowercase /
// --python-compat set there, loaded the way it was then; the record is then the tokenizer's own.
std::optional<ShardsTokenizer> from_saved_args(const std::string& dir, const Manifest& manifest,
                                               const std::string& manifest_path) {
  const std::string at = cat("--export ", dir, ": ");
  log_warn(at, manifest_path, " predates the tokenizer record (written by an older make-pretraining-shards): "
           "finding the tokenizer from its saved command line");
  std::string given;
  TokenizerOptions options;
  const std::vector<std::string>& args = manifest.args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--tokenizer" && i + 1 < args.size()) given = args[i + 1];
    else if (args[i].starts_with("--tokenizer=")) given = args[i].substr(12);
    else if (args[i] == "--lowercase") options.lowercase = true;
    else if (args[i] == "--no-lowercase") options.lowercase = false;
    else if (args[i] == "--python-compat") options.python_compat = true;
  }
  const std::string path = find_recorded_file(given, manifest_path);
  if (path.empty()) {
    log_warn(at, "the tokenizer that made the shards (", manifest_path, ": --tokenizer '", given,
             "') cannot be found; model files only");
    return std::nullopt;
  }
  ShardsTokenizer t;
  try {
    t.tok = load_tokenizer(path, options);
  } catch (const Error& e) {
    log_warn(at, "the tokenizer that made the shards cannot be loaded again: ", e.what(), "; model files only");
    return std::nullopt;
  }
  t.record = t.tok->info();
  for (const TokenizerFile& f : t.record.files) t.paths.push_back(f.path);
  if (!manifest.tokenizer.vocab_hash.empty() && t.record.vocab_hash != manifest.tokenizer.vocab_hash) {
    log_warn(at, path, " has changed since it made the shards (hash ", t.record.vocab_hash, ", ", manifest_path,
             " says ", manifest.tokenizer.vocab_hash, "); model files only");
    return std::nullopt;
  }
  return t;
}

void copy_file(const std::string& from, const std::string& to) { write_file_atomic(to, read_file(from)); }

// The special token of `role` the record names, "" when it names none.
std::string token(const TokenizerInfo& record, const char* role) {
  const auto it = record.special_tokens.find(role);
  return it == record.special_tokens.end() ? std::string() : it->second.token;
}

void write_wordpiece(const std::string& dir, const ShardsTokenizer& t, int64_t max_length) {
  std::string vocab;
  for (int64_t id = 0; id < t.tok->vocab_size(); ++id) vocab += t.tok->id_to_token(TokenId(id)) + "\n";
  write_file_atomic(path_join(dir, "vocab.txt"), vocab);
  const TokenizerCasing& casing = t.record.casing;
  json specials = json::object();
  for (const char* role : {"unk", "sep", "pad", "cls", "mask"})
    if (std::string s = token(t.record, role); !s.empty()) specials[cat(role, "_token")] = s;
  json config = {{"tokenizer_class", "BertTokenizer"},
                 {"do_lower_case", casing.lowercase},
                 {"strip_accents", casing.strip_accents ? json(*casing.strip_accents) : json(nullptr)},
                 {"tokenize_chinese_chars", true},
                 {"model_max_length", max_length}};
  config.update(specials);
  write_file_atomic(path_join(dir, "tokenizer_config.json"), config.dump(2) + "\n");
  write_file_atomic(path_join(dir, "special_tokens_map.json"), specials.dump(2) + "\n");
}

void write_bpe(const std::string& dir, const ShardsTokenizer& t, int64_t max_length) {
  // Loaded from a vocabulary and its merges (encoder.json/vocab.bpe are vocab.json/merges.txt by
  // other names) or from one tokenizer.json, which AutoTokenizer reads as it is.
  for (size_t i = 0; i < t.record.files.size(); ++i) {
    const std::string& role = t.record.files[i].role;
    copy_file(t.paths[i], path_join(dir, role == "vocab" ? "vocab.json" : role == "merges" ? "merges.txt" : "tokenizer.json"));
  }
  json specials = json::object();
  if (std::string eod = token(t.record, "eod"); !eod.empty())
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
bool write_sentencepiece(const std::string& dir, const ShardsTokenizer& t, int64_t max_length) {
  const Tokenizer& tok = *t.tok;
  json tokenizer;
  try {
    tokenizer = json::parse(sentencepiece_to_hf_json(t.paths.front()));
  } catch (const Error& e) {
    log_warn("--export ", dir, ": ", e.what(), "; model files only");
    return false;
  }
  json specials = json::object();
  for (const char* role : {"unk", "bos", "eos", "pad"})
    if (std::string s = token(t.record, role); !s.empty()) specials[cat(role, "_token")] = s;
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
  const bool recorded = manifest.tokenizer.has_record() || !manifest.tokenizer.record_error.empty();
  const std::optional<ShardsTokenizer> t =
      recorded ? from_record(dir, manifest, manifest_path) : from_saved_args(dir, manifest, manifest_path);
  if (!t) return false;
  make_dirs(dir);
  const std::string& kind = t->record.kind;
  if (kind == "wordpiece") {
    write_wordpiece(dir, *t, model_max_length);
  } else if (kind == "bpe") {
    write_bpe(dir, *t, model_max_length);
  } else if (kind == "sentencepiece") {
    return write_sentencepiece(dir, *t, model_max_length);
  } else {
    log_warn("--export ", dir, ": the shards' tokenizer ", t->tok->source(), " is ", kind,
             ", which the export does not convert; model files only");
    return false;
  }
  return true;
}

}  // namespace pretrain
