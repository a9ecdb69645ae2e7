// BERT pretraining shards in NVIDIA DeepLearningExamples' HDF5 layout: what its
// create_pretraining_data.py writes with h5py and its run_pretraining.py reads.
//
//   input_ids            int32 [N, seq_len]          input_mask   int8 [N, seq_len]
//   segment_ids          int8  [N, seq_len]          next_sentence_labels int8 [N]
//   masked_lm_positions  int32 [N, max_predictions]  masked_lm_ids int32 [N, max_predictions]
//
// gzip-compressed chunked datasets, created in that order, no attributes. Padding is 0.
//
// Packed shards (make-pretraining-shards --pack, docs/architecture.md "BERT shards") hold up to max_pack
// instances per row, one after the other, and four more datasets after those six:
//
//   position_ids  int32 [N, seq_len]   each token's position within its instance (0 at each [CLS])
//   sequence_ids  int8  [N, seq_len]   1..k: the instance a token belongs to; 0: padding
//   next_sentence_positions      int32 [N, max_pack]  each instance's [CLS] position (0: no instance)
//   packed_next_sentence_labels  int8  [N, max_pack]  each instance's NSP label (−1: no instance)
//
// The six NVIDIA datasets stay valid for an unpacked reader: input_mask is 1 on every instance's
// tokens, masked_lm_positions are positions in the packed row (ascending), next_sentence_labels
// is the first instance's label. Attention must stay inside an instance (sequence_ids), which an
// unpacked reader does not know: it reads the file but trains on the rows as one sequence each.
// Debian's HDF5 1.10.8 runs every call under one global lock, so the writer deflates chunks on
// oneTBB workers and stores them with direct chunk writes, and the reader fetches raw chunks and
// inflates them itself; HDF5 only moves compressed bytes.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

// One instance as datagen builds it. The int8 fields are held as int32 so the writer can check
// that they fit. Shorter fields are zero-padded: input_ids/input_mask/segment_ids to seq_len (all
// three the same length), masked_lm_positions/masked_lm_ids to max_predictions (both the same).
struct BertRecord {
  std::vector<int32_t> input_ids, input_mask, segment_ids;
  std::vector<int32_t> masked_lm_positions, masked_lm_ids;
  int32_t next_sentence_label = 0;
  // Packed rows only (empty otherwise): position_ids and sequence_ids zero-padded to seq_len,
  // next_sentence_positions (0-padded) and packed_next_sentence_labels (−1-padded) to max_pack.
  std::vector<int32_t> position_ids, sequence_ids, next_sentence_positions, packed_next_sentence_labels;
};

// `size` records as stored: struct of arrays, row-major, exactly as the datasets hold them.
struct BertBatch {
  int64_t size = 0, seq_len = 0, max_predictions = 0;
  int64_t max_pack = 0;  // instances per row of a packed shard; 0: not packed
  std::vector<int32_t> input_ids;                          // size * seq_len
  std::vector<int8_t> input_mask, segment_ids;             // size * seq_len
  std::vector<int32_t> masked_lm_positions, masked_lm_ids;  // size * max_predictions
  std::vector<int8_t> next_sentence_labels;                // size
  // Packed only (empty when max_pack is 0).
  std::vector<int32_t> position_ids;                 // size * seq_len
  std::vector<int8_t> sequence_ids;                  // size * seq_len
  std::vector<int32_t> next_sentence_positions;      // size * max_pack
  std::vector<int8_t> packed_next_sentence_labels;   // size * max_pack (new elements −1)

  BertBatch() = default;
  BertBatch(int64_t n, int64_t seq, int64_t max_pred, int64_t pack = 0) { resize(n, seq, max_pred, pack); }
  void resize(int64_t n, int64_t seq, int64_t max_pred, int64_t pack = 0);  // new elements are 0 (labels −1)
  BertRecord record(int64_t i) const;                     // row i widened to a BertRecord
  void set(int64_t i, const BertRecord& r);               // zero-pads; no range checks on values
};

// The gzip level our shards get unless asked otherwise. With libdeflate (formats/deflate.h) level 1
// is within ~3% of the size of zlib's level 4, NVIDIA's files (h5py's compression="gzip"), for a
// third of zlib's CPU time; scripts/bench/deflate.sh measures both.
inline constexpr int kDefaultGzipLevel = 1;

