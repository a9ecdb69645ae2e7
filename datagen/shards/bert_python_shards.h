// make-pretraining-shards, BERT with --rng python: the Python script's sequential algorithm with
// CPython's Mersenne Twister over the whole corpus in memory, so that the same input, vocabulary
// and seed give the records of NVIDIA's create_pretraining_data.py exactly
// (tests/compat/test_make_shards_golden.py). The script has no valid split: every document is train.
// --pack (not the script's) packs all the instances (packing.h) and writes the packs in a seeded order.
#pragma once
#include <cstdint>

#include "datagen/shards/bert_instances.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"

namespace pretrain {

using BertPythonOptions = BertStageOptions;  // the script has nothing of its own to set

// Every document of the store into `output`'s shards, counted in `stats`.
void write_bert_python_shards(const BertPythonOptions& options, const BertMaskVocab& vocab, const TokenStore& store,
                              const SplitOutput& output, MakeShardsStats& stats);

}  // namespace pretrain
