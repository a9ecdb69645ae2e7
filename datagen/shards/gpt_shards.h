// make-pretraining-shards, GPT: one split's documents (each its tokens, then EOD, from the token
// store) in the order given into shards of equal document counts (±1): Megatron's indexed dataset
// (formats/megatron.h, the narrowest dtype the vocabulary fits) or llm.c token files
// (formats/llmc.h: GPT-2's uint16 layout up to 65536 tokens, Llama 3's uint32 above).
#pragma once
#include <cstdint>
#include <vector>

#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"

namespace pretrain {

enum class GptFormat { megatron, llmc };

struct GptShardsOptions {
  GptFormat format = GptFormat::megatron;
  int64_t vocab_size = 0;  // picks the token width
  void check() const;      // UsageError when vocab_size is not positive
};

// The series' manifest format for GPT shards of these options.
ShardFormat gpt_shard_format(const GptShardsOptions& options);

void write_gpt_split(const GptShardsOptions& options, const TokenStore& store, const std::vector<uint32_t>& documents,
                     const SplitOutput& output, MakeShardsStats& stats);

}  // namespace pretrain
