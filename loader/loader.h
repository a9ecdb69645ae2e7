// The data loader: training batches from our shards (or NVIDIA's, Megatron's, llm.c's), already on
// the device when the trainer asks for them.
//
//   sampler ▶ readers ▶ collate (+ dynamic masking) ▶ pinned host ring ▶ device copy ▶ next()
//
// * Sampling. Each epoch's samples are put in a seeded order (the source decides how: BERT shards
//   are shuffled as whole files and then record by record inside windows of files; GPT samples use
//   Megatron's document/sample/shuffle indices). The order is cut into global batches of
//   batch_size × world_size samples and rank r takes samples [r·B, (r+1)·B) of each, as Megatron's
//   pretraining sampler does (a binned source's order comes in runs, one per bin draw, and no
//   global batch straddles two); so over all ranks every sample comes exactly once per epoch, and the
//   state (epoch, samples consumed) means the same thing at any world size with the same global
//   batch. Every random choice is keyed by (seed, epoch, sample): batches never depend on the
//   number of workers or on thread timing.
// * Prefetch. A driver thread plans batches into a ring of `prefetch` host slots (pinned memory
//   when CUDA is on), reads and collates them with oneTBB (parallel_for over their rows; it is the
//   only thread that ever waits for a slot, so no oneTBB worker is held), and copies them in order
//   into as many device slots; token ids travel as uint16 when the vocabulary fits and are widened
//   on the device by a kernel shared with the CPU path (loader/widen.h). next() waits on the
//   slot's "ready" event only; a slot is reused once the Batch handed out for it is released (a
//   "consumed" event recorded on the consumer's stream).
// * Errors. An exception in a worker (a corrupt shard, an id that does not fit) surfaces from next()
//   with the file and record; destroying a Loader mid-epoch stops the pipeline and never hangs.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/model_kind.h"
#include "formats/bert_defaults.h"

namespace pretrain {

enum class TensorDType : uint8_t { u8, i8, u16, i32, i64 };
size_t dtype_size(TensorDType dtype);
const char* dtype_name(TensorDType dtype);  // numpy's names: "uint8", "int32", …

// A view of a batch tensor (at most 2-D, row-major, contiguous). `device` is -1 for host memory,
// else the CUDA device index. The memory belongs to the Batch that holds the view.
struct Tensor {
  void* data = nullptr;
  TensorDType dtype = TensorDType::i32;
  int ndim = 0;
  std::array<int64_t, 2> shape{0, 0};
  int device = -1;

  int64_t numel() const { return ndim == 0 ? 0 : ndim == 1 ? shape[0] : shape[0] * shape[1]; }
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
  bool defined() const { return data != nullptr; }
  // Host tensors only; throws Error when T is not the stored type or the tensor is on a GPU.
  template <typename T>
  T* as() const;
};

// Dynamic masking, as NVIDIA's LDDL does it: every non-special token of a sample is picked with
// probability `probability`, at most `max_predictions` per sample (a seeded random subset when more
// are picked); a picked token becomes [MASK] 80% of the time, a random id 10%, itself 10%. The
// choice is a function of (seed, epoch, sample) only. The stored masks of the shards are undone
// first (masked_lm_ids put back at masked_lm_positions), so statically masked shards work too.
struct DynamicMasking {
  bool enabled = false;
  double probability = kBertMaskedLmProb;
  int64_t max_predictions = 0;  // 0: the shards' max_predictions
  // Ids, from the manifest's tokenizer when these are -1 / 0 / empty ("mask" or "[MASK]"; every
  // special id but [UNK] is never masked); required otherwise.
  int64_t mask_id = -1;
  int64_t vocab_size = 0;
  std::vector<int64_t> special_ids;  // never masked ([CLS], [SEP], [PAD], …); padding never is
};

// BERT: the records shuffled together unless LoaderConfig::shuffle_window says otherwise.
inline constexpr int64_t kDefaultShuffleWindow = 1 << 16;

struct LoaderConfig {
  // Shards: manifest.json files, directories holding one, shard files (.hdf5, Megatron .bin/.idx
  // or prefix, llm.c .bin) or globs. Manifests are verified against what they list (sizes, kind,
  // seq_len); their checksums are checked when verify_checksums is set.
  std::vector<std::string> sources;
  // GPT only: blend the sources as Megatron's BlendedDataset does, source i with weight i (one per
  // source, normalised). Empty: the sources are concatenated into one dataset.
  std::vector<double> weights;
  ModelKind kind = ModelKind::bert;
  int64_t batch_size = 32;  // per rank
  // GPT: tokens per sample (required; each sample reads seq_len + 1 tokens). BERT: 0 takes the
  // shards' seq_len, anything else must match it.
  int64_t seq_len = 0;
  int rank = 0, world_size = 1;
  uint64_t seed = 1234;
  bool shuffle = true;
  // true: every rank gets only full batches (the tail of the epoch, fewer than world_size ×
  // batch_size samples, is left out). false: the tail is split as evenly as possible over the
  // ranks, so every sample comes exactly once per epoch and the last batch may be short.
  bool drop_last = true;
  uint64_t epochs = 0;  // next() ends for good after this many epochs; 0 = no end
  int workers = 2;      // threads reading and collating (a oneTBB arena of this many)
  int prefetch = 4;     // batches in flight: the ring's depth (host and device slots each)
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  bool pin_memory = true;      // host slots from cudaHostAlloc (CUDA builds with a GPU)
  bool narrow_tokens = true;   // ship ids as uint16 when the vocabulary has at most 65536 ids
  TensorDType id_dtype = TensorDType::i32;  // i32 or i64 (torch wants int64 class targets)
  // BERT: records shuffled together. Whole shards are taken in shuffled order until a window has
  // at least this many records; a window is decoded in memory as a whole (HDF5 chunks are gzip:
  // reading records one by one would inflate a chunk per record). Memory: about 3 windows.
  int64_t shuffle_window = kDefaultShuffleWindow;
  // GPT: Megatron's add_extra_token_to_sequence (samples of seq_len + 1 tokens that overlap by one).
  bool add_extra_token = true;
  // GPT: samples per epoch of a blend; 0 = the sum of the sources' samples.
  int64_t samples_per_epoch = 0;
  bool verify_checksums = false;
  // Length-binned BERT sources (make-pretraining-shards --bin-size outputs): LDDL's loading, each
  // bin draw taking this many global batches from one bin (a trainer passes its gradient
  // accumulation, so all micro-batches of a step share one bin). Each batch is then at its bin's
  // length (Batch tensors [size, bin length]); seq_len() is the longest bin's. drop_last leaves out
  // each bin's last, short draw of an epoch; without it every sample comes once per epoch.
  int64_t bin_batches = 1;
  DynamicMasking masking;
  // CUDA: the stream the consumer runs on (a cudaStream_t), 0 = the legacy default stream.
  // next() makes it wait on the batch's copy; releasing the Batch records "consumed" on it.
  void* consumer_stream = nullptr;
};

// Where a loader is: enough to resume exactly. `seed` and `fingerprint` (of the sources, kind,
// seq_len and global batch) let restore() refuse a state from another run.
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t consumed = 0;  // samples of this epoch handed out over all ranks (global batches × G)
  uint64_t seed = 0;
  uint64_t fingerprint = 0;
  std::string to_json() const;
  static LoaderState from_json(const std::string& text);  // throws Error on a malformed state
  bool operator==(const LoaderState&) const = default;
};

