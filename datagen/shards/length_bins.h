// make-pretraining-shards --bin-size: BERT instances grouped by unpadded length (NVIDIA LDDL's
// sequence-length binning), so a loader can draw each batch from one bin and a trainer compute at
// that bin's length rather than at --seq-len. LDDL's rule, so results compare: seq_len / bin_size
// bins; an instance of n tokens ([CLS] A [SEP] B [SEP]) goes to bin (n − 1) / bin_size, whose
// shards are padded to (bin + 1) · bin_size.
//
// On disk (docs/architecture.md, "BERT shards"): each non-empty bin is a plain NVIDIA-layout shard set with
// its own manifest in <split>/bin-NN/ (h5py, NVIDIA's reader and `shard-tool verify` read it as
// any other), and the split's manifest.json has format "bert-hdf5-binned" and lists the bins:
// extra.bin_size and extra.bins = [{dir, bin, max_length, records, shards}]. Without --bin-size
// nothing changes: one series in the split's directory (packed rows, --pack, are written there
// too, its manifest saying extra.max_pack).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/manifest.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/shard_series.h"
#include "formats/bert_defaults.h"

namespace pretrain {

struct LengthBins {
  int seq_len = kBertSeqLen;
  int bin_size = 0;  // 0: no binning (one bin, padded to seq_len)

  bool binned() const { return bin_size > 0; }
  int count() const { return binned() ? seq_len / bin_size : 1; }
  // The bin of an instance of `length` tokens (1 ≤ length ≤ seq_len).
  int bin_of(size_t length) const { return binned() ? int((length - 1) / size_t(bin_size)) : 0; }
  int max_length(int bin) const { return binned() ? (bin + 1) * bin_size : seq_len; }
  // UsageError naming --bin-size: negative, not dividing --seq-len, or below 5 (the shortest
  // instance, [CLS] a [SEP] b [SEP], must fit the first bin).
  void check() const;
};

// The bins a BERT stage's options ask for (--seq-len, --bin-size).
LengthBins length_bins(const BertStageOptions& options);

// "bin-03": the directory of bin 3 inside its split's directory.
std::string bin_dir_name(int bin);

// One split's instances into its shards: with binning, bin by bin in increasing order (each bin's
// own series, --num-shards of them or as many as it has records, whichever is fewer); without,
// one series in the split's directory, exactly as before binning existed.
class BertSplitWriter {
 public:
  BertSplitWriter(const SplitOutput& split, const LengthBins& bins, const BertShardFillerOptions& filler,
                  MakeShardsStats& stats);
  // The next `records` instances given to add() are bin `bin`'s.
  void begin_bin(int bin, uint64_t records);
  // Under mpirun this rank's share of the bin begun: the records [first, second) of its `records`
  // in the order given (those of its own shards); add() takes only those. All of them in one process.
  std::pair<uint64_t, uint64_t> owned_records() const;
  void add(const SpillRecord& record);
  void add_pack(std::span<const SpillRecord> pack);  // packed shards (filler max_pack > 0): one row
  // BertShardFiller's, for the bin begun: whether the next rows' records are needed, passing them
  // without, and the rows of the bin's shards committed or kept so far.
  bool wants(uint64_t rows) const;
  void skip(uint64_t rows);
  uint64_t rows_done() const;
  void end_bin();
  // The split's manifest, complete, with the run's statistics.
  void finish(const nlohmann::json& stats);

 private:
  SplitOutput split_;
  LengthBins bins_;
  BertShardFillerOptions filler_options_;
  MakeShardsStats& stats_;
  Manifest split_manifest() const;  // what the split's manifest says of the bins as a whole

  std::vector<ManifestBin> summaries_;  // the non-empty bins written
  std::optional<ShardSeries> series_;
  std::optional<BertShardFiller> filler_;
  int bin_ = -1;
  uint64_t records_ = 0;
};

}  // namespace pretrain
