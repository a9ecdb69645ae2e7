// BERT samples from HDF5 shards (ours or NVIDIA's). HDF5 stores them in gzip chunks of hundreds of
// records, so a record-by-record random order would inflate a whole chunk per sample. An epoch's
// order is therefore two-level, as NVIDIA's loader and LDDL shuffle: the shards are put in a
// seeded order and taken, whole, into windows of at least `shuffle_window` records; each window is
// decoded into memory at once and its records are put in a seeded order of their own. While one
// window is read, the next is decoded in the background, so the consumer never waits for a file.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <numeric>

#include <oneapi/tbb/collaborative_call_once.h>
#include <oneapi/tbb/parallel_for.h>

#include "common/counter_rng.h"
#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/json_integer.h"
#include "formats/bert_hdf5.h"
#include "loader/source.h"

namespace pretrain {

namespace {

// CounterRng streams (the "pass" argument), so each decision has its own.
constexpr uint64_t kShardOrderStream = 0x5348415244ULL;   // "SHARD"
constexpr uint64_t kWindowOrderStream = 0x57494e444fULL;  // "WINDO"

struct Shard {
  std::string path;
  int64_t records = 0;
  int64_t first = 0;  // index of its first record in the concatenation of all shards
};

struct Window {
  int64_t begin = 0;  // first position of the epoch's order it covers
  int64_t records = 0;
  std::vector<uint32_t> shards;
};

struct EpochPlan {
  std::vector<Window> windows;
  std::vector<int64_t> begins;  // windows[i].begin, for the binary search
};

struct DecodedWindow {
  std::vector<BertBatch> shards;   // in window order
  std::vector<int64_t> begins;     // first record of each shard within the window
  std::vector<uint32_t> order;     // position in window → record in window (empty: identity)
};

class BertSource final : public SampleSource {
 public:
  explicit BertSource(const BertSourceOptions& o) : options_(o) {
    int64_t first = 0;
    std::string first_path;  // the shard the others are compared with
    std::optional<TokenizerInfo> tokenizer;
    for (const ShardSet& set : o.sets) {
      if (set.format != kFormatBertHdf5) throw UsageError(Where{set.origin}, "not BERT HDF5 shards");
      const Manifest* m = set.manifest ? &*set.manifest : nullptr;
      if (m && !m->tokenizer.kind.empty()) {
        if (tokenizer && tokenizer->vocab_hash != m->tokenizer.vocab_hash)
          throw UsageError(Where{set.origin}, "made with another vocabulary than the sources before it");
        tokenizer = m->tokenizer;
      }
      for (size_t i = 0; i < set.files.size(); ++i) {
        Shard shard{set.files[i], 0, first};
        int64_t seq = 0, pred = 0, pack = 0;
        if (m && m->seq_len > 0 && m->max_predictions > 0) {  // the manifest says; decode checks it
          shard.records = int64_t(m->shards[i].records);
          seq = m->seq_len;
          pred = m->max_predictions;
          pack = json_integer_or<int64_t>(m->extra, "max_pack", 0);
        } else {
          BertShardReader reader(shard.path);
          shard.records = reader.size();
          seq = reader.seq_len();
          pred = reader.max_predictions();
          pack = reader.max_pack();
        }
        if (first_path.empty()) seq_len_ = seq, max_predictions_ = pred, max_pack_ = pack, first_path = shard.path;
        if (seq != seq_len_ || pred != max_predictions_ || pack != max_pack_)
          throw Error(Where{shard.path}, cat("seq_len ", seq, ", max_predictions ", pred, " and max_pack ", pack,
                                             " (0: not packed) differ from the first shard's (", seq_len_, ", ",
                                             max_predictions_, ", ", max_pack_, ") of ", first_path));
        if (shard.records == 0) continue;
        first += shard.records;
        shards_.push_back(std::move(shard));
      }
    }
    if (shards_.empty()) throw Error(Where{o.sets.empty() ? "" : o.sets.front().origin}, "the shards hold no records");
    if (o.seq_len > 0 && o.seq_len != seq_len_)
      throw UsageError(Where{shards_.front().path}, cat("holds sequences of ", seq_len_, " tokens, not the ", o.seq_len, " asked for"));
    if (o.shuffle_window <= 0) throw UsageError(cat("shuffle_window must be positive, not ", o.shuffle_window));
    total_ = first;
    if (total_ > int64_t(UINT32_MAX)) throw UsageError("more than 2^32 BERT records in one loader");
    if (tokenizer) {
      vocab_size_ = tokenizer->vocab_size;
      special_ids_ = tokenizer->special_ids;
    }
    std::string key = cat("bert|", seq_len_, "|", max_predictions_, "|", o.shuffle, "|", o.shuffle_window);
    if (max_pack_ > 0) key += cat("|packed ", max_pack_);
    for (const Shard& s : shards_) key += cat("|", base_name(s.path), ":", s.records);
    fingerprint_ = xxh3_bytes(key.data(), key.size());
  }

