// make-pretraining-shards, BERT with --rng python: the Python script's sequential algorithm with
// CPython's Mersenne Twister over the whole corpus in memory, so that the same input, vocabulary
// and seed give the records of NVIDIA's create_pretraining_data.py exactly
// (tests/compat/test_make_shards_golden.py). The script has no valid split: every document is train.
#pragma once
#include <cstdint>

#include "datagen/shards/bert_instances.h"
#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"

namespace pretrain {

struct BertPythonOptions {
  BertInstanceOptions instances;  // seq_len, max_predictions, masked_lm_prob, short_seq_prob, whole_word_mask
  int dupe_factor = 10;
  uint64_t seed = 12345;
  int compression_level = 4;
  void check() const;  // UsageError naming the command-line option (check_bert_shard_options)
};

// Every document of the store into `output`'s shards, counted in `stats`.
void write_bert_python_shards(const BertPythonOptions& options, const BertMaskVocab& vocab, const TokenStore& store,
                              const SplitOutput& output, MakeShardsStats& stats);

}  // namespace pretrain
