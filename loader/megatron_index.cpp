#include "loader/megatron_index.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace pretrain {

int64_t gpt_samples_per_epoch(int64_t tokens, int64_t seq_len, bool add_extra_token) {
  if (seq_len < 1 || tokens - int64_t(add_extra_token) < seq_len) return 0;
  return (tokens - int64_t(add_extra_token)) / seq_len;
}

std::vector<int32_t> build_document_index(int64_t num_documents, NumpyRandomState* rng) {
  if (num_documents < 0 || num_documents > std::numeric_limits<int32_t>::max())
    throw Error(cat("GPT dataset: ", num_documents,
                    " sequences do not fit Megatron's int32 document index"));
  std::vector<int32_t> order(static_cast<size_t>(num_documents));
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  if (rng) rng->shuffle(std::span<int32_t>(order));
  return order;
}

std::vector<SamplePoint> build_sample_index(std::span<const int32_t> sizes,
                                            std::span<const int32_t> document_index,
                                            int64_t seq_len, int64_t tokens, bool add_extra_token) {
  const int64_t samples = gpt_samples_per_epoch(tokens, seq_len, add_extra_token);
  if (samples == 0)
    throw Error(cat("GPT dataset: ", tokens, " tokens are fewer than one sample of ", seq_len,
                    add_extra_token ? " + 1" : "", " tokens"));
  const int64_t extra = add_extra_token;
  std::vector<SamplePoint> points;
  points.reserve(size_t(samples) + 1);
  // Walk the documents in document_index order, `seq_len + extra` tokens per sample; the next
  // sample starts `extra` tokens before this one ends (its first token is our last target).
  int64_t position = 0, offset = 0;
  points.push_back({0, 0});
  while (int64_t(points.size()) <= samples) {
    int64_t remaining = seq_len + extra;
    while (remaining != 0) {
      const int64_t length = sizes[size_t(document_index[size_t(position)])] - offset;
      remaining -= length;
      if (remaining <= 0) {
        offset += remaining + length - extra;  // this document holds the end of the sample
        remaining = 0;
      } else {
        // Megatron stops at the last document here; with `samples` computed from the token
        // count that cannot happen unless `tokens` disagrees with the sizes.
        if (position + 1 == int64_t(document_index.size()))
          throw Error(cat("GPT dataset: the sequences hold fewer than the ", tokens,
                          " tokens counted (sample ", points.size() - 1, ")"));
        ++position;
        offset = 0;
      }
    }
    points.push_back({int32_t(position), int32_t(offset)});
  }
  return points;
}

std::vector<uint32_t> build_shuffle_index(uint64_t samples, NumpyRandomState* rng) {
  if (samples >= std::numeric_limits<uint32_t>::max() - 1)
    throw Error(cat("GPT dataset: ", samples, " samples per epoch; at most 2^32 - 2 are supported"));
  std::vector<uint32_t> order(samples);
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
  if (rng) rng->shuffle(std::span<uint32_t>(order));
  return order;
}

GptEpochIndex build_gpt_epoch_index(std::span<const int32_t> sizes, int64_t seq_len,
                                    bool add_extra_token, uint32_t seed, bool shuffle) {
  int64_t tokens = 0;
  for (int32_t s : sizes) tokens += s;
  NumpyRandomState rng(seed);
  NumpyRandomState* order = shuffle ? &rng : nullptr;
  GptEpochIndex epoch;
  epoch.document_index = build_document_index(int64_t(sizes.size()), order);
  epoch.sample_index =
      build_sample_index(sizes, epoch.document_index, seq_len, tokens, add_extra_token);
  epoch.shuffle_index = build_shuffle_index(epoch.sample_index.size() - 1, order);
  return epoch;
}

namespace {
// numpy's pairwise_sum for float64 (loops_utils.h): plain loop below 8 values, eight running
// sums up to a block of 128, halves (at a multiple of 8) above.
double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += a[i];
    return sum;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + size_t(j)];
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += a[i];
    return sum;
  }
  size_t half = n / 2;
  half -= half % 8;
  return pairwise_sum(a, half) + pairwise_sum(a + half, n - half);
}
}  // namespace

double numpy_sum(std::span<const double> values) { return pairwise_sum(values.data(), values.size()); }

std::vector<double> megatron_normalize(std::span<const double> weights) {
  const double sum = numpy_sum(weights);
  std::vector<double> out(weights.begin(), weights.end());
  for (double& w : out) w /= sum;
  return out;
}

BlendIndex build_blending_indices(std::span<const double> weights, int64_t size) {
  if (weights.empty() || weights.size() > size_t(std::numeric_limits<int16_t>::max()))
    throw UsageError(cat("a blend needs 1 to 32767 datasets, not ", weights.size()));
  BlendIndex blend;
  blend.dataset.resize(size_t(size));
  blend.sample.resize(size_t(size));
  blend.counts.assign(weights.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    // The dataset furthest below its share so far (the first one on ties).
    const double taken = std::max(double(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * taken - double(blend.counts[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * taken - double(blend.counts[d]);
      if (error > best_error) best_error = error, best = d;
    }
    blend.dataset[size_t(i)] = int16_t(best);
    blend.sample[size_t(i)] = blend.counts[best]++;
  }
  return blend;
}

}  // namespace pretrain
