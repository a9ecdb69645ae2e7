// Where the shards start in the documents of the mpirun ranks' parts (rank_parts.h), planned
// before any is written: the shard sinks' --shard-bytes rule run over the documents' sizes alone,
// in dump order, handed from rank to rank (the shard open at the end of one part goes on in the
// next). So each rank knows which shards it writes, and they are the shards one process writes.
#pragma once
#include <cstdint>
#include <vector>

#include "datagen/wikiprep/document_shard_names.h"

namespace pretrain {

// The rule's state between two parts (sent from rank to rank as bytes: keep it trivially copyable).
struct ShardCursor {
  uint64_t index = 0;  // of the open shard, or of the next one when none is open
  uint64_t open_docs = 0, open_bytes = 0;
};

// A shard that starts in a part.
struct ShardStart {
  uint64_t index = 0;  // the shard's number
  uint64_t doc = 0;    // the part's document it starts with
  uint64_t byte = 0;   // that document's offset in the part's data
};

// The shards that start among one part's documents (`sizes`: their serialized sizes), going on
// from `cursor` (the part before's), which it leaves where the part ends.
std::vector<ShardStart> plan_shard_starts(const std::vector<uint64_t>& sizes, WikiprepFormat format,
                                          uint64_t shard_bytes, ShardCursor& cursor);

}  // namespace pretrain
