// make-pretraining-shards' writer side: the shards of one split (train in <output>/, valid in
// <output>/valid/), numbered files train-00000<ext>… committed one at a time, the manifest
// rewritten after each (complete = false), so that --resume keeps the shards an interrupted run
// finished and whose checksums still verify, and writes the others.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/manifest.h"

namespace pretrain {

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
  // Shards of `sizes` records; with output.resume, those an earlier manifest of the same key
  // lists, up to the first that fails verification, are kept.
  ShardSeries(const SplitOutput& output, const ShardFormat& format, std::vector<uint64_t> sizes);

  size_t count() const { return sizes_.size(); }
  uint64_t size(size_t shard) const { return sizes_[shard]; }
  bool kept(size_t shard) const { return shard < entries_.size(); }  // written by an earlier run
  std::string name(size_t shard) const;
  std::string path(size_t shard) const;

  // The shard's file(s) are in place: lists it (with the checksums of its companion files, such
  // as Megatron's .idx) and rewrites the manifest, still incomplete.
  void committed(size_t shard, uint64_t records, const std::map<std::string, std::string>& companions = {});
  // Every shard is written: the manifest, complete, with the run's statistics.
  void finish(const nlohmann::json& stats);

 private:
  std::string dir_, extension_;
  Manifest base_;
  std::vector<uint64_t> sizes_;
  std::vector<ShardEntry> entries_;
  int stop_after_;
  int written_ = 0;
};

}  // namespace pretrain
