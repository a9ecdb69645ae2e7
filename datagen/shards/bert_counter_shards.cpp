#include "datagen/shards/bert_counter_shards.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <numeric>
#include <span>

#include <tbb/parallel_pipeline.h>

#include "common/cli.h"
#include "common/communicator.h"
#include "common/counter_rng.h"
#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/progress.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/bert_spill_record.h"
#include "datagen/shards/length_bins.h"
#include "datagen/shards/packing.h"
#include "datagen/shards/rng_streams.h"
#include "datagen/shards/spill_buckets.h"

namespace pretrain {

namespace {

// Documents of one split of the store, renumbered 0..n-1; global ids kept for the RNG streams, so
// a document's instances do not depend on which other documents share its split.
//
// A store larger than its resident budget is read through pread windows (TokenStore::read_sentence):
// through the map, each random next-sentence read that lands on a released region costs a fault.
// Instances of 512 MB of text, 1 thread, CPU s: 5.6 all mapped (the store fits its budget), 17.0
// mapped with a 64 MiB budget, 7.7 through windows with the same budget.
class SplitCorpus final : public DocumentCorpus {
 public:
  SplitCorpus(const TokenStore& store, std::vector<uint32_t> docs, uint64_t resident_budget)
      : store_(store), docs_(std::move(docs)), windowed_(store.num_tokens() * sizeof(TokenId32) > resident_budget) {}
  size_t num_documents() const override { return docs_.size(); }
  size_t num_sentences(size_t d) const override { return store_.num_sentences(docs_[d]); }
  std::span<const TokenId32> sentence(size_t d, size_t i) const override {
    return windowed_ ? store_.read_sentence(docs_[d], i) : store_.sentence(docs_[d], i);
  }
  uint32_t global(size_t d) const { return docs_[d]; }
  void release_pages() const { store_.release_pages(); }
  uint64_t tokens() const {
    uint64_t n = 0;
    for (uint32_t d : docs_) n += store_.document_size(d);
    return n;
  }

 private:
  const TokenStore& store_;
  std::vector<uint32_t> docs_;
  bool windowed_;
};

// Raises the open-file limit to its hard maximum (spill buckets are all open at once) and
// returns how many buckets that allows.
size_t max_open_buckets() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur > 256 ? size_t(r.rlim_cur - 128) : 128;
}

// Instances of every (document, pass), appended to their buckets; counts each bucket's records.
// With length bins, bin b owns buckets [b·per_bin, (b + 1)·per_bin). The work is blocks of 64
// documents, pass after pass; under mpirun rank r takes the r-th of N contiguous runs of blocks
// and writes its piece of each bucket, so the pieces in rank order are the one-process bucket.
void spill_instances(const BertCounterOptions& o, const BertMaskVocab& vocab, const SplitCorpus& corpus, bool valid,
                     const Communicator& ranks, SpillBuckets& buckets) {
  const LengthBins bins = length_bins(o);
  if (ranks.rank() == 0) {
    std::filesystem::remove_all(o.spill_dir);
    make_dirs(o.spill_dir);
  }
  ranks.barrier();
  const size_t n_buckets = buckets.count(), per_bin = n_buckets / size_t(bins.count());
  std::vector<uint64_t>& counts = buckets.counts();
  SpillWriter files(buckets, ranks.rank());
  const size_t block = 64, blocks_per_pass = (corpus.num_documents() + block - 1) / block;
  const size_t units = blocks_per_pass * size_t(o.dupe_factor);
  const size_t first_unit = units * size_t(ranks.rank()) / size_t(ranks.size()),
               end_unit = units * size_t(ranks.rank() + 1) / size_t(ranks.size());
  Progress progress(valid ? "instances (valid)" : "instances", uint64_t(end_unit - first_unit));
  struct Batch {
    int pass;
    size_t begin, end;
    std::vector<std::string> out;
    std::vector<uint64_t> n;
  };
  size_t unit = first_unit;
  FirstError error;  // an error lets the pipeline drain rather than cancel it (see FirstError)
  auto next_block = [&](tbb::flow_control& fc) -> std::shared_ptr<Batch> {
    if (unit >= end_unit || error.failed()) {
      fc.stop();
      return nullptr;
    }
    auto b = std::make_shared<Batch>();
    b->pass = int(unit / blocks_per_pass);
    b->begin = unit % blocks_per_pass * block;
    b->end = std::min(corpus.num_documents(), b->begin + block);
    ++unit;
    return b;
  };
  auto make_instances = [&](Batch* b) {
    b->out.assign(n_buckets, {});
    b->n.assign(n_buckets, 0);
    for (size_t d = b->begin; d < b->end; ++d) {
      const uint64_t global = corpus.global(d);
      CounterRng rng(o.seed, global, uint64_t(b->pass));
      uint64_t k = 0;  // the instance's index in its document and pass
      create_instances_from_document(corpus, d, o.instances, vocab, rng, [&](BertInstance& instance) {
        const uint64_t h = CounterRng::mix(CounterRng::mix(CounterRng::mix(o.seed ^ kBucketStream) ^ global) ^
                                           (uint64_t(b->pass) << 32 | k++));
        const size_t bucket = size_t(bins.bin_of(instance.tokens.size())) * per_bin + size_t(h % per_bin);
        append_spill_record(instance, b->out[bucket]);
        ++b->n[bucket];
      });
    }
  };
  auto append_to_buckets = [&](const Batch* b) {
    files.append(b->out);
    for (size_t k = 0; k < n_buckets; ++k) counts[k] += b->n[k];
    progress.add(1);
  };
  tbb::parallel_pipeline(
      size_t(2 * max_threads() + 2),
      tbb::make_filter<void, std::shared_ptr<Batch>>(tbb::filter_mode::serial_in_order, next_block) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<Batch> b) {
                if (!error.failed()) error.keep([&] { make_instances(b.get()); });
                return b;
              }) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Batch> b) {
            if (!error.failed()) error.keep([&] { append_to_buckets(b.get()); });
          }));
  error.rethrow();
  files.close();
  corpus.release_pages();  // the write stage reads the buckets, not the store
  progress.finish();
  static_assert(sizeof(uint64_t) == sizeof(int64_t));
  ranks.all_reduce_sum(reinterpret_cast<int64_t*>(counts.data()), int64_t(counts.size()));
  if (ranks.rank() == 0) buckets.mark_complete();
  ranks.barrier();
}

