// make-pretraining-shards' writer side: the shards of one split (train in <output>/, valid in
// <output>/valid/), numbered files train-00000<ext>… committed one at a time, the manifest
// rewritten after each (complete = false), so that --resume keeps the shards an interrupted run
// finished and whose checksums still verify, and writes the others.
//
// Under mpirun the ranks share a series: rank r writes the shards [r·n/N, (r+1)·n/N) of n, and lists
// each it commits in <commits_dir>/rank-R.json (a manifest of its shards: one file per rank, so no
// two ranks write one file); rank 0 writes manifest.json, incomplete at the start and complete once
// every rank's list is gathered. --resume (at any N, one process included) keeps every shard the
// manifest or a rank's list names whose checksums verify, not only a prefix.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/manifest.h"

namespace pretrain {

class Communicator;

// One split's output, as the stage that writes it gets it.
struct SplitOutput {
  bool valid = false;         // the held-out split (its records count as valid_instances)
  std::string dir;
  int num_shards = 1;
  // What made the shards (tokenizer, tool, args, seed, the run's key in extra["key"]); the
  // series adds what they are (ShardFormat), the shards and the statistics.
  Manifest manifest;
  bool resume = false;        // keep the verified shards of an earlier run with the same key
  int stop_after_shards = 0;  // tests: stop as a kill would after this many commits (0: never)
  const Communicator* ranks = nullptr;  // the ranks that share the writing (mpirun); null: this process alone
  std::string commits_dir;    // the ranks' lists of committed shards (in <output>/.work); empty: none
  void check() const;  // UsageError: num_shards below 1 (naming --num-shards), or no dir
};

// What the stage writes.
struct ShardFormat {
  std::string name;       // the manifest's format: kFormatBertHdf5, kFormatMegatron, kFormatLlmc
  std::string extension;  // of the shard files: ".hdf5", ".bin", ".llmc.bin"
  int64_t seq_len = 0, max_predictions = 0;  // bert
};

// Thrown after stop_after_shards commits.
struct MakeShardsInterrupted : Error {
  using Error::Error;
};

// n records into k shards of equal size, the first n % k one larger.
std::vector<uint64_t> equal_sizes(uint64_t n, int k);

class ShardSeries {
 public:
  // Shards of `sizes` records; with output.resume, those an earlier run of the same key listed
  // (manifest.json, or a rank's list) and whose files verify are kept. Under mpirun a collective.
  ShardSeries(const SplitOutput& output, const ShardFormat& format, std::vector<uint64_t> sizes);

  size_t count() const { return sizes_.size(); }
  uint64_t size(size_t shard) const { return sizes_[shard]; }
  // This rank's shards: [first_owned(), end_owned()) (all of them in one process).
  size_t first_owned() const { return first_owned_; }
  size_t end_owned() const { return end_owned_; }
  // Not written here: kept from an earlier run, or another rank's.
  bool kept(size_t shard) const { return shard < first_owned_ || shard >= end_owned_ || slots_[shard].has_value(); }
  // An owned shard kept from an earlier run: its entry (checksum included); null otherwise. (Asked
  // before this run commits any: then it is the earlier run's.)
  const ShardEntry* kept_entry(size_t shard) const { return slots_[shard] ? &*slots_[shard] : nullptr; }
  std::string name(size_t shard) const;
  std::string path(size_t shard) const;

  // The shard's file(s) are in place: lists it (with the checksums of its companion files, such
  // as Megatron's .idx) and rewrites the manifest, still incomplete. Returns its entry.
  const ShardEntry& committed(size_t shard, uint64_t records, const std::map<std::string, std::string>& companions = {});
  // Every shard is written: the manifest, complete, with the run's statistics (a collective under
  // mpirun: rank 0 writes it).
  void finish(const nlohmann::json& stats);

 private:
  bool lead() const;  // writes manifest.json: rank 0, or the one process
  bool distributed() const;
  void keep_verified();  // rank 0: the earlier run's shards that verify
  std::vector<ShardEntry> listed(size_t first, size_t end) const;
  std::string dir_, extension_, commits_dir_;
  Manifest base_;
  const Communicator* ranks_;
  std::vector<uint64_t> sizes_;
  std::vector<std::optional<ShardEntry>> slots_;  // the shards written so far, this run or before
  std::vector<ShardEntry> committed_here_;        // by this rank in this run (its list)
  size_t first_owned_ = 0, end_owned_ = 0;
  int stop_after_;
  int written_ = 0;
};

}  // namespace pretrain
