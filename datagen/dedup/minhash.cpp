#include "datagen/dedup/minhash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/hash.h"

namespace pretrain {

void MinhashOptions::check() const {
  if (ngram < 1 || ngram > 64) throw UsageError(cat("--ngram: expected 1..64 words, found ", ngram));
  if (bands < 1 || bands > 1024) throw UsageError(cat("--bands: expected 1..1024, found ", bands));
  if (rows < 1 || rows > 1024) throw UsageError(cat("--rows: expected 1..1024, found ", rows));
  if (bands * rows > 4096) throw UsageError(cat("--bands × --rows: expected at most 4096 hashes, found ", bands * rows));
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The kernel: mins[i] = min(mins[i], h_i(x)) for every shingle x. The minima are kept as int64
// (values < 2^32), whose min AVX2 has (a signed compare); the compiler vectorises the inner loop
// over i in each target's instructions.
[[gnu::always_inline]] inline void minima_body(const uint64_t* __restrict a, const uint64_t* __restrict b, int k,
                                               const uint64_t* __restrict x, size_t n, int64_t* __restrict mins) {
  for (size_t j = 0; j < n; ++j) {
    const uint64_t v = x[j];
    for (int i = 0; i < k; ++i) {
      const auto h = static_cast<int64_t>((a[i] * v + b[i]) >> 32);
      mins[i] = h < mins[i] ? h : mins[i];
    }
  }
}

using MinimaKernel = void (*)(const uint64_t*, const uint64_t*, int, const uint64_t*, size_t, int64_t*);

void minima_generic(const uint64_t* a, const uint64_t* b, int k, const uint64_t* x, size_t n, int64_t* mins) {
  minima_body(a, b, k, x, n, mins);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PRETRAIN_MINHASH_X86 1
[[gnu::target("avx2")]] void minima_avx2(const uint64_t* a, const uint64_t* b, int k, const uint64_t* x, size_t n,
                                         int64_t* mins) {
  minima_body(a, b, k, x, n, mins);
}
[[gnu::target("avx512f,avx512dq,avx512vl")]] void minima_avx512(const uint64_t* a, const uint64_t* b, int k,
                                                                const uint64_t* x, size_t n, int64_t* mins) {
  minima_body(a, b, k, x, n, mins);
}
#endif

struct Kernel {
  MinimaKernel run;
  const char* name;
};

Kernel pick_kernel() {
#ifdef PRETRAIN_MINHASH_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return {minima_avx512, "avx512"};
  if (__builtin_cpu_supports("avx2")) return {minima_avx2, "avx2"};
#endif
  return {minima_generic, "generic"};
}

const Kernel& kernel() {
  static const Kernel k = pick_kernel();
  return k;
}

}  // namespace

MinhashFunctions::MinhashFunctions(const MinhashOptions& options) {
  options.check();
  uint64_t state = options.seed;
  const int k = options.hashes();
  a_.resize(k);
  b_.resize(k);
  for (int i = 0; i < k; ++i) {
    a_[i] = splitmix64(state) | 1;
    b_[i] = splitmix64(state);
  }
}

const char* MinhashFunctions::kernel_name() { return kernel().name; }

void MinhashFunctions::signature(std::span<const uint64_t> shingles, uint32_t* out) const {
  const int k = size();
  // Functions in blocks of 256, so the minima stay in a small array on the stack.
  constexpr int kBlock = 256;
  int64_t mins[kBlock];
  for (int first = 0; first < k; first += kBlock) {
    const int count = std::min(kBlock, k - first);
    std::fill(mins, mins + count, std::numeric_limits<int64_t>::max());
    kernel().run(a_.data() + first, b_.data() + first, count, shingles.data(), shingles.size(), mins);
    for (int i = 0; i < count; ++i) out[first + i] = static_cast<uint32_t>(mins[i]);
  }
}

void MinhashFunctions::signature_reference(std::span<const uint64_t> shingles, uint32_t* out) const {
  for (int i = 0; i < size(); ++i) {
    uint32_t m = std::numeric_limits<uint32_t>::max();
    for (uint64_t x : shingles) m = std::min(m, static_cast<uint32_t>((a_[i] * x + b_[i]) >> 32));
    out[i] = m;
  }
}

uint64_t band_key(const uint32_t* signature, int band, int rows) {
  // The values' bytes as a little-endian machine holds them; the keys are only compared within a
  // run, never stored across machines of other byte orders.
  return xxh3_bytes(signature + static_cast<size_t>(band) * rows, sizeof(uint32_t) * rows, static_cast<uint64_t>(band));
}

double estimated_jaccard(const uint32_t* x, const uint32_t* y, int k) {
  int equal = 0;
  for (int i = 0; i < k; ++i) equal += x[i] == y[i];
  return k > 0 ? static_cast<double>(equal) / k : 0.0;
}

double lsh_candidate_probability(double s, int bands, int rows) {
  return 1.0 - std::pow(1.0 - std::pow(s, rows), bands);
}

}  // namespace pretrain
