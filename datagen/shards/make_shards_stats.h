// make-pretraining-shards' statistics: what the stages counted, printed at the end and written
// into every manifest's "stats", and each stage's wall and CPU time (StageClock).
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace pretrain {

struct MakeShardsStats {
  uint64_t documents = 0, sentences = 0, tokens = 0;  // the tokenized corpus
  uint64_t train_documents = 0, valid_documents = 0;
  uint64_t instances = 0, valid_instances = 0;        // bert: instances; gpt: sequences (documents)
  uint64_t packed_rows = 0, valid_packed_rows = 0;    // bert --pack: the shards' records (rows of instances)
  uint64_t instance_tokens = 0;                       // bert: non-padding tokens; gpt: tokens written
  uint64_t predictions = 0, masked_as_mask = 0, masked_kept = 0, masked_random = 0;
  uint64_t random_next = 0, forced_random_next = 0;  // B random; random because the chunk had one sentence
  uint64_t document_passes = 0, short_document_passes = 0, short_target_instances = 0;
  std::vector<uint64_t> length_histogram;             // bert: instances per length bin (seq_len/16 wide)
  uint64_t shards = 0;
  double seconds = 0;
  // Wall time per stage: tokenize (incl. sentence splitting), instances (bert: generate and spill),
  // write (bert: shuffle buckets and write shards; gpt: write shards).
  double tokenize_seconds = 0, instances_seconds = 0, write_seconds = 0;
  // The same stages in CPU seconds of the whole process (user + system): on a shared machine the
  // least distorted measure of work, and CPU / wall is how many threads a stage kept busy.
  double tokenize_cpu_seconds = 0, instances_cpu_seconds = 0, write_cpu_seconds = 0;
  nlohmann::json to_json(int seq_len) const;          // with the derived shares
};

class Communicator;

// The counts BERT's writer takes from the records (instance tokens, predictions and how they
// were masked, NSP and short-target counts, the length histogram): what one shard adds, as
// JSON (a shard's record of them, so that a resumed run whose spill bucket is gone still counts a
// kept shard), and adding one set to another.
nlohmann::json record_counts_json(const MakeShardsStats& counts);
MakeShardsStats record_counts_from_json(const nlohmann::json& j);  // throws on a malformed one
void add_record_counts(MakeShardsStats& to, const MakeShardsStats& from);

// Under mpirun each rank's BERT writer counts the records of its own shards: adds to `stats` what
// the other ranks counted since `before` (instance tokens, predictions and how they were masked,
// NSP and short-target counts, the length histogram), so every rank holds the one-process counts.
void sum_record_counts(MakeShardsStats& stats, const MakeShardsStats& before, const Communicator& ranks);

// Wall and CPU time of one stage, from construction; add_to() adds them to the statistics' pair.
class StageClock {
 public:
  StageClock();
  double wall_seconds() const;
  void add_to(double& wall, double& cpu) const;

 private:
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

}  // namespace pretrain
