// make-pretraining-shards' BERT writer: instances (spill records), in the order given, dealt into
// a series' HDF5 shards (formats/bert_hdf5.h) and counted in the statistics. A shard an earlier
// run wrote (ShardSeries::kept) is counted but not written again; when that run recorded the
// shard's counts (counts_dir), its records need not be given at all (skip()), so the spill
// buckets they came from may be gone. Under mpirun a rank's filler takes the records of its own
// shards only, from ShardSeries::first_owned() on.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "datagen/shards/bert_instances.h"
#include "datagen/shards/bert_spill_record.h"
#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/rng_streams.h"
#include "datagen/shards/shard_series.h"
#include "formats/bert_defaults.h"
#include "formats/bert_hdf5.h"

namespace pretrain {

struct BertShardFillerOptions {
  int seq_len = kBertSeqLen;
  int max_predictions = kBertMaxPredictions;
  int compression_level = kDefaultGzipLevel;  // gzip level of the HDF5 chunks (0–9)
  TokenId32 mask_id = -1;     // [MASK], to count how each prediction was masked
  int histogram_seq_len = 0;  // the length histogram's range (0: seq_len); a bin's shards use the run's
  int max_pack = 0;           // --pack: instances per row, the packed datasets written; 0: not packed
  // Where each shard's record counts go once it is committed (<shard>.counts.json, with its
  // xxh3), and where a resumed run finds a kept shard's; empty: nowhere.
  std::string counts_dir;
  // UsageError, naming the command-line option, for a value out of range: seq_len [5, 65535] and
  // max_predictions [1, 255] (a spill record holds them in 16 and 8 bits), compression_level [0, 9].
  void check() const;
};

// What both BERT stages take (the counter-RNG stage adds its spill settings): Google's instance
// rules, the passes over the data, the seed and the gzip level.
struct BertStageOptions {
  BertInstanceOptions instances;  // seq_len, max_predictions, masked_lm_prob, short_seq_prob, whole_word_mask
  int dupe_factor = kBertDupeFactor;
  uint64_t seed = kDefaultShardSeed;
  int compression_level = kDefaultGzipLevel;
  int bin_size = 0;  // --bin-size: LDDL's length bins (length_bins.h); 0: none
  int max_pack = 0;  // --pack's --max-pack: instances per packed row (packing.h); 0: not packed
  // UsageError naming the command-line option: the filler's limits, masked_lm_prob in (0, 1],
  // short_seq_prob in [0, 1], dupe_factor at least 1, the bins' (LengthBins::check), max_pack in
  // [0, 127] and not with bins.
  void check() const;
};

// The series' manifest format for BERT shards of these options.
ShardFormat bert_shard_format(const BertShardFillerOptions& options);

class BertShardFiller {
 public:
  BertShardFiller(ShardSeries& series, const BertShardFillerOptions& options, MakeShardsStats& stats);
  void add(const SpillRecord& record);
  // Several instances as one packed row (options.max_pack > 0; SpillRecord::write_packed_row).
  void add_pack(std::span<const SpillRecord> pack);
  // Whether any of the next `rows` rows falls in a shard whose records this run must see: one it
  // writes, or a kept one whose counts were not recorded.
  bool wants(uint64_t rows) const;
  // Passes the next `rows` rows without their records (wants(rows) is false).
  void skip(uint64_t rows);
  // Rows of the series in the shards before the one being filled, all committed or kept.
  uint64_t rows_done() const { return rows_before_[shard_]; }
  // Commits the last shard (and any left empty).
  void finish();

 private:
  static constexpr int64_t kBatchRows = 256;  // rows handed to the writer at a time

  void count(const SpillRecord& record);
  // The shard the next row goes to; false when that shard is kept from an earlier run.
  bool next_row_written();
  BertShardWriter& writer();
  void flush();
  void next_shard();
  std::string counts_path(size_t shard) const;

  ShardSeries& series_;
  BertShardFillerOptions options_;
  MakeShardsStats& stats_;
  std::optional<BertShardWriter> writer_;
  BertBatch batch_;
  int64_t rows_ = 0;
  size_t shard_ = 0;
  uint64_t in_shard_ = 0;
  std::vector<uint64_t> rows_before_;                  // of each shard, and of the end
  std::vector<std::optional<MakeShardsStats>> known_;  // kept shards' recorded counts
  MakeShardsStats shard_counts_;                       // of the shard being filled
};

}  // namespace pretrain