// A bucket read whole, and where its records start, in their shuffled order.
struct ShuffledBucket {
  std::string path, data;
  std::vector<size_t> offsets;

  void load(const BertCounterOptions& o, const SpillBuckets& buckets, size_t b, uint64_t count, bool valid) {
    if (!buckets.present(b)) buckets.gone(b);
    path = buckets.path(b);
    data = buckets.read(b);
    offsets.clear();
    offsets.reserve(count);
    for (size_t at = 0; at < data.size(); at += record(at).bytes) offsets.push_back(at);
    if (offsets.size() != count) throw Error(Where{path}, "spill bucket does not hold the records counted");
    CounterRng rng(o.seed, b, kShuffleStream - (valid ? 1 : 0));
    rng.shuffle(offsets);
  }
  SpillRecord record(size_t at) const { return SpillRecord(data.data() + at, data.size() - at, path, at); }
};

// --pack: the bucket's records (shuffled, so ties in length fall by the shuffle) packed first-fit
// decreasing, and the packs' seeded order.
Packs pack_bucket(const BertCounterOptions& o, const ShuffledBucket& bucket, size_t b, bool valid,
                  std::vector<uint32_t>& order) {
  std::vector<PackItem> items;
  items.reserve(bucket.offsets.size());
  for (size_t at : bucket.offsets) {
    const SpillRecord r = bucket.record(at);
    items.push_back({uint32_t(r.tokens.size()), uint32_t(r.labels.size())});
  }
  Packs packs = pack_first_fit_decreasing(items, {.seq_len = uint32_t(o.instances.seq_len),
                                                  .max_predictions = uint32_t(o.instances.max_predictions),
                                                  .max_pack = uint32_t(o.max_pack)});
  order.resize(packs.size());
  std::iota(order.begin(), order.end(), 0u);
  CounterRng rng(o.seed, b, kPackStream - (valid ? 1 : 0));
  rng.shuffle(order);
  return packs;
}

