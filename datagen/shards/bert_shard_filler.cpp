#include "datagen/shards/bert_shard_filler.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "datagen/shards/length_bins.h"

namespace pretrain {

void BertShardFillerOptions::check() const {
  if (seq_len < 5 || seq_len > 65535) throw UsageError("--seq-len must be in [5, 65535]");
  // At least one: with none, BERT's masked-LM objective has nothing to learn from and the shards'
  // masked_lm_* datasets would be [N, 0], which HDF5 cannot chunk.
  if (max_predictions < 1 || max_predictions > 255)
    throw UsageError(cat("--max-predictions must be in [1, 255], not ", max_predictions,
                         max_predictions < 1 ? ": BERT's masked-LM objective needs at least one masked position per sequence"
                                             : ""));
  if (compression_level < 0 || compression_level > 9) throw UsageError("--compression-level must be in [0, 9]");
}

void BertStageOptions::check() const {
  if (dupe_factor < 1) throw UsageError("--dupe-factor must be at least 1");
  if (instances.masked_lm_prob <= 0 || instances.masked_lm_prob > 1) throw UsageError("--masked-lm-prob must be in (0, 1]");
  if (instances.short_seq_prob < 0 || instances.short_seq_prob > 1) throw UsageError("--short-seq-prob must be in [0, 1]");
  BertShardFillerOptions{.seq_len = instances.seq_len,
                         .max_predictions = instances.max_predictions,
                         .compression_level = compression_level}
      .check();
  length_bins(*this).check();
  // sequence_ids is int8 and numbers a row's instances from 1.
  if (max_pack < 0 || max_pack > 127) throw UsageError(cat("--max-pack must be in [1, 127], not ", max_pack));
  if (max_pack > 0 && bin_size > 0)
    throw UsageError("--pack with --bin-size: packed rows are all --seq-len long, so there is nothing to bin; choose one");
}

ShardFormat bert_shard_format(const BertShardFillerOptions& o) {
  return {.name = kFormatBertHdf5, .extension = ".hdf5", .seq_len = o.seq_len, .max_predictions = o.max_predictions};
}

BertShardFiller::BertShardFiller(ShardSeries& series, const BertShardFillerOptions& options, MakeShardsStats& stats)
    : series_(series),
      options_(options),
      stats_(stats),
      batch_(kBatchRows, options.seq_len, options.max_predictions, options.max_pack),
      shard_(series.first_owned()),
      rows_before_(series.count() + 1, 0),
      known_(series.count()) {
  for (size_t s = 0; s < series.count(); ++s) rows_before_[s + 1] = rows_before_[s] + series.size(s);
  if (options_.counts_dir.empty()) return;
  for (size_t s = series.first_owned(); s < series.end_owned(); ++s) {
    const ShardEntry* kept = series.kept_entry(s);
    if (!kept || !file_exists(counts_path(s))) continue;
    try {  // the counts of exactly the kept bytes, or none
      const nlohmann::json j = nlohmann::json::parse(read_file(counts_path(s)));
      if (j.at("xxh3") == kept->xxh3) known_[s] = record_counts_from_json(j.at("counts"));
    } catch (const std::exception&) {
    }
  }
}

std::string BertShardFiller::counts_path(size_t shard) const {
  return path_join(options_.counts_dir, series_.name(shard) + ".counts.json");
}

bool BertShardFiller::next_row_written() {
  while (shard_ < series_.count() && in_shard_ == series_.size(shard_)) next_shard();
  if (shard_ >= series_.count()) throw Error("internal: more rows than the shard sizes hold");
  ++in_shard_;
  return !series_.kept(shard_);
}

bool BertShardFiller::wants(uint64_t rows) const {
  size_t s = shard_;
  uint64_t in = in_shard_;
  while (rows > 0 && s < series_.count()) {
    if (in == series_.size(s)) {
      ++s, in = 0;
      continue;
    }
    if (!series_.kept(s) || !known_[s]) return true;
    const uint64_t take = std::min(rows, series_.size(s) - in);
    rows -= take, in += take;
  }
  if (rows > 0) throw Error("internal: more rows than the shard sizes hold");
  return false;
}

void BertShardFiller::skip(uint64_t rows) {
  if (wants(rows)) throw Error("internal: rows skipped that a shard needs");
  while (rows > 0) {
    while (in_shard_ == series_.size(shard_)) next_shard();
    const uint64_t take = std::min(rows, series_.size(shard_) - in_shard_);
    rows -= take, in_shard_ += take;
  }
}

void BertShardFiller::add(const SpillRecord& record) {
  if (options_.max_pack > 0) throw Error("internal: an unpacked instance for packed shards");
  count(record);
  if (!next_row_written()) return;
  record.write_row(batch_, rows_);
  if (++rows_ == kBatchRows) flush();
}

void BertShardFiller::add_pack(std::span<const SpillRecord> pack) {
  if (options_.max_pack == 0) throw Error("internal: a pack for unpacked shards");
  for (const SpillRecord& r : pack) count(r);
  if (!next_row_written()) return;
  SpillRecord::write_packed_row(pack, batch_, rows_);
  if (++rows_ == kBatchRows) flush();
}

void BertShardFiller::finish() {
  while (shard_ < series_.count()) next_shard();
}

void BertShardFiller::count(const SpillRecord& r) {
  MakeShardsStats& s = shard_counts_;
  s.instance_tokens += r.tokens.size();
  s.predictions += r.labels.size();
  for (size_t k = 0; k < r.labels.size(); ++k) {
    TokenId32 now = r.tokens[r.positions[k]];
    if (now == options_.mask_id)
      ++s.masked_as_mask;
    else if (now == r.labels[k])
      ++s.masked_kept;  // (a random draw of the same token also lands here: 1 in vocab size)
    else
      ++s.masked_random;
  }
  const bool random_next = r.flags & 1, short_target = r.flags & 2, forced = r.flags & 4, first = r.flags & 8;
  s.random_next += random_next;
  s.forced_random_next += forced;
  s.short_target_instances += short_target;
  s.document_passes += first;
  s.short_document_passes += first && short_target;
  const int seq_len = options_.histogram_seq_len > 0 ? options_.histogram_seq_len : options_.seq_len;
  const size_t width = size_t(std::max(1, seq_len / 16));
  if (s.length_histogram.empty()) s.length_histogram.assign(size_t(seq_len) / width + 1, 0);
  ++s.length_histogram[std::min(s.length_histogram.size() - 1, r.tokens.size() / width)];
}

BertShardWriter& BertShardFiller::writer() {
  if (!writer_)
    writer_.emplace(series_.path(shard_), options_.seq_len, options_.max_predictions,
                    BertShardOptions{.gzip_level = options_.compression_level, .max_pack = options_.max_pack});
  return *writer_;
}

void BertShardFiller::flush() {
  if (rows_ == 0) return;
  if (rows_ < kBatchRows) batch_.resize(rows_, options_.seq_len, options_.max_predictions, options_.max_pack);
  writer().append(batch_);
  if (rows_ < kBatchRows) batch_.resize(kBatchRows, options_.seq_len, options_.max_predictions, options_.max_pack);
  rows_ = 0;
}

void BertShardFiller::next_shard() {
  const MakeShardsStats counts = std::exchange(shard_counts_, MakeShardsStats{});
  if (!series_.kept(shard_)) {
    flush();
    writer().commit();
    writer_.reset();
    add_record_counts(stats_, counts);
    // Listed first, then its counts: a shard listed without them is counted from its records
    // again, and its spill buckets are freed only once both are on disk.
    const std::string xxh3 = series_.committed(shard_, in_shard_).xxh3;
    if (!options_.counts_dir.empty()) {
      make_dirs(options_.counts_dir);
      write_file_atomic(counts_path(shard_), nlohmann::json{{"xxh3", xxh3}, {"counts", record_counts_json(counts)}}.dump() + "\n");
    }
  } else {
    add_record_counts(stats_, known_[shard_].value_or(counts));
  }
  ++shard_;
  in_shard_ = 0;
}

}  // namespace pretrain
