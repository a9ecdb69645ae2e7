// GPT samples: seq_len + 1 tokens each (tokens and targets are the two overlapping views), from
// Megatron .bin/.idx datasets or llm.c token files, one dataset per ShardSet, blended by weight.
//
// * Megatron datasets are sampled exactly as Megatron-LM's GPTDataset samples them (the indices
//   are in loader/megatron_index.h). Our epoch e of a dataset is Megatron's GPTDataset built with
//   random_seed = (seed + e) mod 2^32 and num_epochs 1: every sample of an epoch comes once and
//   each epoch has its own document and sample order. (Megatron instead builds one index over
//   all the epochs a run needs; its epoch 0 is ours only when the run fits in one epoch.) The
//   "documents" are the indexed dataset's sequences, as in GPTDataset. A set of several prefixes
//   is one dataset of all their sequences, in order.
// * llm.c files have no index: a file of n tokens gives (n - 1) / seq_len windows of seq_len + 1
//   tokens, starting every seq_len tokens (llm.c's own loader steps the same way), never crossing
//   a file. The epoch's order is our own seeded permutation (CounterRng keyed by seed and epoch).
// * Several sets (or samples_per_epoch set): Megatron's BlendedDataset. Weights are normalised
//   twice, as Megatron's dataset builder and then BlendedDataset do, and its greedy
//   build_blending_indices gives, for each position of the blend, a dataset d and the k-th sample
//   d contributes. That interleaving is the same every epoch; component d gives c_d samples per
//   blended epoch, so its k-th sample of blended epoch e is its global sample g = e·c_d + k, read
//   from its own epoch g / n_d at position g % n_d (n_d = its samples per epoch): components wrap
//   into their next epoch, freshly shuffled, when a blend needs more of them than they hold.
// * shuffle = false: documents, samples and llm.c windows in stored order.
// * add_extra_token = false is refused: the loader's targets are the tokens shifted by one, which
//   needs seq_len + 1 tokens per sample; Megatron's alternative pads the last target and masks
//   its loss, which this loader's batches have no field for.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/counter_rng.h"
#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "loader/megatron_index.h"
#include "loader/source.h"

namespace pretrain {

namespace {

constexpr uint64_t kLlmcOrderStream = 0x4c4c4d43ULL;  // "LLMC": CounterRng pass of the window order

// Each epoch's indices, built once when a reader first needs them (readers of the same epoch wait
// for that one build; others go on). Epochs more than one behind the newest asked for are dropped:
// near a boundary readers need two. A reader still holding a dropped epoch keeps it alive.
template <typename T>
class EpochCache {
 public:
  template <typename Build>
  std::shared_ptr<const T> get(uint64_t epoch, const Build& build) const {
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard lock(mutex_);
      auto& slot = entries_[epoch];
      if (!slot) slot = std::make_shared<Entry>();
      entry = slot;
      const uint64_t newest = entries_.rbegin()->first;
      if (newest >= 2) entries_.erase(entries_.begin(), entries_.lower_bound(newest - 1));
    }
    std::call_once(entry->once, [&] { entry->value = std::make_shared<const T>(build(epoch)); });
    return entry->value;
  }

