// CPython's `random.Random`, bit for bit: the Mersenne Twister (MT19937) seeded as
// `random.seed(int)` seeds it (init_by_array over the integer's 32-bit words), and the methods
// Google's and NVIDIA's create_pretraining_data.py call: random(), getrandbits(), randint(),
// randrange() and shuffle(), with `_randbelow` by rejection sampling as CPython 3.2+ does it.
// `make-pretraining-shards --rng python` uses it to reproduce their shards exactly; the default
// RNG is the counter-based one (common/counter_rng.h) that parallelises.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pretrain {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative or negative int (CPython uses abs(seed)).
  explicit PythonRandom(int64_t seed);

  uint32_t genrand_uint32();
  double random();                      // [0, 1), 53 bits, as random.random()
  uint64_t getrandbits(unsigned k);     // k <= 64
  uint64_t randbelow(uint64_t n);       // _randbelow_with_getrandbits, n >= 1
  int64_t randrange(int64_t start, int64_t stop);  // stop > start
  int64_t randint(int64_t a, int64_t b) { return randrange(a, b + 1); }

  template <typename T>
  void shuffle(std::vector<T>& x) {
    for (size_t i = x.size(); i-- > 1;) {
      size_t j = static_cast<size_t>(randbelow(i + 1));
      std::swap(x[i], x[j]);
    }
  }

 private:
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);

  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

}  // namespace pretrain
