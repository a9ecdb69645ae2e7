#include "datagen/wikiprep/rank_shard_plan.h"

#include "datagen/wikiprep/document_shard_sinks.h"

namespace pretrain {

std::vector<ShardStart> plan_shard_starts(const std::vector<uint64_t>& sizes, WikiprepFormat format,
                                          uint64_t shard_bytes, ShardCursor& cursor) {
  std::vector<ShardStart> starts;
  uint64_t byte = 0;
  for (uint64_t i = 0; i < sizes.size(); ++i) {
    uint64_t bytes = shard_bytes_of(format, sizes[i]);
    if (cursor.open_docs > 0 && cursor.open_bytes + bytes > shard_bytes) cursor = {cursor.index + 1, 0, 0};
    if (cursor.open_docs == 0) starts.push_back({cursor.index, i, byte});
    ++cursor.open_docs;
    cursor.open_bytes += bytes;
    byte += sizes[i];
  }
  return starts;
}

}  // namespace pretrain