  ~BertSource() override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return in_flight_ == 0; });
  }

  uint64_t samples_per_epoch() const override { return uint64_t(total_); }
  int64_t seq_len() const override { return seq_len_; }
  int64_t max_predictions() const override { return max_predictions_; }
  int64_t max_pack() const override { return max_pack_; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::map<std::string, int64_t> special_ids() const override { return special_ids_; }
  uint64_t fingerprint() const override { return fingerprint_; }

  void read(uint64_t epoch, uint64_t position, const HostRows& out, int64_t row) const override {
    const Located at = locate(epoch, position);
    const BertBatch& b = at.window->shards[at.shard];
    const int64_t r = at.row, s = b.seq_len, p = b.max_predictions;
    try {
      out.put_bert(row, &b.input_ids[size_t(r * s)], &b.segment_ids[size_t(r * s)], &b.input_mask[size_t(r * s)],
                   &b.masked_lm_positions[size_t(r * p)], &b.masked_lm_ids[size_t(r * p)], p,
                   b.next_sentence_labels[size_t(r)]);
      if (const int64_t k = b.max_pack; k > 0)
        out.put_packing(row, &b.position_ids[size_t(r * s)], &b.sequence_ids[size_t(r * s)],
                        &b.next_sentence_positions[size_t(r * k)], &b.packed_next_sentence_labels[size_t(r * k)]);
    } catch (const Error& e) {
      throw Error(Where::at_record(shards_[at.shard_index].path, r), e.what());
    }
  }

  uint64_t sample_id(uint64_t epoch, uint64_t position) const override {
    const Located at = locate(epoch, position);
    return uint64_t(shards_[at.shard_index].first + at.row);
  }

  void will_read(uint64_t epoch, uint64_t position) override {
    auto plan = plan_for(epoch);
    const uint64_t w = window_of(*plan, position);
    const Key here{epoch, w};
    const Key next = w + 1 < plan->windows.size() ? Key{epoch, w + 1} : Key{epoch + 1, 0};
    std::shared_ptr<Entry> prefetch;
    {
      std::lock_guard lock(mutex_);
      // Keep the window before this one (readers of earlier batches may still be in it), this one
      // and the next; anything older is dropped (a late reader would decode it again).
      auto keep_from = cache_.lower_bound(here);
      if (keep_from != cache_.begin()) --keep_from;
      cache_.erase(cache_.begin(), keep_from);
      if (options_.background && !cache_.count(next)) {
        prefetch = cache_[next] = std::make_shared<Entry>();
        ++in_flight_;
      }
    }
    if (prefetch) {
      options_.background([this, prefetch, next] {
        try {
          load(*prefetch, next);
        } catch (...) {
          // A reader that needs this window decodes it again and gets the error with its batch.
        }
        std::lock_guard lock(mutex_);
        if (--in_flight_ == 0) idle_.notify_all();
      });
    }
  }

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // (epoch, window)
  struct Entry {
    tbb::collaborative_once_flag flag;
    std::shared_ptr<const DecodedWindow> data;
  };
  struct Located {
    std::shared_ptr<const DecodedWindow> window;
    size_t shard = 0;        // within the window
    size_t shard_index = 0;  // in shards_
    int64_t row = 0;
  };

  std::shared_ptr<const EpochPlan> plan_for(uint64_t epoch) const {
    std::lock_guard lock(mutex_);
    for (const auto& [e, plan] : plans_)
      if (e == epoch) return plan;
    auto plan = std::make_shared<EpochPlan>(make_plan(epoch));
    plans_.emplace_back(epoch, plan);
    if (plans_.size() > 2) plans_.erase(plans_.begin());  // readers near an epoch boundary need two
    return plan;
  }

  EpochPlan make_plan(uint64_t epoch) const {
    std::vector<uint32_t> order(shards_.size());
    std::iota(order.begin(), order.end(), 0u);
    if (options_.shuffle) CounterRng(options_.seed, epoch, kShardOrderStream).shuffle(order);
    EpochPlan plan;
    int64_t at = 0;
    for (uint32_t s : order) {
      if (plan.windows.empty() || plan.windows.back().records >= options_.shuffle_window) {
        plan.windows.push_back(Window{at, 0, {}});
        plan.begins.push_back(at);
      }
      plan.windows.back().shards.push_back(s);
      plan.windows.back().records += shards_[s].records;
      at += shards_[s].records;
    }
    return plan;
  }

  static uint64_t window_of(const EpochPlan& plan, uint64_t position) {
    return uint64_t(std::upper_bound(plan.begins.begin(), plan.begins.end(), int64_t(position)) - plan.begins.begin() - 1);
  }

  Located locate(uint64_t epoch, uint64_t position) const {
    if (position >= uint64_t(total_)) throw Error(cat("internal: position ", position, " of an epoch of ", total_));
    auto plan = plan_for(epoch);
    const uint64_t w = window_of(*plan, position);
    Located at;
    at.window = window(Key{epoch, w});
    const Window& win = plan->windows[w];
    int64_t in_window = int64_t(position) - win.begin;
    if (!at.window->order.empty()) in_window = at.window->order[size_t(in_window)];
    const auto& begins = at.window->begins;
    at.shard = size_t(std::upper_bound(begins.begin(), begins.end(), in_window) - begins.begin() - 1);
    at.shard_index = win.shards[at.shard];
    at.row = in_window - begins[at.shard];
    return at;
  }

  std::shared_ptr<const DecodedWindow> window(const Key& key) const {
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard lock(mutex_);
      auto& slot = cache_[key];
      if (!slot) slot = std::make_shared<Entry>();
      entry = slot;
    }
    load(*entry, key);
    return entry->data;
  }

  // Decodes window `key` once, however many threads ask; those that wait help (oneTBB's
  // collaborative_call_once lets them run the decode's parallel_for tasks).
  void load(Entry& entry, const Key& key) const {
    tbb::collaborative_call_once(entry.flag, [&] { entry.data = decode(key); });
  }

  std::shared_ptr<const DecodedWindow> decode(const Key& key) const {
    auto plan = plan_for(key.first);
    const Window& win = plan->windows[key.second];
    auto dw = std::make_shared<DecodedWindow>();
    dw->shards.resize(win.shards.size());
    int64_t at = 0;
    for (uint32_t s : win.shards) dw->begins.push_back(at), at += shards_[s].records;
    tbb::parallel_for(size_t(0), win.shards.size(), [&](size_t k) {
      const Shard& shard = shards_[win.shards[k]];
      BertShardReader reader(shard.path);
      if (reader.size() != shard.records)
        throw Error(Where{shard.path}, cat("holds ", reader.size(), " records, but its manifest says ", shard.records));
      if (reader.seq_len() != seq_len_ || reader.max_predictions() != max_predictions_ || reader.max_pack() != max_pack_)
        throw Error(Where{shard.path}, cat("has seq_len ", reader.seq_len(), ", max_predictions ", reader.max_predictions(),
                                           " and max_pack ", reader.max_pack(), ", expected ", seq_len_, ", ",
                                           max_predictions_, " and ", max_pack_));
      reader.read_range(0, shard.records, dw->shards[k]);
    });
    if (options_.shuffle) {
      dw->order.resize(size_t(win.records));
      std::iota(dw->order.begin(), dw->order.end(), 0u);
      CounterRng(options_.seed, key.first, kWindowOrderStream ^ (key.second << 40)).shuffle(dw->order);
    }
    return dw;
  }

  BertSourceOptions options_;
  std::vector<Shard> shards_;
  int64_t total_ = 0, seq_len_ = 0, max_predictions_ = 0, max_pack_ = 0, vocab_size_ = 0;
  std::map<std::string, int64_t> special_ids_;
  uint64_t fingerprint_ = 0;

  mutable std::mutex mutex_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<const EpochPlan>>> plans_;
  mutable std::map<Key, std::shared_ptr<Entry>> cache_;
  std::condition_variable idle_;
  int in_flight_ = 0;
};

}  // namespace

std::unique_ptr<SampleSource> make_bert_source(const BertSourceOptions& options) {
  return std::make_unique<BertSource>(options);
}

}  // namespace pretrain
