// The invariants of a packed row (bert_hdf5.h), which the writer cannot see value by value: the
// instances' runs, their positions, [CLS] slots, NSP labels and predictions must agree.
#include <string>

#include "common/error.h"
#include "formats/bert_hdf5.h"

namespace pretrain {

std::string packed_row_problem(const BertBatch& b, int64_t i) {
  const int64_t seq = b.seq_len, pack = b.max_pack, mp = b.max_predictions;
  const int8_t* sequence = b.sequence_ids.data() + i * seq;
  const int8_t* mask = b.input_mask.data() + i * seq;
  const int32_t* position = b.position_ids.data() + i * seq;
  const int32_t* starts = b.next_sentence_positions.data() + i * pack;
  const int8_t* labels = b.packed_next_sentence_labels.data() + i * pack;
  // The runs: instance k+1 follows instance k; padding follows the last.
  int64_t k = 0;        // instances so far
  int64_t start = 0;    // where the current run began
  for (int64_t t = 0; t < seq; ++t) {
    const int s = sequence[t];
    if (s == 0 && k == 0) return "sequence_ids[0] = 0, expected 1: a packed row starts with its first instance";
    if (s != 0 && t > 0 && sequence[t - 1] == 0) return cat("sequence_ids[", t, "] = ", s, " after padding, expected 0");
    if (s == k + 1 && s <= pack) {  // the next instance begins
      ++k;
      start = t;
      if (starts[k - 1] != t)
        return cat("next_sentence_positions[", k - 1, "] = ", starts[k - 1], ", expected ", t, " (where instance ", k,
                   " starts)");
    } else if (s != 0 && s != k) {
      return cat("sequence_ids[", t, "] = ", s, ", expected ", k, ", ", k + 1, " (instances in order, at most ", pack,
                 ") or 0");
    }
    if ((mask[t] != 0) != (s != 0))
      return cat("input_mask[", t, "] = ", int(mask[t]), " where sequence_ids is ", s, ", expected ", s != 0 ? 1 : 0);
    const int64_t want = s != 0 ? t - start : 0;
    if (position[t] != want) return cat("position_ids[", t, "] = ", position[t], ", expected ", want);
  }
  for (int64_t j = 0; j < pack; ++j) {
    if (j >= k && starts[j] != 0) return cat("next_sentence_positions[", j, "] = ", starts[j], " past the ", k, " instances, expected 0");
    if (j >= k ? labels[j] != -1 : labels[j] != 0 && labels[j] != 1)
      return cat("packed_next_sentence_labels[", j, "] = ", int(labels[j]), ", expected ",
                 j >= k ? "-1 (no instance)" : "0 or 1");
  }
  if (b.next_sentence_labels[size_t(i)] != labels[0])
    return cat("next_sentence_labels = ", int(b.next_sentence_labels[size_t(i)]), ", expected the first instance's ",
               int(labels[0]));
  const int32_t* predicted = b.masked_lm_positions.data() + i * mp;
  int32_t last = 0;
  for (int64_t j = 0; j < mp; ++j) {
    const int32_t p = predicted[j];
    if (p == 0) {  // padding from here on ([CLS] at 0 is never predicted)
      for (int64_t r = j + 1; r < mp; ++r)
        if (predicted[r] != 0) return cat("masked_lm_positions[", r, "] = ", predicted[r], " after 0-padding");
      break;
    }
    if (p <= last) return cat("masked_lm_positions[", j, "] = ", p, " after ", last, ", expected ascending positions");
    last = p;
    const int s = sequence[p];
    if (s == 0) return cat("masked_lm_positions[", j, "] = ", p, " is padding, expected a position inside an instance");
    if (starts[s - 1] == p) return cat("masked_lm_positions[", j, "] = ", p, " is instance ", s, "'s [CLS]");
  }
  return "";
}

}  // namespace pretrain
