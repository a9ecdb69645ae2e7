// A histogram of one quantity per record (tokens per instance, bytes per document) for shard-tool
// stats (shard_stats.h): exact (one bucket per value, for lengths bounded by seq_len) or by powers
// of two (bucket 0 holds 0, bucket k ≥ 1 holds [2^(k−1), 2^k)), with the count, sum, min and max.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

namespace pretrain {

class StatsHistogram {
 public:
  enum class Scale { exact, log2 };
  explicit StatsHistogram(Scale scale = Scale::log2) : scale_(scale) {}

  void add(uint64_t value, uint64_t times = 1) {
    if (times == 0) return;
    const size_t b = scale_ == Scale::exact ? size_t(value) : size_t(std::bit_width(value));
    if (b >= buckets_.size()) buckets_.resize(b + 1, 0);
    buckets_[b] += times;
    count_ += times;
    sum_ += value * times;
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  void merge(const StatsHistogram& o) {
    if (o.buckets_.size() > buckets_.size()) buckets_.resize(o.buckets_.size(), 0);
    for (size_t b = 0; b < o.buckets_.size(); ++b) buckets_[b] += o.buckets_[b];
    count_ += o.count_;
    sum_ += o.sum_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }

  uint64_t count() const { return count_; }
  uint64_t sum() const { return sum_; }
  // Records of each value: exact histograms only (bucket b is the value b).
  const std::vector<uint64_t>& buckets() const { return buckets_; }

  // {"scale", "count", "sum", "min", "max", "mean", "lower", "upper", "counts"}: bucket i holds
  // the values in [lower[i], upper[i]), up to the last non-empty bucket.
  nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json lower = nlohmann::ordered_json::array(), upper = nlohmann::ordered_json::array();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const uint64_t lo = scale_ == Scale::exact ? b : (b == 0 ? 0 : uint64_t{1} << (b - 1));
      lower.push_back(lo);
      upper.push_back(scale_ == Scale::exact ? b + 1 : (b == 0 ? 1 : uint64_t{1} << b));
    }
    return {{"scale", scale_ == Scale::exact ? "exact" : "log2"},
            {"count", count_},
            {"sum", sum_},
            {"min", count_ ? nlohmann::ordered_json(min_) : nlohmann::ordered_json(nullptr)},
            {"max", count_ ? nlohmann::ordered_json(max_) : nlohmann::ordered_json(nullptr)},
            {"mean", count_ ? nlohmann::ordered_json(double(sum_) / double(count_)) : nlohmann::ordered_json(nullptr)},
            {"lower", lower},
            {"upper", upper},
            {"counts", buckets_}};
  }

 private:
  Scale scale_;
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0, sum_ = 0, min_ = std::numeric_limits<uint64_t>::max(), max_ = 0;
};

}  // namespace pretrain
