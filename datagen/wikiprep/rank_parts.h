// The part files of wikiprep's mpirun ranks (wikiprep_ranks.h): each rank's documents, kept in
// <output>/.work/ between the phase that cleans them and the one that writes the shards:
//
//   wikiprep-part-R-of-N.data   the documents serialized (serialize_document), one after another
//   wikiprep-part-R-of-N.sizes  each one's size in bytes, little-endian uint64
//   wikiprep-part-R-of-N.json   the part's summary, written last: it marks the part done (a
//                               --resume at the same N keeps it when its key matches)
//
// Each file is written to a temp name and renamed whole. A part whose files disagree is refused:
// read back, with an error naming the file; at --resume, by making it again.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/file.h"
#include "datagen/wikiprep/document_shard_sinks.h"

namespace pretrain {

// <output_dir>/.work: the parts, and nothing else of wikiprep's.
std::string rank_parts_dir(const std::string& output_dir);
// <output_dir>/.work/wikiprep-part-R-of-N: the part's files are this plus .data, .sizes, .json.
std::string rank_part_path(const std::string& output_dir, int rank, int ranks);

// A rank's documents into its part. It commits no shard, so the pipeline never checkpoints.
class RankPartSink final : public ShardSink {
 public:
  RankPartSink(std::string part, WikiprepFormat format);
  void add(const CleanDocument& document) override;
  void add_serialized(std::string_view, uint64_t) override;  // a logic_error: parts hold CleanDocuments
  void close_shard() override {}
  const std::vector<ShardEntry>& shards() const override { return none_; }
  uint64_t text_bytes() const override { return text_bytes_; }  // as the shards will count them
  uint64_t invalid_utf8_replaced() const override { return invalid_; }
  Manifest finish(Manifest base) override { return base; }

  const std::vector<uint64_t>& sizes() const { return sizes_; }
  uint64_t data_bytes() const { return data_.bytes_written(); }
  void commit();  // .data, then .sizes

 private:
  std::string part_;
  AtomicFile data_;
  WikiprepFormat format_;
  std::string line_;
  std::vector<uint64_t> sizes_;
  uint64_t text_bytes_ = 0, invalid_ = 0;
  std::vector<ShardEntry> none_;
};

// A part's documents read back in order, given their sizes.
class RankPartReader {
 public:
  explicit RankPartReader(const std::string& part);
  ~RankPartReader() { std::fclose(file_); }
  RankPartReader(const RankPartReader&) = delete;
  RankPartReader& operator=(const RankPartReader&) = delete;
  void skip(uint64_t bytes);
  // The next document; valid until the next call. Throws naming the file when it ends sooner.
  std::string_view next(uint64_t size);

 private:
  std::string path_;
  std::FILE* file_;
  std::string doc_;
};

// The part's .sizes. Throws naming the file when it is not a whole number of sizes.
std::vector<uint64_t> read_part_sizes(const std::string& part);

// The summary that marks the part done: <part>.json.
void write_part_summary(const std::string& part, const nlohmann::json& summary);

// A done part of an earlier run whose summary has this `key` (input, options, rank and N), and
// whose files agree with it: fills its summary and sizes. False when there is none or it does not
// fit (a warning says why when a file cannot be read or parsed).
bool load_done_part(const std::string& part, const nlohmann::json& key, nlohmann::json& summary, std::vector<uint64_t>& sizes);

// Removes every rank's part files (a finished run has no use for them), then .work once empty.
void remove_rank_parts(const std::string& output_dir);

}  // namespace pretrain
