// make-pretraining-shards' randomness: the seed it takes unless --seed says otherwise, and the
// streams of the counter RNG (common/counter_rng.h) it draws from beside the per-(document, pass)
// ones (stream = pass), listed together so that no two uses share one.
#pragma once
#include <cstdint>

namespace pretrain {

// create_pretraining_data.py's random_seed, so that --rng python makes the script's default run.
inline constexpr uint64_t kDefaultShardSeed = 12345;

inline constexpr uint64_t kValidStream = ~uint64_t{0} - 1;    // document → train or valid
inline constexpr uint64_t kBucketStream = ~uint64_t{0} - 2;   // bert: instance → spill bucket
inline constexpr uint64_t kShuffleStream = ~uint64_t{0} - 3;  // bert: bucket → shuffled order (valid: one less)
inline constexpr uint64_t kOrderStream = ~uint64_t{0} - 4;    // gpt: document order
inline constexpr uint64_t kPackStream = ~uint64_t{0} - 5;     // bert --pack: packs → shuffled order (valid: one less)

}  // namespace pretrain
