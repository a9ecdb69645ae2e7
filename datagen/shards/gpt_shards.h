// make-pretraining-shards, GPT: each split's documents (each its tokens, then EOD, from the token
// store) in the order given into shards of equal document counts (±1): Megatron's indexed dataset
// (formats/megatron.h, the narrowest dtype the vocabulary fits) or llm.c token files
// (formats/llmc.h: GPT-2's uint16 layout up to 65536 tokens, Llama 3's uint32 above).
//
// The output is the store's tokens in another order, so a writer reading the store in the
// shards' order holds both until the last shard: twice the output on disk. Instead, two steps:
//   spread: the store read once in its own order (under mpirun each rank a contiguous run of its
//     documents), from the end backwards in chunks, each document's tokens written into its
//     shard's bucket (a work file of the shard's tokens in the shard's order, each document at
//     the offset the sizes before it give); with free_store, once a chunk is on disk in the
//     buckets and recorded (spread-R.json), the store's blocks behind it are given back
//     (TokenStore::free_tokens), so store and buckets together hold about the store;
//   write: each bucket streamed into its shard through the format's writer, and with free_store
//     deleted once the shard is committed, so buckets and shards together hold about the output.
// Both survive a kill: a resumed run (same key) goes on with the chunks not recorded and the
// shards not kept; a bucket a shard to be written needs that is gone is an error naming it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"

namespace pretrain {

enum class GptFormat { megatron, llmc };

struct GptShardsOptions {
  GptFormat format = GptFormat::megatron;
  int64_t vocab_size = 0;      // picks the token width
  std::string work_dir;        // the buckets and the spread's records; empty: <first split's dir>/.gpt-work, removed at the end
  bool free_store = false;     // give the store's blocks back as they are spread, delete buckets once written
  uint64_t chunk_bytes = uint64_t{64} << 20;  // of store tokens spread between records, at most (1/32 of the store, ≥ 1 MiB)
  void check() const;          // UsageError when vocab_size is not positive
};

// The series' manifest format for GPT shards of these options.
ShardFormat gpt_shard_format(const GptShardsOptions& options);

struct GptSplit {
  std::vector<uint32_t> documents;  // store ids, in the order the shards hold them
  SplitOutput output;
};

// The splits' shards, both steps. Under mpirun (the outputs' ranks) a collective.
class GptSplitsWriter {
 public:
  // Checks the options and begins the splits' series (the shards an earlier run left that verify
  // are kept, on --resume). `key` tells this run's work files from another's.
  GptSplitsWriter(const GptShardsOptions& options, std::vector<GptSplit> splits, const nlohmann::json& key);
  ~GptSplitsWriter();
  // True when an earlier run of the key spread the whole store (its records say so): spread()
  // then needs no store.
  bool spread_done() const;
  // The spread; `store` may be null only when spread_done().
  void spread(const TokenStore* store);
  // The shards, counted in `stats` (each split's manifest written with the counts so far).
  void write(MakeShardsStats& stats);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// One split, both steps (tests, and callers of a single split).
void write_gpt_split(const GptShardsOptions& options, const TokenStore& store, const std::vector<uint32_t>& documents,
                     const SplitOutput& output, MakeShardsStats& stats);

}  // namespace pretrain
