// Streams of the counter RNG (common/counter_rng.h) that make-pretraining-shards draws from beside
// the per-(document, pass) ones (stream = pass): listed together so that no two uses share one.
#pragma once
#include <cstdint>

namespace pretrain {

inline constexpr uint64_t kValidStream = ~uint64_t{0} - 1;    // document → train or valid
inline constexpr uint64_t kBucketStream = ~uint64_t{0} - 2;   // bert: instance → spill bucket
inline constexpr uint64_t kShuffleStream = ~uint64_t{0} - 3;  // bert: bucket → shuffled order (valid: one less)
inline constexpr uint64_t kOrderStream = ~uint64_t{0} - 4;    // gpt: document order
inline constexpr uint64_t kPackStream = ~uint64_t{0} - 5;     // bert --pack: packs → shuffled order (valid: one less)

}  // namespace pretrain