 private:
  struct Entry {
    std::once_flag once;
    std::shared_ptr<const T> value;
  };
  mutable std::mutex mutex_;
  mutable std::map<uint64_t, std::shared_ptr<Entry>> entries_;
};

// One dataset: samples() samples per epoch, each epoch in its own order.
class GptDataset {
 public:
  virtual ~GptDataset() = default;
  virtual uint64_t samples() const = 0;
  // seq_len + 1 tokens of sample `position` of `epoch` into `row`.
  virtual void read(uint64_t epoch, uint64_t position, const HostRows& out, int64_t row) const = 0;
  // The sample's number before the epoch's shuffle.
  virtual uint64_t sample_id(uint64_t epoch, uint64_t position) const = 0;
  // What defines the samples: file names and sizes.
  virtual void fingerprint(Xxh3Stream& hash) const = 0;
};

void hash_string(Xxh3Stream& hash, const std::string& s) {
  const uint64_t n = s.size();
  hash.update(&n, sizeof n);
  hash.update(s.data(), s.size());
}
void hash_u64(Xxh3Stream& hash, uint64_t v) { hash.update(&v, sizeof v); }

class MegatronDataset final : public GptDataset {
 public:
  MegatronDataset(const ShardSet& set, int64_t seq_len, uint64_t seed, bool shuffle)
      : seq_len_(seq_len), seed_(seed), shuffle_(shuffle) {
    for (const std::string& prefix : set.files) {
      readers_.emplace_back(prefix);
      const MegatronReader& r = readers_.back();
      first_sequence_.push_back(sizes_.size());
      if (sizes_.size() + r.num_sequences() > size_t(std::numeric_limits<int32_t>::max()))
        throw Error(Where{r.idx_path()},
                    cat("the set '", set.origin, "' has more than 2^31 - 1 sequences, the most ",
                        "Megatron's int32 document index holds"));
      const auto lengths = r.sequence_lengths();
      for (size_t i = 0; i < lengths.size(); ++i) sizes_.push_back(lengths[i]);
      tokens_ += int64_t(r.num_tokens());
    }
    first_sequence_.push_back(sizes_.size());
    samples_ = uint64_t(gpt_samples_per_epoch(tokens_, seq_len, true));
    if (samples_ == 0)
      throw UsageError(Where{set.origin}, cat("holds ", tokens_, " tokens, fewer than one sample of ",
                                              seq_len, " + 1 tokens"));
  }

  uint64_t samples() const override { return samples_; }

  void read(uint64_t epoch, uint64_t position, const HostRows& out, int64_t row) const override {
    const auto index = epoch_index(epoch);
    const uint32_t sample = index->shuffle_index[position];
    const SamplePoint begin = index->sample_index[sample], end = index->sample_index[sample + 1];
    // As GPTDataset._query_document_sample_shuffle_indices: from `begin` to `end` + 1 token,
    // whole documents in between.
    int64_t column = 0;
    for (int32_t d = begin.document; d <= end.document; ++d) {
      const int32_t sequence = index->document_index[size_t(d)];
      const int64_t from = d == begin.document ? begin.offset : 0;
      const int64_t to = d == end.document ? int64_t(end.offset) + 1 : sizes_[size_t(sequence)];
      put(out, row, column, sequence, from, to - from);
      column += to - from;
    }
    if (column != seq_len_ + 1)
      throw Error(cat("internal: GPT sample ", sample, " of epoch ", epoch, " has ", column,
                      " tokens, not ", seq_len_ + 1));
  }

  uint64_t sample_id(uint64_t epoch, uint64_t position) const override {
    return epoch_index(epoch)->shuffle_index[position];
  }

  void fingerprint(Xxh3Stream& hash) const override {
    hash_string(hash, kFormatMegatron);
    for (const MegatronReader& r : readers_) {
      hash_string(hash, base_name(r.prefix()));
      hash_u64(hash, r.bin_bytes());
      hash_u64(hash, r.idx_bytes());
    }
  }

 private:
  std::shared_ptr<const GptEpochIndex> epoch_index(uint64_t epoch) const {
    return epochs_.get(epoch, [this](uint64_t e) {
      return build_gpt_epoch_index(sizes_, seq_len_, true, uint32_t(seed_ + e), shuffle_);
    });
  }

  // Tokens [offset, offset + length) of global sequence `sequence` at `column` of the row.
  void put(const HostRows& out, int64_t row, int64_t column, int32_t sequence, int64_t offset,
           int64_t length) const {
    const size_t file = size_t(std::upper_bound(first_sequence_.begin(), first_sequence_.end(),
                                                size_t(sequence)) - first_sequence_.begin()) - 1;
    const MegatronReader& reader = readers_[file];
    const size_t local = size_t(sequence) - first_sequence_[file];
    try {
      out.put_tokens(row, column, reader.sequence(local).sub(size_t(offset), size_t(length)));
    } catch (const Error& e) {
      throw Error(Where::at_record(reader.bin_path(), int64_t(local)), e.what());  // record = sequence
    }
  }

