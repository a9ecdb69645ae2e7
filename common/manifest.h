// manifest.json beside every set of shards (docs/architecture.md, "Manifest"): what the files are, what made
// them, and per shard its record count, size and xxh3. Readers verify what they rely on.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pretrain {

// Format names used in manifests.
inline constexpr const char* kFormatDocs = "docs-jsonl-zst";   // wikiprep documents
inline constexpr const char* kFormatSentences = "sentences-txt";  // Google BERT text: wikiprep --format sentences
inline constexpr const char* kFormatBertHdf5 = "bert-hdf5";    // NVIDIA BERT layout
inline constexpr const char* kFormatBertHdf5Binned = "bert-hdf5-binned";  // bins of NVIDIA shards (--bin-size)
inline constexpr const char* kFormatMegatron = "megatron";     // <prefix>.bin + .idx
inline constexpr const char* kFormatLlmc = "llmc";             // llm.c token .bin
inline constexpr const char* kFormatCheckpoint = "checkpoint";  // a trainer checkpoint's files (trainer/checkpoint.h)
inline constexpr int kManifestVersion = 1;

// One file a tokenizer was loaded from.
struct TokenizerFile {
  // "vocab" (vocab.txt; GPT-2's encoder.json / vocab.json), "merges" (vocab.bpe / merges.txt),
  // "tokenizer.json" (HF's) or "model" (SentencePiece's .model).
  std::string role;
  std::string path;  // as make-pretraining-shards was given it (relative to where it ran)
  uint64_t bytes = 0;
  std::string xxh3;  // hex64 of the file
};

// Whether a tokenizer folds the text before its model: HF's do_lower_case and strip_accents.
struct TokenizerCasing {
  bool lowercase = false;
  std::optional<bool> strip_accents;  // unset: not known (HF then follows lowercase)
};

struct SpecialToken {
  int64_t id = 0;
  std::string token;  // as the vocabulary spells it: "[CLS]", "<|endoftext|>", "</s>"
};

// The tokenizer that made a set of shards. Besides what every reader checks (kind, hash, size,
// special ids), its record says all that is needed to load it again and to write it out for
// another library (--export) without reading the command line that made the shards: its files,
// the options it was loaded with, its casing and its special tokens. Manifests written before
// the record have none of it (files empty).
struct TokenizerInfo {
  std::string kind;        // wordpiece | bpe | sentencepiece; empty: not tokenized
  std::string vocab_hash;  // xxh3 of the vocabulary file(s)
  int64_t vocab_size = 0;
  std::map<std::string, int64_t> special_ids;  // "[CLS]" → 101, "eod" → 50256, …
  // The record.
  std::vector<TokenizerFile> files;  // in load order (BPE: vocab, then merges)
  // The load options that change ids (tokenizer/tokenizer.h: tokenizer_options_to_json).
  nlohmann::json options = nlohmann::json::object();
  TokenizerCasing casing;
  std::map<std::string, SpecialToken> special_tokens;  // role ("cls", "eod", "unk", …) → id and token
  // Set by Manifest::from_json when the manifest has a record that cannot be read (a field
  // missing or of the wrong type): what is wrong. The record's fields are then left empty; the
  // rest of the manifest is read as usual, since only --export needs the record.
  std::string record_error;
  bool has_record() const { return !files.empty(); }
};

struct ShardEntry {
  std::string file;  // relative to the manifest's directory; for megatron the .bin (the .idx beside)
  uint64_t records = 0;
  uint64_t bytes = 0;
  std::string xxh3;  // hex64 of the file
  std::map<std::string, std::string> companions;  // other file of the shard (".idx") → xxh3
};

struct Manifest {
  std::string format;
  int version = kManifestVersion;
  TokenizerInfo tokenizer;
  int64_t seq_len = 0;          // 0 when not applicable
  int64_t max_predictions = 0;  // BERT
  std::string tool;             // "wikiprep 0.1.0"
  std::vector<std::string> args;
  std::optional<uint64_t> seed;
  bool complete = true;         // false while a resumable run is under way
  nlohmann::json stats = nlohmann::json::object();   // per-tool statistics
  nlohmann::json extra = nlohmann::json::object();   // anything else a stage needs
  std::vector<ShardEntry> shards;

  nlohmann::json to_json() const;
  static Manifest from_json(const nlohmann::json& j, const std::string& source = "manifest.json");
  static Manifest read(const std::string& path);  // throws Error naming the file and field
  void write(const std::string& path) const;      // atomic

  uint64_t total_records() const;
  // Hashes a file and fills size and checksum; `records` is the caller's.
  static ShardEntry describe(const std::string& dir, const std::string& file, uint64_t records);
};

inline constexpr const char* kManifestName = "manifest.json";

// One bin of a length-binned BERT split (kFormatBertHdf5Binned, make-pretraining-shards
// --bin-size): an entry of the split manifest's extra.bins, a shard set of its own in `dir`.
struct ManifestBin {
  std::string dir;          // relative to the split's manifest
  int bin = 0;
  int64_t max_length = 0;   // the padded length of its records
  uint64_t records = 0;
  uint64_t shards = 0;
  nlohmann::json to_json() const;
  // "" when the bin's own manifest holds the records and length listed here, else what differs.
  std::string mismatch(const Manifest& bin_manifest) const;
};
// The bins a binned split's manifest lists (none when it has no list; Error naming `source` for a
// malformed one).
std::vector<ManifestBin> manifest_bins(const Manifest& split, const std::string& source);

// One problem found by verify().
struct VerifyProblem {
  std::string file;
  std::string message;
};

// Checks every shard of the manifest in `dir`: present, size, xxh3, companion files, and — when
// count_records is given — the record count it reports. Returns the problems (empty: all good).
std::vector<VerifyProblem> verify_manifest(
    const Manifest& manifest, const std::string& dir,
    const std::function<uint64_t(const std::string& path)>& count_records = nullptr);

}  // namespace pretrain
