// Dynamic masking of one BERT row in a host slot (LoaderConfig::masking, see loader.h).
#pragma once
#include <cstdint>
#include <vector>

#include "formats/bert_defaults.h"
#include "loader/source.h"

namespace pretrain {

struct MaskingPlan {
  double probability = kBertMaskedLmProb;
  int64_t max_predictions = 0;  // <= the slot's
  int64_t mask_id = 0;
  int64_t vocab_size = 0;
  std::vector<bool> special;    // by id: never masked
  uint64_t seed = 0;
};

// Undoes the row's stored masks (masked_lm_ids put back at their positions), then masks it anew
// with the choices of (seed, epoch, sample_id).
void mask_row(const MaskingPlan& plan, const HostRows& rows, int64_t row, uint64_t epoch, uint64_t sample_id);

}  // namespace pretrain
