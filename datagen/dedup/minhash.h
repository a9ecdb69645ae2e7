// MinHash signatures and LSH band keys (dedup's near-duplicate stage).
//
// Hash function i of a signature maps a shingle hash x (64 bits, shingles.h) to
//     h_i(x) = ((a_i · x + b_i) mod 2^64) >> 32
// with a_i odd and b_i drawn from splitmix64 seeded by --seed: multiply-add-shift, the universal
// family of Dietzfelbinger (1996). x itself is a hash, so for one i the values over a set of distinct
// shingles are as good as independent and uniform and P[min h_i(A) = min h_i(B)] is the Jaccard
// similarity of A and B; the signature is the K = bands × rows minima, 32 bits each (a tie of two
// different minima, 2^-32, is below the estimator's noise). datatrove draws (a, b) below the
// Mersenne prime 2^61-1 and reduces (a·x + b) mod 2^64 mod that prime; the family differs, the
// estimate is the same.
//
// LSH: band j is rows r·j … r·j+r-1 of the signature; its key is xxh3-64 of those 32-bit values
// (little-endian bytes), seeded by j. Two documents are candidates when any band's keys are equal
// (datatrove compares the band's values themselves; a 64-bit key adds a false candidate with
// probability 2^-64 per pair and band). With b bands of r rows a pair of similarity s becomes a
// candidate with probability 1 - (1 - s^r)^b: 0.924 at s = 0.8 for datatrove's 14 × 8.
//
// signature() is the fast path: the minima of all K functions per shingle, vectorised (AVX-512 or
// AVX2 where the CPU has them, chosen at run time; integer arithmetic, so the same bits on every
// CPU); signature_reference() is the definition, one function at a time, which the tests hold it to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pretrain {

struct MinhashOptions {
  int ngram = 5;      // words per shingle
  int bands = 14;     // LSH bands (datatrove's num_buckets)
  int rows = 8;       // hashes per band (datatrove's hashes_per_bucket)
  uint64_t seed = 1;  // the hash functions' parameters
  int hashes() const { return bands * rows; }
  // Throws UsageError naming the flag when a value is out of range.
  void check() const;
};

class MinhashFunctions {
 public:
  explicit MinhashFunctions(const MinhashOptions& options);
  int size() const { return static_cast<int>(a_.size()); }
  uint64_t a(int i) const { return a_[i]; }
  uint64_t b(int i) const { return b_[i]; }

  // out[0..size()) = the minimum of each function over the shingles; shingles must not be empty.
  void signature(std::span<const uint64_t> shingles, uint32_t* out) const;
  // The same by the definition, one function at a time.
  void signature_reference(std::span<const uint64_t> shingles, uint32_t* out) const;
  // Which vector path signature() takes on this CPU: "avx512", "avx2" or "generic".
  static const char* kernel_name();

 private:
  std::vector<uint64_t> a_, b_;
};

// Band `band`'s key: xxh3-64 (seed band) of its `rows` values.
uint64_t band_key(const uint32_t* signature, int band, int rows);

// The share of equal positions of two signatures of k values: the estimate of their Jaccard similarity.
double estimated_jaccard(const uint32_t* x, const uint32_t* y, int k);

// The probability that a pair of similarity s shares at least one band: 1 - (1 - s^rows)^bands.
double lsh_candidate_probability(double s, int bands, int rows);

}  // namespace pretrain
