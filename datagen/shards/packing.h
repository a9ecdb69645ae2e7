// make-pretraining-shards --pack: BERT instances packed several to a sequence so that a trainer
// computes less padding (MLPerf BERT's packing; issue 17). First-fit decreasing, the rule
// scripts/bench/padding.py measures: instances longest first (ties: in the order given), each
// into the earliest opened pack with room for its tokens (≤ seq_len), its predictions
// (≤ max_predictions in all) and one more instance (≤ max_pack), else into a new pack. A max-tree
// over the packs' free token room finds that pack in O(log packs); a pack short of prediction
// room is passed over for the next one with token room.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/bert_defaults.h"

namespace pretrain {

struct PackItem {
  uint32_t tokens = 0;       // 1 ≤ tokens ≤ seq_len
  uint32_t predictions = 0;  // ≤ max_predictions
};

struct PackLimits {
  uint32_t seq_len = kBertSeqLen, max_predictions = kBertMaxPredictions, max_pack = kDefaultMaxPack;
};

// Packs as item indices: pack p is items[starts[p], starts[p + 1]), its items in the order they
// were placed (longest first), which is their order in the packed row.
struct Packs {
  std::vector<uint32_t> items;
  std::vector<size_t> starts{0};

  size_t size() const { return starts.size() - 1; }
  std::span<const uint32_t> operator[](size_t p) const {
    return std::span<const uint32_t>(items).subspan(starts[p], starts[p + 1] - starts[p]);
  }
};

// Throws Error for an item that fits no pack (no tokens, more than seq_len, too many predictions).
Packs pack_first_fit_decreasing(std::span<const PackItem> items, const PackLimits& limits);

}  // namespace pretrain
