// What padding costs a BERT trainer, from the lengths of the instances alone: the definitions of
// scripts/bench/padding.py, the reference make-pretraining-shards' --bin-size and --pack are held
// to. Each takes counts[n], the instances of n real tokens (0 ≤ n ≤ seq_len), and gives the
// tokens a trainer computes for them (or the rows it computes):
//   unbinned  every instance padded to seq_len;
//   binned    LDDL's rule (--bin-size B): seq_len / B bins, an instance of n tokens in bin
//             (n − 1) / B, padded to that bin's upper edge min((bin + 1) · B, seq_len);
//   packed    first-fit decreasing into rows of seq_len tokens, at most max_pack instances a row:
//             instances longest first, each into the earliest row with room for its tokens and
//             one more instance, else a new row; a row computes seq_len tokens. (The prediction
//             limit make-pretraining-shards also packs by is left out, as padding.py leaves it.)
// Counts, not lists: a corpus of a billion instances is a few hundred numbers here.
#pragma once
#include <cstdint>
#include <span>

namespace pretrain {

uint64_t unbinned_tokens(std::span<const uint64_t> counts, int64_t seq_len);
// UsageError unless 1 ≤ bin_size ≤ seq_len.
uint64_t binned_tokens(std::span<const uint64_t> counts, int64_t seq_len, int64_t bin_size);
// Rows first-fit decreasing makes. Identical rows are kept as one run (rows in opening order,
// each run a count of rows with the same free room and instance count), and all the instances
// of one length are placed in one pass over the runs: the earliest run with room takes as many
// as each of its rows can hold, row by row, exactly as placing them one at a time would. Rows
// that can take nothing more (max_pack instances, no room, or less room than the shortest
// instance) leave the runs. UsageError unless max_pack ≥ 1 and every length is ≤ seq_len.
uint64_t packed_rows(std::span<const uint64_t> counts, int64_t seq_len, int64_t max_pack);

}  // namespace pretrain
