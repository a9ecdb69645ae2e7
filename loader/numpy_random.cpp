#include "loader/numpy_random.h"

namespace pretrain {

namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;
}  // namespace

NumpyRandomState::NumpyRandomState(uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kN; ++i)
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + uint32_t(i);
  position_ = kN;
}

void NumpyRandomState::generate() {
  auto twist = [&](int i, int next, int far) {
    const uint32_t y = (state_[i] & kUpper) | (state_[next] & kLower);
    state_[i] = state_[far] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  };
  int i = 0;
  for (; i < kN - kM; ++i) twist(i, i + 1, i + kM);
  for (; i < kN - 1; ++i) twist(i, i + 1, i + kM - kN);
  twist(kN - 1, 0, kM - 1);
  position_ = 0;
}

uint32_t NumpyRandomState::next_uint32() {
  if (position_ == kN) generate();
  uint32_t y = state_[position_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t NumpyRandomState::random_interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;  // the smallest all-ones mask covering max
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (next_uint32() & mask)) > max) {
    }
  } else {
    while ((value = (next_uint64() & mask)) > max) {
    }
  }
  return value;
}

}  // namespace pretrain
