// LDDL's dynamic masking (lddl/torch/bert.py, _mask_tokens): every candidate token is picked with
// probability p, then [MASK] / random id / itself at 80/10/10. We cap the picks at max_predictions
// (the slot's masked_lm arrays, NVIDIA's layout) with a seeded random subset, keep them in position
// order as Google's create_pretraining_data.py does, and draw everything from a counter-based
// stream keyed by (seed, epoch, sample), so a sample's mask never depends on threads or ranks.
#include "loader/masking.h"

#include <algorithm>
#include <cstring>

#include "common/counter_rng.h"
#include "common/error.h"

namespace pretrain {

namespace {

constexpr uint64_t kMaskStream = 0x4d41534b53ULL;  // "MASKS"

template <typename Token>
void mask_typed(const MaskingPlan& plan, const HostRows& rows, int64_t row, uint64_t epoch, uint64_t sample_id) {
  const SlotLayout& l = rows.layout();
  const int64_t s = l.seq_len, p = l.max_predictions;
  if (plan.max_predictions > p)  // the picks would run past the row's masked_lm arrays
    throw Error(cat("internal: masking ", plan.max_predictions, " predictions in a slot of ", p));
  Token* ids = rows.array<Token>(l.input_ids) + row * s;
  const uint8_t* input_mask = rows.array<uint8_t>(l.input_mask) + row * s;
  uint16_t* positions = rows.array<uint16_t>(l.masked_lm_positions) + row * p;
  Token* labels = rows.array<Token>(l.masked_lm_ids) + row * p;

  // Undo the static mask: the original ids of a shard's masked positions are its masked_lm_ids.
  for (int64_t j = 0; j < p && positions[j] != 0; ++j) ids[positions[j]] = labels[j];
  std::memset(positions, 0, size_t(p) * sizeof(uint16_t));
  std::memset(labels, 0, size_t(p) * sizeof(Token));

  CounterRng rng(plan.seed ^ kMaskStream, sample_id, epoch);
  std::vector<uint16_t> picked;
  // Position 0 ([CLS]) is never picked: NVIDIA's layout ends the predictions at the first 0.
  for (int64_t i = 1; i < s; ++i) {
    if (!input_mask[i]) continue;
    const int64_t id = int64_t(ids[i]);
    if (id < int64_t(plan.special.size()) && plan.special[size_t(id)]) continue;
    if (rng.random() < plan.probability) picked.push_back(uint16_t(i));
  }
  if (int64_t(picked.size()) > plan.max_predictions) {
    for (size_t k = 0; k < size_t(plan.max_predictions); ++k)  // a partial Fisher–Yates: a uniform subset
      std::swap(picked[k], picked[k + size_t(rng.randbelow(picked.size() - k))]);
    picked.resize(size_t(plan.max_predictions));
    std::sort(picked.begin(), picked.end());
  }
  for (size_t k = 0; k < picked.size(); ++k) {
    const uint16_t at = picked[k];
    positions[k] = at;
    labels[k] = ids[at];
    const double r = rng.random();
    if (r < 0.8) ids[at] = Token(plan.mask_id);
    else if (r >= 0.9) ids[at] = Token(rng.randbelow(uint64_t(plan.vocab_size)));
  }
}

}  // namespace

void mask_row(const MaskingPlan& plan, const HostRows& rows, int64_t row, uint64_t epoch, uint64_t sample_id) {
  if (rows.layout().token_dtype == TensorDType::u16) mask_typed<uint16_t>(plan, rows, row, epoch, sample_id);
  else mask_typed<int32_t>(plan, rows, row, epoch, sample_id);
}

}  // namespace pretrain
