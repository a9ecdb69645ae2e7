// make-pretraining-shards, BERT with the counter RNG, for one split of the token store:
//   instances: per (document, pass) in parallel, each from its own counter-based RNG stream,
//     scattered to spill buckets (bert_spill_record.h) by a seeded hash of (pass, document,
//     instance); the buckets and their counts (spill.json) survive for --resume;
//   write: each bucket loaded, shuffled in memory and dealt in order into shards of equal size (±1);
//     with --pack (packing.h) the bucket's instances packed and the packs dealt in a seeded order,
//     one row each (a bucket is the packing's window). With free_buckets a bucket is deleted once
//     every shard it feeds is committed and its record counts recorded (a resumed run counts a
//     kept shard from those, so it needs the bucket no more); what is left, at the split's end.
// A bucket is about bucket_bytes, so memory does not grow with the corpus; the bytes depend only
// on the store, options and seed, never on the number of threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datagen/shards/bert_instances.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"

namespace pretrain {

struct BertCounterOptions : BertStageOptions {
  std::string spill_dir;                          // this split's buckets (in <output>/.work)
  uint64_t bucket_bytes = uint64_t{256} << 20;    // spill bucket size target: the write stage's memory
  uint64_t store_resident_budget = TokenStore::kResidentBudget;  // a larger store is read through pread windows
  bool free_buckets = false;                      // delete buckets once their shards are written
  void check() const;  // BertStageOptions::check, and UsageError for no spill directory or bucket_bytes 0
};

// The instances of the split of `documents` (store ids) into its spill buckets, unless an earlier
// run of the same key (output.manifest.extra["key"]) left them whole: then `store` may be null
// (freed). Error naming the buckets when they are not whole and there is no store.
void spill_bert_counter_split(const BertCounterOptions& options, const BertMaskVocab& vocab, const TokenStore* store,
                              const std::vector<uint32_t>& documents, const SplitOutput& output, MakeShardsStats& stats);

// The split's whole spill buckets into `output`'s shards, counted in `stats`. Error naming the
// bucket when one a shard to be written needs was freed.
void write_bert_counter_shards(const BertCounterOptions& options, const BertMaskVocab& vocab, const SplitOutput& output,
                               MakeShardsStats& stats);

// Both.
void write_bert_counter_split(const BertCounterOptions& options, const BertMaskVocab& vocab, const TokenStore& store,
                              const std::vector<uint32_t>& documents, const SplitOutput& output,
                              MakeShardsStats& stats);

}  // namespace pretrain
