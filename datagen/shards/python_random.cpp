// A transcription of CPython's Modules/_randommodule.c (MT19937 by Matsumoto and Nishimura) and of
// the parts of Lib/random.py that create_pretraining_data.py reaches.
#include "datagen/shards/python_random.h"


#include "common/error.h"

namespace pretrain {

namespace {
constexpr int N = 624;
constexpr int M = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;
}  // namespace

PythonRandom::PythonRandom(int64_t seed) {
  // random_seed(): the absolute value's 32-bit words, least significant first; 0 gives [0].
  uint64_t v = seed < 0 ? uint64_t(0) - uint64_t(seed) : uint64_t(seed);
  std::vector<uint32_t> key;
  do {
    key.push_back(static_cast<uint32_t>(v & 0xffffffffU));
    v >>= 32;
  } while (v);
  init_by_array(key);
}

void PythonRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (mti_ = 1; mti_ < N; mti_++)
    mt_[mti_] = 1812433253U * (mt_[mti_ - 1] ^ (mt_[mti_ - 1] >> 30)) + static_cast<uint32_t>(mti_);
}

void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  size_t i = 1, j = 0;
  const size_t key_length = key.size();
  for (size_t k = N > key_length ? N : key_length; k; k--) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<uint32_t>(j);
    i++;
    j++;
    if (i >= N) {
      mt_[0] = mt_[N - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (size_t k = N - 1; k; k--) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    i++;
    if (i >= N) {
      mt_[0] = mt_[N - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;  // MSB is 1, assuring a non-zero initial array
}

void PythonRandom::twist() {
  static constexpr uint32_t mag01[2] = {0x0U, kMatrixA};
  uint32_t y;
  int kk;
  for (kk = 0; kk < N - M; kk++) {
    y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
    mt_[kk] = mt_[kk + M] ^ (y >> 1) ^ mag01[y & 0x1U];
  }
  for (; kk < N - 1; kk++) {
    y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
    mt_[kk] = mt_[kk + (M - N)] ^ (y >> 1) ^ mag01[y & 0x1U];
  }
  y = (mt_[N - 1] & kUpperMask) | (mt_[0] & kLowerMask);
  mt_[N - 1] = mt_[M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
  mti_ = 0;
}

[[noreturn]] void PythonRandom::getrandbits_too_many(unsigned k) { throw UsageError(cat("getrandbits(", k, "): at most 64 bits here")); }

[[noreturn]] void PythonRandom::randbelow_empty() { throw UsageError("randbelow(0): empty range"); }

int64_t PythonRandom::randrange(int64_t start, int64_t stop) {
  if (stop <= start) throw UsageError(cat("empty range for randrange(", start, ", ", stop, ")"));
  return start + static_cast<int64_t>(randbelow(static_cast<uint64_t>(stop - start)));
}

}  // namespace pretrain