  int64_t seq_len_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<MegatronReader> readers_;
  std::vector<size_t> first_sequence_;  // global id of each file's first sequence, then the total
  std::vector<int32_t> sizes_;          // tokens of every sequence of the set
  int64_t tokens_ = 0;
  uint64_t samples_ = 0;
  EpochCache<GptEpochIndex> epochs_;
};

class LlmcDataset final : public GptDataset {
 public:
  LlmcDataset(const ShardSet& set, int64_t seq_len, uint64_t seed, bool shuffle)
      : seq_len_(seq_len), seed_(seed), shuffle_(shuffle) {
    for (const std::string& path : set.files) {
      readers_.emplace_back(path);
      first_window_.push_back(samples_);
      samples_ += uint64_t(gpt_samples_per_epoch(int64_t(readers_.back().size()), seq_len, true));
    }
    first_window_.push_back(samples_);
    if (samples_ == 0)
      throw UsageError(Where{set.origin}, cat("no llm.c file of this set holds one sample of ",
                                              seq_len, " + 1 tokens"));
    if (samples_ >= std::numeric_limits<uint32_t>::max())
      throw UsageError(Where{set.origin}, cat(samples_, " samples per epoch; at most 2^32 - 2 are supported"));
  }

  uint64_t samples() const override { return samples_; }

  void read(uint64_t epoch, uint64_t position, const HostRows& out, int64_t row) const override {
    const uint64_t window = sample_id(epoch, position);
    // Files without a whole window repeat their first_window_ value; upper_bound skips them.
    const size_t file = size_t(std::upper_bound(first_window_.begin(), first_window_.end(), window) -
                               first_window_.begin()) - 1;
    const LlmcReader& reader = readers_[file];
    const size_t start = size_t(window - first_window_[file]) * size_t(seq_len_);
    const size_t count = size_t(seq_len_) + 1;
    try {
      if (reader.format() == LlmcFormat::gpt2)
        out.put_tokens(row, 0, reader.tokens16().data() + start, count);
      else
        out.put_tokens(row, 0, reader.tokens32().data() + start, count);
    } catch (const Error& e) {
      throw Error(Where::at_offset(reader.path(), int64_t(kLlmcHeaderBytes + start * reader.itemsize())),
                  cat("tokens ", start, "…", start + count - 1, ": ", e.what()));
    }
  }

  uint64_t sample_id(uint64_t epoch, uint64_t position) const override {
    if (!shuffle_) return position;
    return (*orders_.get(epoch, [this](uint64_t e) {
      std::vector<uint32_t> order(samples_);
      for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
      CounterRng(seed_, e, kLlmcOrderStream).shuffle(order);
      return order;
    }))[position];
  }

  void fingerprint(Xxh3Stream& hash) const override {
    hash_string(hash, kFormatLlmc);
    for (const LlmcReader& r : readers_) {
      hash_string(hash, base_name(r.path()));
      hash_u64(hash, r.size());
    }
  }

 private:
  int64_t seq_len_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<LlmcReader> readers_;
  std::vector<uint64_t> first_window_;  // global number of each file's first window, then the total
  uint64_t samples_ = 0;
  EpochCache<std::vector<uint32_t>> orders_;
};

class GptSource final : public SampleSource {
 public:
  explicit GptSource(const GptSourceOptions& o) : options_(o) {
    if (o.sets.empty()) throw UsageError("GPT loader: no sources");
    if (o.seq_len < 1 || o.seq_len >= std::numeric_limits<int32_t>::max())
      throw UsageError(cat("GPT loader: seq_len must be in [1, 2^31 - 1), not ", o.seq_len));
    if (!o.add_extra_token)
      throw UsageError("GPT loader: add_extra_token = false is not supported: targets are the tokens "
                       "shifted by one, so every sample needs seq_len + 1 tokens");
    if (o.samples_per_epoch < 0)
      throw UsageError(cat("GPT loader: samples_per_epoch must be 0 or more, not ", o.samples_per_epoch));
    const bool blend = o.sets.size() > 1 || o.samples_per_epoch > 0;
    std::vector<double> weights(o.sets.size(), 1.0);
    if (o.sets.size() > 1) weights = checked_weights(o);

    std::optional<TokenizerInfo> tokenizer;
    for (const ShardSet& set : o.sets) {
      if (set.format == kFormatMegatron)
        datasets_.push_back(std::make_unique<MegatronDataset>(set, o.seq_len, o.seed, o.shuffle));
      else if (set.format == kFormatLlmc)
        datasets_.push_back(std::make_unique<LlmcDataset>(set, o.seq_len, o.seed, o.shuffle));
      else
        throw UsageError(Where{set.origin}, cat("'", set.format, "' shards are not GPT data (Megatron "
                                                ".bin/.idx or llm.c .bin)"));
      if (set.manifest && !set.manifest->tokenizer.kind.empty()) {
        const TokenizerInfo& t = set.manifest->tokenizer;
        if (tokenizer && !tokenizer->vocab_hash.empty() && !t.vocab_hash.empty() &&
            tokenizer->vocab_hash != t.vocab_hash)
          throw UsageError(Where{set.origin}, "made with another vocabulary than the sources before it");
        if (!tokenizer) tokenizer = t;
        vocab_size_ = std::max(vocab_size_, t.vocab_size);
      }
    }
    if (tokenizer) special_ids_ = tokenizer->special_ids;

    if (!blend) {
      samples_ = datasets_[0]->samples();
      return;
    }
    // Megatron normalises in BlendedMegatronDatasetBuilder and again in BlendedDataset; doing it
    // twice keeps the last bits (and so the greedy choices) the same.
    weights_ = megatron_normalize(megatron_normalize(weights));
    uint64_t size = uint64_t(o.samples_per_epoch);
    if (size == 0)
      for (const auto& d : datasets_) size += d->samples();
    if (size >= std::numeric_limits<uint32_t>::max())
      throw UsageError(cat("GPT loader: ", size, " samples per epoch; at most 2^32 - 2 are supported"));
    blend_ = build_blending_indices(weights_, int64_t(size));
    samples_ = size;
  }

