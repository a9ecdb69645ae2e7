// numpy's legacy `numpy.random.RandomState(seed)`, bit for bit, for what Megatron-LM's GPTDataset
// draws from it: `shuffle` of a 1-D array. RandomState(int) seeds MT19937 with the reference
// init_genrand (numpy's mt19937_seed; seeds are 0 … 2^32-1), and shuffle is the Fisher–Yates of
// numpy's mtrand.pyx `_shuffle_raw`: for i = n-1 … 1, j = random_interval(i), swap x[i], x[j].
// random_interval draws masked values until one is <= max: 32-bit draws while max < 2^32, else
// 64-bit draws (two 32-bit outputs, the first in the high half).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <utility>

namespace pretrain {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed);

  uint32_t next_uint32();
  uint64_t next_uint64() {
    const uint64_t high = next_uint32();
    return high << 32 | next_uint32();
  }
  // Uniform in [0, max] (numpy's random_interval; max 0 draws nothing).
  uint64_t random_interval(uint64_t max);

  template <typename T>
  void shuffle(std::span<T> x) {
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[size_t(random_interval(i))]);
  }

 private:
  void generate();  // the next 624 words

  std::array<uint32_t, 624> state_{};
  int position_ = 624;
};

}  // namespace pretrain
