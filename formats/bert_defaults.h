// BERT pretraining's defaults, stated once for every stage that has them: Google's
// create_pretraining_data.py's flags (NVIDIA's copy keeps them), which make-pretraining-shards
// takes as its own; the loader's dynamic masking (LDDL's) masks at the same rate, and the
// trainers' --plan sizes a BERT run by them.
#pragma once

namespace pretrain {

inline constexpr int kBertSeqLen = 128;            // max_seq_length: tokens per instance
inline constexpr int kBertMaxPredictions = 20;     // max_predictions_per_seq
inline constexpr double kBertMaskedLmProb = 0.15;  // masked_lm_prob: the share of tokens masked
// make-pretraining-shards --max-pack's default, and what shard-tool stats reckons --pack saves with:
// MLPerf's packing puts at most 3 instances in a row.
inline constexpr int kDefaultMaxPack = 3;

}  // namespace pretrain