// Each bucket read whole, its records shuffled, and dealt in that order into the shards (with
// length bins: each bin's buckets into that bin's shards). With --pack each bucket's records are
// packed and the packs dealt in their seeded order, one row each; the shards' sizes need the
// rows, so a first pass packs every bucket to count them (packing costs little beside the
// shards' deflate; the counts are kept in rows.json). Under mpirun each rank deals the records
// (rows) of its own shards only, loading just the buckets they come from, and the ranks share the
// first pass's packing. A bucket whose rows all go to shards kept from an earlier run, whose
// counts that run recorded, is not loaded at all; with free_buckets a bucket whose rows lie in
// this rank's shards is deleted once they are committed, and rank 0 deletes the rest at the end.
void write_shuffled(const BertCounterOptions& o, const BertMaskVocab& vocab, const Communicator& ranks,
                    SpillBuckets& buckets, const SplitOutput& output, MakeShardsStats& stats) {
  const StageClock write_clock;
  const LengthBins bins = length_bins(o);
  const std::vector<uint64_t>& counts = buckets.counts();
  const size_t per_bin = buckets.count() / size_t(bins.count());
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  (output.valid ? stats.valid_instances : stats.instances) += total;
  const bool packed = o.max_pack > 0;
  ShuffledBucket bucket;
  std::vector<uint32_t> order;
  std::vector<int64_t> bucket_rows(buckets.count(), 0);  // packed: each bucket's rows
  if (packed) {
    uint8_t known = 0;
    if (ranks.rank() == 0) {
      const auto rows = buckets.load_rows();
      if (rows) bucket_rows = *rows, known = 1;
    }
    ranks.broadcast(&known, 1, 0);
    if (!known) {
      for (size_t b = size_t(ranks.rank()); b < buckets.count(); b += size_t(ranks.size())) {
        bucket.load(o, buckets, b, counts[b], output.valid);
        bucket_rows[b] = int64_t(pack_bucket(o, bucket, b, output.valid, order).size());
      }
      ranks.all_reduce_sum(bucket_rows.data(), int64_t(bucket_rows.size()));
      if (ranks.rank() == 0) buckets.save_rows(bucket_rows);
    } else {
      ranks.broadcast(bucket_rows.data(), bucket_rows.size() * sizeof(int64_t), 0);
    }
  }
  const uint64_t packed_rows = uint64_t(std::accumulate(bucket_rows.begin(), bucket_rows.end(), int64_t{0}));
  (output.valid ? stats.valid_packed_rows : stats.packed_rows) += packed_rows;
  const BertShardFillerOptions filler_options{.seq_len = o.instances.seq_len,
                                              .max_predictions = o.instances.max_predictions,
                                              .compression_level = o.compression_level,
                                              .mask_id = vocab.mask,
                                              .max_pack = o.max_pack};
  const MakeShardsStats before = stats;
  BertSplitWriter writer(output, bins, filler_options, stats);
  Progress progress(output.valid ? "shards (valid)" : "shards", total);
  std::vector<SpillRecord> pack;
  for (int bin = 0; bin < bins.count(); ++bin) {
    const size_t first = size_t(bin) * per_bin, last = first + per_bin;
    // --pack has no bins (BertStageOptions::check): its one bin holds every row.
    writer.begin_bin(bin, packed ? packed_rows
                                 : std::accumulate(counts.begin() + long(first), counts.begin() + long(last), uint64_t{0}));
    const auto [mine, end_mine] = writer.owned_records();
    std::vector<std::pair<size_t, uint64_t>> freeable;  // buckets of this rank's shards alone, and their end row
    auto free_written = [&](uint64_t done) {
      while (!freeable.empty() && freeable.front().second <= done) {
        buckets.free(freeable.front().first);
        freeable.erase(freeable.begin());
      }
    };
    uint64_t at_row = 0;  // the bin's records (rows) dealt before bucket b
    for (size_t b = first; b < last; ++b) {
      const uint64_t rows = packed ? uint64_t(bucket_rows[b]) : counts[b];
      const uint64_t from = std::max(at_row, mine), to = std::min(at_row + rows, end_mine);
      if (o.free_buckets && at_row >= mine && at_row + rows <= end_mine) freeable.emplace_back(b, at_row + rows);
      at_row += rows;
      if (from < to) {
        const size_t skip = size_t(from - (at_row - rows)), take = size_t(to - from);
        if (!writer.wants(take)) {
          writer.skip(take);  // every row in shards kept, with their counts
        } else {
          bucket.load(o, buckets, b, counts[b], output.valid);
          if (!packed) {
            for (size_t i = skip; i < skip + take; ++i) writer.add(bucket.record(bucket.offsets[i]));
          } else {
            const Packs packs = pack_bucket(o, bucket, b, output.valid, order);
            for (size_t i = skip; i < skip + take; ++i) {
              pack.clear();
              for (uint32_t k : packs[order[i]]) pack.push_back(bucket.record(bucket.offsets[k]));
              writer.add_pack(pack);
            }
          }
        }
        progress.add(take);
      }
      free_written(writer.rows_done());
    }
    writer.end_bin();
    free_written(~uint64_t{0});
  }
  progress.finish();
  sum_record_counts(stats, before, ranks);
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  writer.finish(stats.to_json(o.instances.seq_len));
  // Every shard is committed (finish is a collective under mpirun): the buckets of shards of two
  // ranks, and empty ones, go too. spill.json and rows.json stay, for a resumed run's counts.
  if (o.free_buckets && ranks.rank() == 0)
    for (size_t b = 0; b < buckets.count(); ++b) buckets.free(b);
}

}  // namespace

