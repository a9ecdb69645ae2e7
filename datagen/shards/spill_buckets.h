// make-pretraining-shards' BERT spill buckets (bert_counter_shards.h): one split's instances as
// spill records (bert_spill_record.h), scattered over buckets that each fit in memory, from the
// instances stage to the shards. A bucket's file is zstd frames (level 1) of up to kSpillFrame
// bytes of records each: on the enwiki-like pages of scripts/bench/scale.sh 0.64 of the records'
// bytes, without which the buckets alone took 1.36x the shards they become and, beside the token
// store, the run's disk peaked above 1.5x its output. Under mpirun each of the N ranks writes its
// piece of every bucket (bucket-B.R.bin): the bucket is the pieces in rank order.
//
// spill.json (written last) holds the run's key, each bucket's record count and the pieces, so a
// resumed run reads the buckets at any N; rows.json (--pack) each bucket's packed rows. A bucket
// freed once its shards were written has no pieces left; both .json files stay to the run's end.
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pretrain {

inline constexpr size_t kSpillFrame = size_t{64} << 10;

class SpillBuckets {
 public:
  SpillBuckets(std::string dir, const nlohmann::json& key);
  size_t count() const { return counts_.size(); }
  int pieces() const { return pieces_; }
  // A fresh spill of `count` buckets in `pieces` pieces.
  void start(size_t count, int pieces);
  std::string path(size_t b) const;
  std::string piece_path(size_t b, int piece) const;
  bool present(size_t b) const;  // every piece of it is there
  std::string read(size_t b) const;  // the records, its pieces decompressed in order
  void free(size_t b) const;
  std::vector<uint64_t>& counts() { return counts_; }
  const std::vector<uint64_t>& counts() const { return counts_; }
  // spill.json of this key, with a bucket count that `bins` divides: the buckets are whole.
  bool load_complete(size_t bins);
  void mark_complete() const;
  // --pack: each bucket's rows, once counted (a resumed run whose buckets were freed needs them).
  std::optional<std::vector<int64_t>> load_rows() const;
  void save_rows(const std::vector<int64_t>& rows) const;
  // A bucket a shard to be written needs, and it is gone: the error naming it.
  [[noreturn]] void gone(size_t b) const;

 private:
  std::string dir_, meta_;
  nlohmann::json key_;
  std::vector<uint64_t> counts_;
  int pieces_ = 1;
};

// One rank's piece of every bucket, appended to as the instances come: each bucket's records
// are gathered up to a frame, and the full frames compressed (in parallel, over the buckets) and
// written in order.
class SpillWriter {
 public:
  SpillWriter(const SpillBuckets& buckets, int piece);
  ~SpillWriter();
  SpillWriter(const SpillWriter&) = delete;
  SpillWriter& operator=(const SpillWriter&) = delete;
  // Appends records[b] to bucket b, for every b (records.size() == the bucket count).
  void append(const std::vector<std::string>& records);
  void close();  // writes what is left and closes the files; throws naming a file that fails

 private:
  // Compresses and writes these buckets' whole frames of pending records (last: all of them).
  void write(const std::vector<size_t>& buckets, bool last = false);
  std::vector<std::string> paths_;
  std::vector<std::FILE*> files_;
  std::vector<std::string> pending_, frames_;
};

}  // namespace pretrain
