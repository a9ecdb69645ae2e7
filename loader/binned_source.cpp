// LDDL's binned loading (source.h, make_binned_bert_source): one BERT source per length bin, and
// per epoch a seeded sequence of draws that says which bin each run of `group` positions reads.
// The loader's planner never lets a global batch straddle two runs (SampleSource::runs), so a
// batch is one bin's, at that bin's length.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>

#include "common/counter_rng.h"
#include "common/error.h"
#include "common/hash.h"
#include "loader/source.h"

namespace pretrain {

namespace {

constexpr uint64_t kBinDrawStream = 0x42494e4452ULL;  // "BINDR"

struct Draw {
  uint64_t start = 0;   // first position of the epoch's order it covers
  uint64_t count = 0;
  size_t bin = 0;
  uint64_t offset = 0;  // position in the bin's own order
};

class BinnedSource final : public SampleSource {
 public:
  explicit BinnedSource(const BinnedSourceOptions& o) : group_(o.group), drop_short_(o.drop_short) {
    if (group_ == 0) throw UsageError("binned loading: the samples per bin draw must be positive");
    std::map<int64_t, std::vector<ShardSet>> by_length;
    for (const ShardSet& set : o.bert.sets) {
      if (set.bin_length <= 0)
        throw UsageError(Where{set.origin}, "is not a length bin: binned sources (--bin-size outputs) cannot be "
                                            "mixed with plain shard sets in one loader");
      by_length[set.bin_length].push_back(set);
    }
    if (by_length.empty()) throw UsageError("binned loading: no bins");
    std::string key = cat("binned|", group_, "|", drop_short_);
    for (auto& [length, sets] : by_length) {
      BertSourceOptions bo = o.bert;
      bo.sets = std::move(sets);
      bo.seq_len = length;
      // The bins share the memory one source would use: a window each of a share of the records.
      bo.shuffle_window = std::max<int64_t>(1024, o.bert.shuffle_window / int64_t(by_length.size()));
      bo.seed = CounterRng::mix(o.bert.seed ^ uint64_t(length));  // each bin its own order
      bins_.push_back(make_bert_source(bo));
      const SampleSource& bin = *bins_.back();
      if (bin.max_pack() > 0)  // make-pretraining-shards never writes these: packed rows are all --seq-len long
        throw UsageError(Where{bo.sets.front().origin}, "holds packed rows: a length bin cannot be packed");
      if (bin.max_predictions() != bins_.front()->max_predictions())
        throw UsageError(Where{bo.sets.front().origin}, cat("has max_predictions ", bin.max_predictions(), ", the bin of length ",
                                                            bins_.front()->seq_len(), " ", bins_.front()->max_predictions()));
      base_.push_back(total_);
      total_ += bin.samples_per_epoch();
      usable_.push_back(drop_short_ ? bin.samples_per_epoch() / group_ * group_ : bin.samples_per_epoch());
      vocab_size_ = std::max(vocab_size_, bin.vocab_size());
      if (special_ids_.empty()) special_ids_ = bin.special_ids();
      key += cat("|", length, ":", hex64(bin.fingerprint()));
    }
    fingerprint_ = xxh3_bytes(key.data(), key.size());
    samples_ = std::accumulate(usable_.begin(), usable_.end(), uint64_t{0});
    seed_ = o.bert.seed;
  }

  uint64_t samples_per_epoch() const override { return samples_; }
  int64_t seq_len() const override { return bins_.back()->seq_len(); }  // the longest bin
  int64_t max_predictions() const override { return bins_.front()->max_predictions(); }
  int64_t vocab_size() const override { return vocab_size_; }
  std::map<std::string, int64_t> special_ids() const override { return special_ids_; }
  uint64_t fingerprint() const override { return fingerprint_; }

  std::vector<Run> runs(uint64_t epoch) const override {
    std::vector<Run> out;
    for (const Draw& d : draws(epoch)->list) out.push_back({d.count, bins_[d.bin]->seq_len()});
    return out;
  }

  void read(uint64_t epoch, uint64_t position, const HostRows& rows, int64_t row) const override {
    const auto [bin, inner] = locate(epoch, position);
    bins_[bin]->read(epoch, inner, rows, row);
  }
  uint64_t sample_id(uint64_t epoch, uint64_t position) const override {
    const auto [bin, inner] = locate(epoch, position);
    return base_[bin] + bins_[bin]->sample_id(epoch, inner);
  }
  void will_read(uint64_t epoch, uint64_t position) override {
    if (position >= samples_) return;
    const auto [bin, inner] = locate(epoch, position);
    bins_[bin]->will_read(epoch, inner);
  }

 private:
  struct Draws {
    std::vector<Draw> list;
    std::vector<uint64_t> starts;
  };

  // The epoch's draws: while samples are left, a bin with probability (its samples left) / (all
  // samples left), and the next `group` of its order (or what it has left).
  Draws make_draws(uint64_t epoch) const {
    CounterRng rng(seed_, epoch, kBinDrawStream);
    std::vector<uint64_t> left = usable_, taken(bins_.size(), 0);
    uint64_t total = samples_, at = 0;
    Draws d;
    while (total > 0) {
      uint64_t pick = rng.randbelow(total);
      size_t bin = 0;
      while (pick >= left[bin]) pick -= left[bin++];
      const uint64_t count = std::min(group_, left[bin]);
      d.list.push_back({at, count, bin, taken[bin]});
      d.starts.push_back(at);
      at += count, taken[bin] += count, left[bin] -= count, total -= count;
    }
    return d;
  }

  std::shared_ptr<const Draws> draws(uint64_t epoch) const {
    std::lock_guard lock(mutex_);
    for (const auto& [e, d] : cache_)
      if (e == epoch) return d;
    auto d = std::make_shared<const Draws>(make_draws(epoch));
    cache_.emplace_back(epoch, d);
    if (cache_.size() > 2) cache_.erase(cache_.begin());  // readers near an epoch boundary need two
    return d;
  }

  std::pair<size_t, uint64_t> locate(uint64_t epoch, uint64_t position) const {
    if (position >= samples_) throw Error(cat("internal: position ", position, " of a binned epoch of ", samples_));
    const auto d = draws(epoch);
    const size_t k = size_t(std::upper_bound(d->starts.begin(), d->starts.end(), position) - d->starts.begin() - 1);
    const Draw& draw = d->list[k];
    return {draw.bin, draw.offset + (position - draw.start)};
  }

  uint64_t group_;
  bool drop_short_;
  uint64_t seed_ = 0;
  std::vector<std::unique_ptr<SampleSource>> bins_;  // by length, shortest first
  std::vector<uint64_t> base_, usable_;              // per bin: first sample id; samples read per epoch
  uint64_t total_ = 0, samples_ = 0;
  int64_t vocab_size_ = 0;
  std::map<std::string, int64_t> special_ids_;
  uint64_t fingerprint_ = 0;
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<const Draws>>> cache_;
};

}  // namespace

std::unique_ptr<SampleSource> make_binned_bert_source(const BinnedSourceOptions& options) {
  return std::make_unique<BinnedSource>(options);
}

}  // namespace pretrain