struct BertShardOptions {
  // Records per chunk (every chunk holds whole rows). 0 picks one so that an input_ids chunk is
  // about 256 KiB (512 records at seq_len 128); see bert_hdf5_writer.cpp for why.
  int64_t records_per_chunk = 0;
  int gzip_level = kDefaultGzipLevel;  // 0–9, as gzip's
  // Chunks compressed concurrently (0: kDefaultInFlightChunks, 6 columns each, so 48 deflate tasks
  // at a time). Memory is bounded by 2 * in_flight chunks whatever N is. The file's bytes depend on
  // this number (and never on the thread count).
  int in_flight_chunks = 0;
  static constexpr int kDefaultInFlightChunks = 8;
  // Packed shards: instances per row (the four extra datasets are written); 0: NVIDIA's six only.
  int64_t max_pack = 0;
};

// Streams records into a shard. Output goes to `path`.tmp-<pid> and appears under `path` only
// on commit(); destroying an uncommitted writer removes the temp file. Not thread-safe.
class BertShardWriter {
 public:
  BertShardWriter(const std::string& path, int64_t seq_len, int64_t max_predictions,
                  const BertShardOptions& options = {});
  ~BertShardWriter();
  BertShardWriter(const BertShardWriter&) = delete;
  BertShardWriter& operator=(const BertShardWriter&) = delete;

  // Throws Error naming the file and record when a value does not fit (input_mask, segment_ids,
  // next_sentence_label outside int8; a position outside [0, seq_len)) or a field is too long.
  void append(const BertRecord& record);
  void append(const BertBatch& batch);  // batch.seq_len/max_predictions must match the shard

  int64_t size() const;  // records appended so far
  const std::string& path() const;
  // Writes the remaining chunks, sets every extent to size(), closes and renames. Call once.
  void commit();
  void close() { commit(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How the reader gets values out of the file.
enum class BertReadPath {
  automatic,  // raw chunks + our own zlib where the layout allows it, hyperslabs elsewhere
  hyperslab,  // always H5Dread with HDF5's own filters and type conversion (the reference path)
};

// Read-only access to a shard written by us, by NVIDIA's script or by anyone with h5py: any chunk
// shape, any integer width (converted through HDF5, failing on values that do not fit).
// One reader is not thread-safe; open one per thread. read_range inflates chunks on oneTBB workers.
class BertShardReader {
 public:
  explicit BertShardReader(const std::string& path, BertReadPath read_path = BertReadPath::automatic);
  ~BertShardReader();
  BertShardReader(BertShardReader&&) noexcept;
  BertShardReader& operator=(BertShardReader&&) noexcept;

  const std::string& path() const;
  int64_t size() const;
  int64_t seq_len() const;
  int64_t max_predictions() const;
  int64_t max_pack() const;  // a packed shard's instances per row; 0: not packed
  // True when every dataset is read through raw chunks (whole file on the fast path).
  bool raw_chunk_path() const;

  BertRecord read(int64_t index);
  // Records [begin, begin+count) into `out` (resized). Throws when the range is outside [0, size()).
  void read_range(int64_t begin, int64_t count, BertBatch& out);
  // From now on read_range fills only these datasets (by name; a packed one in an unpacked shard
  // is ignored) and leaves the others as BertBatch::resize() makes them: a pass that needs a few
  // columns (shard-tool stats) inflates only theirs. UsageError for a name no shard has.
  void read_only(std::span<const std::string_view> datasets);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Number of records (validates the layout like the reader does).
uint64_t count_bert_records(const std::string& path);

// What is wrong with row i of a packed batch (batch.max_pack > 0), "" when nothing: sequence_ids
// runs 1..k one after the other from position 0, then padding (0) only; input_mask is 1 exactly
// on the instances' tokens; position_ids count from 0 in each run and are 0 on padding;
// next_sentence_positions[j] is the start of run j + 1 (0 past k); packed_next_sentence_labels is
// 0 or 1 up to k, −1 past it, and next_sentence_labels the first's; masked_lm_positions ascend,
// each inside an instance and not on its [CLS], then 0-padding. shard-tool verify's check.
std::string packed_row_problem(const BertBatch& batch, int64_t i);

// Human-readable summary for shard-tool inspect: kind, N, seq_len, max_predictions, each dataset's
// dtype, shape, chunk shape and compression, then the first `max_records` records.
void inspect_bert_shard(const std::string& path, std::ostream& out, int max_records);

}  // namespace pretrain