struct LoaderStats {
  uint64_t batches = 0, samples = 0;
  double seconds = 0;          // since the first next()
  double samples_per_second = 0;
  double wait_seconds = 0;     // time next() spent waiting for a batch
  double wait_ms_per_batch = 0;
  double read_seconds = 0;     // worker time reading and collating (summed over workers)
};

// One batch on the loader's device. Copies share the slot; the slot goes back to the ring when
// the last copy is destroyed (or release() is called), so keep a Batch only as long as its step.
struct Batch {
  int64_t size = 0;       // samples (rows); the last batch of an epoch may be short
  uint64_t epoch = 0;
  uint64_t index = 0;     // batch number within the epoch (this rank's)
  ModelKind kind = ModelKind::bert;
  // BERT: [size, seq_len] input_ids, segment_ids, input_mask; [size, max_predictions]
  // masked_lm_positions, masked_lm_ids (0-padded, NVIDIA's layout); mlm_labels [size, seq_len]
  // (the id at masked positions, -1 elsewhere); next_sentence_labels [size].
  // Packed shards (make-pretraining-shards --pack; K = their max_pack instances per row) add
  // position_ids [size, seq_len] (restarting at each instance), sequence_ids [size, seq_len]
  // (1..k: the instance a token is in, 0: padding; attention stays between equal ids) and
  // next_sentence_positions [size, K] (each instance's [CLS], 0: no instance), and their
  // next_sentence_labels are [size, K] (−1: no instance).
  Tensor input_ids, segment_ids, input_mask, masked_lm_positions, masked_lm_ids, mlm_labels,
      next_sentence_labels;
  Tensor position_ids, sequence_ids, next_sentence_positions;  // packed only
  bool packed() const { return sequence_ids.defined(); }
  // GPT: tokens and targets [size, seq_len]; targets are tokens shifted by one.
  Tensor tokens, targets;

  // Named tensors of this kind, in the order above.
  std::vector<std::pair<std::string, Tensor>> tensors() const;
  void release() { lease.reset(); }
  std::shared_ptr<void> lease;  // the ring slot; internal
};

class Loader {
 public:
  explicit Loader(LoaderConfig config);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch of the current epoch, or nullopt once the epoch is done (the call after that
  // starts the next epoch; prefetching runs across epoch boundaries). nullopt for good after
  // config.epochs epochs. Rethrows a worker's error. Throws Error when every ring slot is still
  // held by the caller's Batches (it would wait forever).
  std::optional<Batch> next();

  // Where the consumer is: the batches returned so far (prefetched ones do not count).
  LoaderState state() const;
  // Continues from `state` (drops whatever was prefetched): the batches that follow are exactly
  // those an uninterrupted run yields after the state was taken.
  void restore(const LoaderState& state);

  LoaderStats stats() const;
  const LoaderConfig& config() const;
  int64_t seq_len() const;
  int64_t max_predictions() const;  // BERT
  int64_t max_pack() const;  // packed BERT shards: instances per row (K); 0: not packed
  int64_t vocab_size() const;       // 0 when unknown
  uint64_t samples_per_epoch() const;  // over all ranks
  uint64_t batches_per_epoch() const;  // this rank's
  // Special ids from the manifest's tokenizer ("[CLS]" → 101, …); empty when there is none.
  const std::map<std::string, int64_t>& special_ids() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pretrain
