// CPython's `random.Random`, bit for bit: the Mersenne Twister (MT19937) seeded as
// `random.seed(int)` seeds it (init_by_array over the integer's 32-bit words), and the methods
// Google's and NVIDIA's create_pretraining_data.py call: random(), getrandbits(), randint(),
// randrange() and shuffle(), with `_randbelow` by rejection sampling as CPython 3.2+ does it.
// `make-pretraining-shards --rng python` uses it to reproduce their shards exactly; the default
// RNG is the counter-based one (common/counter_rng.h) that parallelises.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pretrain {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative or negative int (CPython uses abs(seed)).
  explicit PythonRandom(int64_t seed);

  // Inline: shuffling a masking candidate list draws one number per candidate, and a call per
  // draw was a tenth of --rng python's instance stage.
  uint32_t genrand_uint32() {
    if (mti_ >= kN) twist();
    uint32_t y = mt_[static_cast<size_t>(mti_++)];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
  }
  // [0, 1), 53 bits, as random.random().
  double random() {
    const uint32_t a = genrand_uint32() >> 5, b = genrand_uint32() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }
  // k <= 64. CPython fills 32-bit words least significant first, the last one shifted down to its bits.
  uint64_t getrandbits(unsigned k) {
    if (k > 64) getrandbits_too_many(k);
    if (k == 0) return 0;
    if (k <= 32) return genrand_uint32() >> (32 - k);
    const uint64_t low = genrand_uint32();
    const uint64_t high = genrand_uint32() >> (64 - k);
    return low | (high << 32);
  }
  // _randbelow_with_getrandbits, n >= 1.
  uint64_t randbelow(uint64_t n) {
    if (n == 0) randbelow_empty();
    const unsigned k = static_cast<unsigned>(std::bit_width(n));
    uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
  }
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
  static constexpr int kN = 624;
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);
  void twist();  // the next 624 words
  [[noreturn]] static void getrandbits_too_many(unsigned k);
  [[noreturn]] static void randbelow_empty();

  std::array<uint32_t, kN> mt_{};
  int mti_ = 625;
};

}  // namespace pretrain