  uint64_t samples_per_epoch() const override { return samples_; }

  void read(uint64_t epoch, uint64_t position, const HostRows& out, int64_t row) const override {
    check_position(position);
    if (blend_.dataset.empty()) return datasets_[0]->read(epoch, position, out, row);
    const size_t d = size_t(blend_.dataset[position]);
    const uint64_t global = epoch * uint64_t(blend_.counts[d]) + uint64_t(blend_.sample[position]);
    const uint64_t n = datasets_[d]->samples();
    datasets_[d]->read(global / n, global % n, out, row);
  }

  // Single dataset: the sample's number in Megatron's sample index. Blend: the position itself,
  // as the blend's order is not shuffled (it is the same interleaving every epoch).
  uint64_t sample_id(uint64_t epoch, uint64_t position) const override {
    check_position(position);
    return blend_.dataset.empty() ? datasets_[0]->sample_id(epoch, position) : position;
  }

  uint64_t fingerprint() const override {
    Xxh3Stream hash;
    hash_string(hash, "gpt");
    for (const auto& d : datasets_) d->fingerprint(hash);
    hash_u64(hash, uint64_t(options_.seq_len));
    hash_u64(hash, options_.add_extra_token);
    hash_u64(hash, options_.shuffle);
    hash_u64(hash, samples_);
    for (double w : weights_) hash.update(&w, sizeof w);
    return hash.digest();
  }

  int64_t seq_len() const override { return options_.seq_len; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::map<std::string, int64_t> special_ids() const override { return special_ids_; }

 private:
  static std::vector<double> checked_weights(const GptSourceOptions& o) {
    if (o.weights.size() != o.sets.size())
      throw UsageError(cat("GPT loader: ", o.sets.size(), " sources need ", o.sets.size(),
                           " weights, not ", o.weights.size()));
    double sum = 0;
    for (size_t i = 0; i < o.weights.size(); ++i) {
      const double w = o.weights[i];
      if (!std::isfinite(w) || w < 0)
        throw UsageError(Where{o.sets[i].origin}, cat("blend weight ", w, ": expected a finite number >= 0"));
      sum += w;
    }
    if (!(sum > 0) || !std::isfinite(sum))
      throw UsageError("GPT loader: the blend weights must have a positive, finite sum");
    return o.weights;
  }

  void check_position(uint64_t position) const {
    if (position >= samples_)
      throw Error(cat("internal: GPT sample position ", position, " of an epoch of ", samples_));
  }

  GptSourceOptions options_;
  std::vector<std::unique_ptr<GptDataset>> datasets_;
  std::vector<double> weights_;  // normalised; empty without a blend
  BlendIndex blend_;             // empty without a blend
  uint64_t samples_ = 0;
  int64_t vocab_size_ = 0;
  std::map<std::string, int64_t> special_ids_;
};

}  // namespace

std::unique_ptr<SampleSource> make_gpt_source(const GptSourceOptions& options) {
  return std::make_unique<GptSource>(options);
}

}  // namespace pretrain
