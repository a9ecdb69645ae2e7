// dedup's stage 3: one input file's kept documents into its output shard, and its removed ones into
// its part of the report. Each input file with at least one kept document becomes one output shard
// (docs-NNNNN.jsonl.zst, numbered over those files in input order), its kept documents in their
// order; so the output is the input in input order less the removed documents, and the files are
// written independently (by any thread or rank) into the same bytes.
//
// The part is committed in three steps, each a rename: the report part, the shard, then the part's
// record (<output>/.work/out-NNNNN.json: the shard's entry and counts, stamped with the run's key),
// which --resume checks (and the shard against it) before it skips the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/manifest.h"
#include "datagen/dedup/dedup_inputs.h"
#include "datagen/dedup/lsh_buckets.h"

namespace pretrain {

class Progress;

inline constexpr const char* kDedupShardPrefix = "docs";  // docs-NNNNN.jsonl.zst

struct OutputPart {
  std::optional<ShardEntry> shard;  // none when every document of the file was removed
  uint64_t documents = 0, kept = 0, removed_exact = 0, removed_near = 0;
  uint64_t jsonl_bytes = 0;   // the shard's uncompressed JSON lines
  uint64_t report_bytes = 0;  // of the report part
  nlohmann::json to_json(uint64_t key) const;
  // The part a record holds, when its key is `key` and it reads; nullopt otherwise.
  static std::optional<OutputPart> from_json(const nlohmann::json& j, uint64_t key);
};

struct OutputFileJob {
  const DedupInputFile* file = nullptr;
  uint64_t file_index = 0;    // among all input files (the signature set's file)
  uint64_t identity = 0;      // verify_dedup_input's, to check against the signature file's key
  uint64_t key = 0;           // the signature file's key (the stamp of the part's record)
  std::string output_dir;
  uint64_t shard_index = 0;   // its shard's number, docs-NNNNN.jsonl.zst
  std::string shard_path;     // <output>/docs-NNNNN.jsonl.zst
  std::string report_path;    // <output>/.work/report-NNNNN.jsonl
  std::string record_path;    // <output>/.work/out-NNNNN.json
  int zstd_level = 1;
};

// Writes the job's shard, report part and record. roots[d] is document d's kept document;
// `inputs` are all input files (for the kept documents' sources and paths).
OutputPart write_output_part(const OutputFileJob& job, const std::vector<uint64_t>& roots, const SignatureSet& set,
                             const std::vector<DedupInputFile>& inputs, Progress* progress = nullptr);

// A part an earlier run committed, if its record has `key` and its shard and report part are
// there as the record says (size, and xxh3 for the shard); nullopt otherwise.
std::optional<OutputPart> committed_output_part(const OutputFileJob& job);

}  // namespace pretrain
