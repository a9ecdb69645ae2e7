// shard-tool stats: one pass over a set of shards — documents, BERT HDF5 (plain, binned, packed),
// Megatron .bin/.idx or llm.c — at the loader's read speed (shards on threads; BERT reads only the
// datasets it counts), giving what a corpus is before GPU-days are spent on it:
//   documents  documents, paragraphs (lines of text), sentences (make-pretraining-shards' rule,
//              from tokenizer/: see StatsTextTools), words (runs of non-white-space), UTF-8 bytes,
//              each per document as a histogram; the share a dedup report removed
//   BERT       instances, rows, real tokens, [UNK] share (masked positions restored from
//              masked_lm_ids), predictions, NSP share, the instance length histogram, and padding:
//              tokens computed per real token as stored (per bin of a binned set), unbinned, with
//              each --bin-size and with --pack (bert_padding.h, padding.py's definitions)
//   GPT        documents, sequences, tokens, [UNK]/<unk> share, bytes of text per token (each id's
//              bytes, from the tokenizer that made them, times how often it occurs), the ids the
//              vocabulary has that occur, document and sequence length histograms
//   all        the corpus counts make-pretraining-shards recorded in the manifest (documents and
//              sentences tokenized), shards, bytes on disk, seconds and rate
// The result is JSON (stats_json_version below); print_shard_stats prints it as tables and
// scripts/plot_stats.py draws it. Every shard a manifest lists is checked against it first (size,
// xxh3, companions), and its record count after: a damaged shard is an Error naming it.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/manifest.h"
#include "formats/bert_defaults.h"

namespace pretrain {

inline constexpr int kStatsJsonVersion = 1;

// Sentences in a document's text.
using SentenceCounter = std::function<uint64_t(std::string_view text)>;

// What the statistics need of tokenizer/, which formats/ does not link (docs/architecture.md, "The
// dependency graph"): shard-tool's main supplies these from tokenizer/, the tests stand-ins. What
// they return is called from several threads at once. Unset: that statistic is left out (null).
struct StatsTextTools {
  // Sentences as make-pretraining-shards splits a document (ICU for the language `lang`).
  std::function<SentenceCounter(const std::string& lang)> sentences;
  // The bytes of text each id of the tokenizer that made a set stands for inside a text (special
  // tokens 0): that tokenizer is `path` when given, else the manifest's record (`record`, found
  // through `manifest_path`). Throws Error saying why when it cannot be had, is not that
  // tokenizer, or has no such bytes (WordPiece: its share of [UNK] says more).
  std::function<std::vector<uint32_t>(const TokenizerInfo& record, const std::string& manifest_path,
                                      const std::string& path)>
      token_bytes;
};

struct ShardStatsOptions {
  // BERT: the --bin-size cases (each must divide seq_len; empty: those of 64 and 32 that do, as
  // padding.py's defaults) and --pack's max_pack.
  std::vector<int64_t> bin_sizes;
  int64_t max_pack = kDefaultMaxPack;
  std::string dedup_report;  // JSON Lines of removed documents (read_dedup_report); "" for none
  bool sentences = true;     // documents: count sentences (the slowest statistic) when tools can
  std::string lang;          // documents: sentence rules; "": the manifest's site language, else en
  std::string tokenizer;     // GPT: bytes per token from this tokenizer, not the manifest's record
  bool verify = true;        // xxh3 of every shard a manifest lists before it is read
};

// The set of shards to count: one kind, as shard-tool resolved the command line.
struct StatsInput {
  std::string given;                 // as the user named it, for the report
  std::string format;                // kFormatDocs, kFormatBertHdf5, kFormatBertHdf5Binned, kFormatMegatron, kFormatLlmc
  std::optional<Manifest> manifest;  // when the set has one
  std::string manifest_path;
  std::vector<std::string> files;    // without a manifest: the shards (a Megatron shard by its .bin or prefix)
};

// The statistics as JSON, its keys in the order the tables print them.
nlohmann::ordered_json shard_stats(const StatsInput& input, const ShardStatsOptions& options,
                                   const StatsTextTools& tools = {});

// The JSON as tables for a terminal.
void print_shard_stats(const nlohmann::ordered_json& stats, std::ostream& out);

// A dedup report (datagen/dedup's dedup-report.jsonl): JSON Lines, one removed document a line
// with its "id" (string or integer) and optionally "cluster", "kind" ("exact", "near") and the rest
// dedup writes (source, file, record, kept, …), which is not needed here. Empty lines are
// skipped; an Error names the file and line of a bad one. Documents are matched by id.
struct DedupReport {
  std::vector<std::string> removed_ids;       // in report order
  uint64_t clusters = 0;                       // distinct "cluster" values (lines without one: each its own)
  std::map<std::string, uint64_t> by_kind;     // "exact", "near", … ("" for lines without a kind)
  uint64_t repeated_ids = 0;                   // removed documents whose id an earlier line has (other sources)
};
DedupReport read_dedup_report(const std::string& path);

}  // namespace pretrain
