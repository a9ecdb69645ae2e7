// dedup: exact and near-duplicate removal over document shards. This is the tool's entry point;
// run_dedup() checks the options and runs the stages, each a module of its own:
//
//   dedup_inputs.h         the sources (-i: shard directories with a manifest, wikiextractor
//                          output, files, globs) → input files in input order
//   document_signatures.h  1. per input file, every document's exact hash (exact_hash.h), shingles
//                          (shingles.h), MinHash signature and band keys (minhash.h), in parallel, in
//                          order → <output>/.work/sig-NNNNN.bin (signature_file.h)
//   lsh_buckets.h          2. exact-hash runs, then band by band the runs of equal keys, joined in a
//                          union-find (union_find.h: a cluster keeps its first document in input
//                          order) → <output>/.work/clusters.bin
//   dedup_output.h         3. per input file, its kept documents → docs-NNNNN.jsonl.zst and its
//                          removed ones → a part of the report (dedup_report.h)
//   then manifest.json (document shards, kFormatDocs) and dedup-report.jsonl, and .work/ is removed.
//
// Determinism: documents are numbered in input order, every stage's result depends only on the
// inputs and options, so the output is byte-identical at any --threads and any number of ranks.
// Under mpirun (a filesystem every rank sees) rank r signs and writes the input files that start in
// bytes [r·total/N, (r+1)·total/N) of the inputs, takes the exact stage and the bands b with
// (1 + b) mod N = r (b from 0; the exact stage is task 0), and the ranks exchange the pairs that
// merged their sets (at most one per document per rank), which every rank replays.
// Resume: each stage's files are checkpoints stamped with a key of the inputs and options that made
// them; --resume keeps those that verify and redoes the rest, at any rank count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datagen/dedup/document_signatures.h"

namespace pretrain {

struct DedupOptions {
  std::vector<std::string> inputs;  // the sources, in the order that numbers documents
  std::string output_dir;
  SignOptions sign;                 // exact normalization, n-gram, bands, rows, seed, near on/off
  double jaccard_threshold = 0;     // > 0: join a candidate pair only at this estimated similarity
  int zstd_level = 1;
  bool resume = false;
  bool keep_work = false;           // keep <output>/.work
  std::vector<std::string> args;    // the command line, for the manifest
  // Tests: after this many checkpoints (signature files, output parts) this process kills itself
  // with SIGKILL, as an outside kill would. 0: never.
  int kill_after_checkpoints = 0;
};

struct DedupStats {
  uint64_t input_files = 0, documents = 0, kept = 0, removed_exact = 0, removed_near = 0;
  uint64_t clusters = 0;  // clusters of two or more documents
  uint64_t input_bytes = 0, output_shards = 0, output_bytes = 0;
  uint64_t candidate_pairs = 0, checked_pairs = 0;
  uint64_t resumed_signatures = 0, resumed_parts = 0;  // checkpoints a --resume kept
  double seconds = 0;
  nlohmann::json to_json() const;
};

inline constexpr const char* kDedupReportName = "dedup-report.jsonl";

// Throws UsageError for options that cannot work (before anything is written), Error for bad input.
DedupStats run_dedup(const DedupOptions& options);

}  // namespace pretrain
