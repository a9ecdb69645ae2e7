// Inside the loader: where samples come from (the shards a config names, resolved), the layout of
// one host ring slot, and the interface every source implements. Not part of the public API.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/manifest.h"
#include "formats/megatron.h"
#include "loader/loader.h"

namespace pretrain {

// One entry of LoaderConfig::sources, resolved to files of one format.
struct ShardSet {
  std::string origin;               // the config entry, for messages
  std::string format;               // kFormatBertHdf5 | kFormatMegatron | kFormatLlmc
  std::vector<std::string> files;   // .hdf5 paths, Megatron prefixes, llm.c .bin paths
  std::optional<Manifest> manifest;  // when the entry was (or sat beside) a manifest
  int64_t bin_length = 0;  // one bin of a --bin-size output: its records' padded length; 0: not a bin
};

// Manifests (and directories holding one) give their shards, checked against the manifest's size
// (a binned split's manifest gives one set per bin, each with its bin_length)
// and, with verify_checksums, xxh3; other entries are globs or files, typed by their contents'
// names (.hdf5/.h5, .idx or a .bin with an .idx beside it, else an llm.c .bin). Throws UsageError
// when an entry matches nothing and Error when it does not fit `kind`.
std::vector<ShardSet> resolve_sources(const LoaderConfig& config);

// Byte layout of one host slot: arrays of one batch, each 64-byte aligned. Token ids are uint16
// when the vocabulary fits (`token_dtype`), else int32; positions uint16, small fields uint8.
struct SlotLayout {
  ModelKind kind = ModelKind::bert;
  int64_t batch_size = 0, seq_len = 0, max_predictions = 0;
  int64_t max_pack = 0;  // packed shards: instances per row (0: not packed)
  TensorDType token_dtype = TensorDType::i32;  // u16 or i32
  int64_t vocab_size = 0;                      // ids must be < this (0: unchecked)
  // BERT arrays: [B, S] input_ids (token), segment_ids (u8), input_mask (u8); [B, P]
  // masked_lm_positions (u16), masked_lm_ids (token); [B, nsp_slots()] next_sentence_labels (u8
  // holding int8: −1 marks a packed row's empty slot). Packed: [B, S] position_ids (u16),
  // sequence_ids (u8); [B, K] next_sentence_positions (u16).
  size_t input_ids = 0, segment_ids = 0, input_mask = 0, masked_lm_positions = 0,
         masked_lm_ids = 0, next_sentence_labels = 0;
  size_t position_ids = 0, sequence_ids = 0, next_sentence_positions = 0;
  // GPT: [B, S + 1] tokens (token); tokens and targets are the two overlapping views of it.
  size_t tokens = 0;
  size_t bytes = 0;

  static SlotLayout make(ModelKind kind, int64_t batch_size, int64_t seq_len,
                         int64_t max_predictions, int64_t vocab_size, bool narrow_tokens, int64_t max_pack = 0);
  // The same batch at a shorter length (a binned source's shorter bins), inside this slot; the
  // predictions stay as many (NVIDIA's layout keeps max_predictions in every bin, even past a
  // short bin's length: the unused ones are zero).
  SlotLayout shorter(int64_t length) const;
  int64_t token_row() const { return kind == ModelKind::gpt ? seq_len + 1 : seq_len; }
  int64_t nsp_slots() const { return max_pack > 0 ? max_pack : 1; }  // NSP labels per row
};

// One host slot being filled: sources write rows through this, which narrows ids and checks them.
class HostRows {
 public:
  HostRows(const SlotLayout& layout, uint8_t* base) : layout_(layout), base_(base) {}
  const SlotLayout& layout() const { return layout_; }
  uint8_t* base() const { return base_; }
  template <typename T>
  T* array(size_t offset) const { return reinterpret_cast<T*>(base_ + offset); }

  // BERT row `row` from the stored fields: seq_len entries, and `predictions` masked_lm entries
  // (the shard's max_predictions; the slot's may be larger, for dynamic masking: zero-padded).
  // Throws Error (message without the file: the caller adds it) when an id is not below
  // vocab_size, a field does not fit its slot type, or a position is outside [0, seq_len).
  void put_bert(int64_t row, const int32_t* input_ids, const int8_t* segment_ids,
                const int8_t* input_mask, const int32_t* masked_lm_positions,
                const int32_t* masked_lm_ids, int64_t predictions, int8_t next_sentence_label) const;
  // The rest of a packed row (after put_bert): seq_len position_ids and sequence_ids, max_pack
  // [CLS] positions and NSP labels. Throws Error when a value is outside its range (the caller
  // adds the file) or the slot is not packed.
  void put_packing(int64_t row, const int32_t* position_ids, const int8_t* sequence_ids,
                   const int32_t* next_sentence_positions, const int8_t* next_sentence_labels) const;
  // GPT: tokens [column, column + tokens.size) of row `row`; same checks on ids.
  void put_tokens(int64_t row, int64_t column, const TokenSpan& tokens) const;
  void put_tokens(int64_t row, int64_t column, const uint32_t* tokens, size_t count) const;
  void put_tokens(int64_t row, int64_t column, const uint16_t* tokens, size_t count) const;