void BertCounterOptions::check() const {
  BertStageOptions::check();
  if (bucket_bytes == 0) throw UsageError("the spill bucket size must be positive");
  if (spill_dir.empty()) throw UsageError("no spill directory for the BERT instances");
}

void spill_bert_counter_split(const BertCounterOptions& o, const BertMaskVocab& vocab, const TokenStore* store,
                              const std::vector<uint32_t>& documents, const SplitOutput& output, MakeShardsStats& stats) {
  o.check();
  output.check();
  const StageClock spill_clock;
  const Communicator& ranks = output.ranks ? *output.ranks : Communicator::self();
  const size_t n_bins = size_t(length_bins(o).count());
  SpillBuckets buckets(o.spill_dir, output.manifest.extra.value("key", nlohmann::json()));
  // Rank 0 decides whether the buckets are whole (the others read spill.json only then: rank 0
  // removes it when they are not).
  uint8_t whole = ranks.rank() == 0 && buckets.load_complete(n_bins);
  ranks.broadcast(&whole, 1, 0);
  if (whole && ranks.rank() != 0 && !buckets.load_complete(n_bins))
    throw Error(Where{o.spill_dir}, "spill.json changed under this run");
  if (whole) return;
  if (!store)
    throw Error(Where{o.spill_dir}, "the token store was freed once every instance was made, but these spill buckets "
                                    "are not whole: run again without --resume");
  const SplitCorpus corpus(*store, documents, o.store_resident_budget);
  // Buckets: enough that one fits the memory budget (≈ 6 bytes per token and pass with int32 ids,
  // about half with narrow ones: bert_spill_record.h; sized for the wider), at least one
  // per shard, and no more than the open-file limit allows; as many for each length bin.
  const double est_bytes = double(corpus.tokens()) * o.dupe_factor * 6.5;
  size_t per_bin = std::max<size_t>(size_t(output.num_shards), size_t(std::ceil(est_bytes / double(o.bucket_bytes))));
  per_bin = std::max<size_t>(1, std::min(per_bin, max_open_buckets() / n_bins));
  buckets.start(n_bins * per_bin, ranks.size());
  spill_instances(o, vocab, corpus, output.valid, ranks, buckets);
  spill_clock.add_to(stats.instances_seconds, stats.instances_cpu_seconds);
}

void write_bert_counter_shards(const BertCounterOptions& o, const BertMaskVocab& vocab, const SplitOutput& output,
                               MakeShardsStats& stats) {
  o.check();
  output.check();
  const Communicator& ranks = output.ranks ? *output.ranks : Communicator::self();
  SpillBuckets buckets(o.spill_dir, output.manifest.extra.value("key", nlohmann::json()));
  if (!buckets.load_complete(size_t(length_bins(o).count())))
    throw Error(Where{o.spill_dir}, "internal: the spill buckets are not whole");
  write_shuffled(o, vocab, ranks, buckets, output, stats);
}

void write_bert_counter_split(const BertCounterOptions& o, const BertMaskVocab& vocab, const TokenStore& store,
                              const std::vector<uint32_t>& documents, const SplitOutput& output,
                              MakeShardsStats& stats) {
  spill_bert_counter_split(o, vocab, &store, documents, output, stats);
  write_bert_counter_shards(o, vocab, output, stats);
}

}  // namespace pretrain
