// The default RNG of make-pretraining-shards and the loader: a counter-based stream keyed by (seed, document,
// pass). Value i of a stream is splitmix64(key + i·γ), a function of the key and i only, so any
// document's instances come out the same whichever thread makes them and in whatever order.
// Same methods as PythonRandom, so the instance code is written once for both.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace pretrain {

class CounterRng {
  __extension__ typedef unsigned __int128 u128;  // GCC/Clang's 128-bit product, for Lemire's method

 public:
  CounterRng(uint64_t seed, uint64_t document, uint64_t pass)
      : key_(mix(mix(mix(seed ^ 0x6a09e667f3bcc909ULL) ^ document) ^ (pass * 0x9e3779b97f4a7c15ULL))) {}

  uint64_t next() { return mix(key_ + (counter_++) * 0x9e3779b97f4a7c15ULL); }
  double random() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t randbelow(uint64_t n) {
    u128 m = static_cast<u128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<u128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  int64_t randint(int64_t a, int64_t b) { return a + static_cast<int64_t>(randbelow(static_cast<uint64_t>(b - a + 1))); }
  template <typename T>
  void shuffle(std::vector<T>& x) {
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[static_cast<size_t>(randbelow(i + 1))]);
  }

  static uint64_t mix(uint64_t z) {  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace pretrain