 private:
  const SlotLayout& layout_;
  uint8_t* base_;
};

// A dataset as the loader sees it: samples_per_epoch() samples, put in a seeded order per epoch
// by the source itself. read() is called concurrently from the pipeline's workers.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual uint64_t samples_per_epoch() const = 0;
  // Sample `position` of epoch `epoch`'s order into row `row`. Thread-safe. Errors name the file
  // and record.
  virtual void read(uint64_t epoch, uint64_t position, const HostRows& out, int64_t row) const = 0;
  // A number that identifies the sample at `position` (the same across epochs): dynamic masking
  // keys its random choices by (seed, epoch, this).
  virtual uint64_t sample_id(uint64_t epoch, uint64_t position) const = 0;
  // Called in order by the planning stage when consumption reaches `position`: the place to start
  // loading what comes next (BERT decodes the next window in the background).
  virtual void will_read(uint64_t epoch, uint64_t position) { (void)epoch, (void)position; }
  // xxh3 of what defines the samples and their order (files, sizes, options; not the seed).
  virtual uint64_t fingerprint() const = 0;
  virtual int64_t seq_len() const = 0;
  virtual int64_t max_predictions() const { return 0; }
  virtual int64_t max_pack() const { return 0; }  // packed BERT shards' instances per row
  // Largest id + 1 the data may hold (from the manifest's tokenizer), 0 when unknown.
  virtual int64_t vocab_size() const = 0;
  virtual std::map<std::string, int64_t> special_ids() const { return {}; }
  // The epoch's order as runs that no global batch straddles, each with its samples' length: one
  // run of every sample, or for a binned source one run per bin draw.
  struct Run {
    uint64_t samples = 0;
    int64_t seq_len = 0;
  };
  virtual std::vector<Run> runs(uint64_t /*epoch*/) const { return {{samples_per_epoch(), seq_len()}}; }
};

struct BertSourceOptions {
  std::vector<ShardSet> sets;  // concatenated in order
  int64_t seq_len = 0;         // 0: the shards'
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t shuffle_window = kDefaultShuffleWindow;
  // Runs a task in the background (the loader's arena); empty: the next window is not decoded
  // ahead of time. The source waits for its tasks when it is destroyed.
  std::function<void(std::function<void()>)> background;
};
std::unique_ptr<SampleSource> make_bert_source(const BertSourceOptions& options);

// LDDL's binned loading over the bins of --bin-size outputs (sets with bin_length; bins of the
// same length from several outputs are one bin). Each epoch is a sequence of draws: a bin picked by
// a seeded draw weighted by the samples it has left (CounterRng keyed by seed and epoch, so every
// rank draws alike), then the next `group` samples of that bin's own shuffled order (a BERT source
// per bin). `group` is the global batch × the batches a step takes, so every rank and every
// micro-batch of a step reads one bin, at its length. A bin's last draw may be short: with
// drop_short it is left out of the epoch (as drop_last leaves out the tail), else it is a run of
// its own and every sample comes once per epoch.
struct BinnedSourceOptions {
  BertSourceOptions bert;  // every bin's sets; seed, shuffle, shuffle_window (shared by the bins), background
  uint64_t group = 1;
  bool drop_short = true;
};
std::unique_ptr<SampleSource> make_binned_bert_source(const BinnedSourceOptions& options);

struct GptSourceOptions {
  // One dataset per set (Megatron .bin/.idx prefixes or llm.c files; a set's files are
  // concatenated into one dataset). More than one set needs `weights` (one per set): Megatron's
  // BlendedDataset. One set: weights ignored.
  std::vector<ShardSet> sets;
  std::vector<double> weights;
  int64_t seq_len = 0;  // required
  uint64_t seed = 0;
  bool shuffle = true;
  bool add_extra_token = true;
  int64_t samples_per_epoch = 0;  // blends: 0 = sum of the datasets'
};
std::unique_ptr<SampleSource> make_gpt_source(const GptSourceOptions& options);

}  // namespace pretrain
