// make-pretraining-shards: the store's documents into a train and a held-out valid split. Each
// document's side is its own seeded draw, so it does not depend on the other documents; GPT's
// documents are first put in one seeded order, which both splits keep.
#pragma once
#include <cstdint>
#include <vector>

#include "datagen/shards/rng_streams.h"

namespace pretrain {

struct DocumentSplitOptions {
  uint64_t seed = kDefaultShardSeed;
  double valid_fraction = 0;  // share of documents held out, in [0, 1)
  bool shuffle = false;       // gpt: the documents in a seeded order rather than the store's
  void check() const;         // UsageError naming --valid-fraction when it is outside [0, 1)
};

struct DocumentSplit {
  std::vector<uint32_t> train, valid;  // store document ids
};

DocumentSplit split_documents(uint32_t num_documents, const DocumentSplitOptions& options);

// Shards of the valid split when the train split has num_shards: its share, rounded up, at least 1.
int valid_shard_count(int num_shards, double valid_fraction);

}  // namespace pretrain
