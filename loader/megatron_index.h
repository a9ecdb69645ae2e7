// Megatron-LM's GPT sample indices, computed as megatron-core 0.16.1 computes them
// (megatron/core/datasets/gpt_dataset.py `_build_document_sample_shuffle_indices`,
// `_build_document_index`, `_build_shuffle_index`; helpers.cpp `build_sample_idx` and
// `build_blending_indices`; utils.py `normalize`), so that our GPT epochs are Megatron's samples.
//
// A GPT dataset is a list of "documents" (Megatron's word; they are the indexed dataset's
// sequences) laid end to end in a shuffled order and cut into samples of seq_len tokens (+1 that
// overlaps the next sample, add_extra_token). Three arrays describe one epoch:
//   document_index  the sequence ids in their shuffled order
//   sample_index    where each sample starts: (position in document_index, token offset), plus
//                   one entry for the end of the last sample
//   shuffle_index   the order the samples are visited in: arange(samples), shuffled
// The document and shuffle orders come from one numpy RandomState(seed), document order first.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "loader/numpy_random.h"

namespace pretrain {

// Where a sample starts: document_index[document], token `offset` of that sequence. Megatron
// stores these as int32 or int64; int32 holds both here, as the document index is int32 and a
// sequence has fewer than 2^31 tokens.
struct SamplePoint {
  int32_t document = 0;
  int32_t offset = 0;
  bool operator==(const SamplePoint&) const = default;
};

// Megatron's sample count for one epoch with drop_last_partial_sequence (training):
// (tokens - add_extra_token) / seq_len; 0 when there are too few tokens.
int64_t gpt_samples_per_epoch(int64_t tokens, int64_t seq_len, bool add_extra_token);

// arange(num_documents) as int32, shuffled with `rng` when it is given (_build_document_index
// with num_epochs 1).
std::vector<int32_t> build_document_index(int64_t num_documents, NumpyRandomState* rng);

// helpers.cpp build_sample_idx (num_epochs 1, drop_last_partial_sequence): samples + 1 points.
// `sizes` are the tokens of every sequence; `tokens` must be their sum over document_index.
// Throws Error when seq_len < 1 or there are not enough tokens for one sample.
std::vector<SamplePoint> build_sample_index(std::span<const int32_t> sizes,
                                            std::span<const int32_t> document_index,
                                            int64_t seq_len, int64_t tokens, bool add_extra_token);

// arange(samples) shuffled with `rng` when it is given (_build_shuffle_index; Megatron's dtype is
// uint32 below 2^32 - 1 samples, which is also our limit: Error beyond it).
std::vector<uint32_t> build_shuffle_index(uint64_t samples, NumpyRandomState* rng);

struct GptEpochIndex {
  std::vector<int32_t> document_index;
  std::vector<SamplePoint> sample_index;
  std::vector<uint32_t> shuffle_index;
  uint64_t samples() const { return shuffle_index.size(); }
};

// One epoch: Megatron's GPTDataset over all sequences (indexed_indices = arange), num_samples
// None (one epoch), random_seed `seed`. shuffle false (no Megatron equivalent): the document and
// shuffle indices are the identity, so samples run through the sequences in stored order.
GptEpochIndex build_gpt_epoch_index(std::span<const int32_t> sizes, int64_t seq_len,
                                    bool add_extra_token, uint32_t seed, bool shuffle);

// numpy.sum of a contiguous float64 array (numpy's pairwise summation), and Megatron's
// normalize(): w / numpy.sum(w).
double numpy_sum(std::span<const double> values);
std::vector<double> megatron_normalize(std::span<const double> weights);

// BlendedDataset's indices (helpers.cpp build_blending_indices): sample i of the blend is sample
// `sample[i]` of dataset `dataset[i]`, chosen greedily as the dataset furthest below its weight.
// `counts[d]` is how many samples dataset d gives to the blend. `weights` are used as given
// (Megatron passes normalised weights).
struct BlendIndex {
  std::vector<int16_t> dataset;
  std::vector<int64_t> sample;
  std::vector<int64_t> counts;
};
BlendIndex build_blending_indices(std::span<const double> weights, int64_t size);

}  // namespace pretrain
