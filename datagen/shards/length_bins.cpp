#include "datagen/shards/length_bins.h"

#include <algorithm>
#include <cstdio>

#include "common/communicator.h"
#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"

namespace pretrain {

void LengthBins::check() const {
  if (bin_size == 0) return;
  if (bin_size < 5) throw UsageError(cat("--bin-size must be at least 5 (the shortest instance), not ", bin_size));
  if (seq_len % bin_size != 0)
    throw UsageError(cat("--bin-size ", bin_size, " must divide --seq-len ", seq_len, " (LDDL's bins: seq_len / bin_size)"));
}

LengthBins length_bins(const BertStageOptions& o) { return {.seq_len = o.instances.seq_len, .bin_size = o.bin_size}; }

std::string bin_dir_name(int bin) {
  char name[32];
  std::snprintf(name, sizeof name, "bin-%02d", bin);
  return name;
}

BertSplitWriter::BertSplitWriter(const SplitOutput& split, const LengthBins& bins,
                                 const BertShardFillerOptions& filler, MakeShardsStats& stats)
    : split_(split), bins_(bins), filler_options_(filler), stats_(stats) {
  bins_.check();
  if (filler_options_.max_pack > 0) {
    if (bins_.binned()) throw Error("internal: packed rows in length bins (BertStageOptions::check refuses them)");
    split_.manifest.extra["max_pack"] = filler_options_.max_pack;  // absent unpacked: those manifests stay as they were
  }
  if (!bins_.binned()) return;
  // Until finish(), the split's manifest says the bins are not all written: a reader of an
  // interrupted run sees complete = false, never an earlier run's list.
  if (split_.ranks && split_.ranks->rank() != 0) return;  // rank 0 writes the manifests
  make_dirs(split_.dir);
  Manifest m = split_manifest();
  m.complete = false;
  m.write(path_join(split_.dir, kManifestName));
}

std::pair<uint64_t, uint64_t> BertSplitWriter::owned_records() const {
  if (!series_) return {0, 0};
  uint64_t begin = 0, end = 0;
  for (size_t s = 0; s < series_->end_owned(); ++s) (s < series_->first_owned() ? begin : end) += series_->size(s);
  return {begin, begin + end};
}

Manifest BertSplitWriter::split_manifest() const {
  Manifest m = split_.manifest;
  m.format = kFormatBertHdf5Binned;
  m.seq_len = bins_.seq_len;
  m.max_predictions = filler_options_.max_predictions;
  return m;
}

void BertSplitWriter::begin_bin(int bin, uint64_t records) {
  bin_ = bin;
  records_ = records;
  if (!bins_.binned()) {
    series_.emplace(split_, bert_shard_format(filler_options_), equal_sizes(records, split_.num_shards));
    BertShardFillerOptions options = filler_options_;
    options.counts_dir = split_.commits_dir;
    filler_.emplace(*series_, options, stats_);
    return;
  }
  if (records == 0) return;  // an empty bin has no directory; bin_records counts it
  SplitOutput out = split_;
  out.dir = path_join(split_.dir, bin_dir_name(bin));
  out.num_shards = int(std::min<uint64_t>(uint64_t(split_.num_shards), records));
  out.manifest.extra["bin"] = bin;
  out.manifest.extra["max_length"] = bins_.max_length(bin);
  if (!split_.commits_dir.empty()) out.commits_dir = path_join(split_.commits_dir, bin_dir_name(bin));
  BertShardFillerOptions options = filler_options_;
  options.seq_len = bins_.max_length(bin);
  options.histogram_seq_len = bins_.seq_len;  // one histogram over every bin
  options.counts_dir = out.commits_dir;
  series_.emplace(out, bert_shard_format(options), equal_sizes(records, out.num_shards));
  filler_.emplace(*series_, options, stats_);
}

void BertSplitWriter::add(const SpillRecord& record) {
  if (!filler_) throw Error(cat("internal: an instance for bin ", bin_, ", which was begun with no records"));
  filler_->add(record);
}

void BertSplitWriter::add_pack(std::span<const SpillRecord> pack) {
  if (!filler_) throw Error("internal: a packed row before the split was begun");
  filler_->add_pack(pack);
}

bool BertSplitWriter::wants(uint64_t rows) const {
  if (!filler_) throw Error(cat("internal: rows for bin ", bin_, ", which was begun with no records"));
  return filler_->wants(rows);
}

void BertSplitWriter::skip(uint64_t rows) {
  if (!filler_) throw Error(cat("internal: rows for bin ", bin_, ", which was begun with no records"));
  filler_->skip(rows);
}

uint64_t BertSplitWriter::rows_done() const { return filler_ ? filler_->rows_done() : 0; }

void BertSplitWriter::end_bin() {
  if (!filler_) return;
  filler_->finish();
  filler_.reset();
  stats_.shards += series_->count();
  if (!bins_.binned()) return;  // finish() writes the one series' manifest
  summaries_.push_back({bin_dir_name(bin_), bin_, bins_.max_length(bin_), records_, series_->count()});
  series_->finish({{"instances", records_}, {"bin", bin_}, {"max_length", bins_.max_length(bin_)}});
  series_.reset();
}

void BertSplitWriter::finish(const nlohmann::json& stats) {
  if (!bins_.binned()) {
    if (!series_) throw Error("internal: the split's series was never begun");
    series_->finish(stats);
    return;
  }
  std::vector<uint64_t> bin_records(size_t(bins_.count()), 0);
  nlohmann::json listed = nlohmann::json::array();
  for (const ManifestBin& b : summaries_) {
    bin_records[size_t(b.bin)] = b.records;
    listed.push_back(b.to_json());
  }
  Manifest m = split_manifest();
  m.extra["bin_size"] = bins_.bin_size;
  m.extra["bins"] = listed;
  m.extra["bin_records"] = bin_records;
  m.stats = stats;
  m.complete = true;
  if (!split_.ranks || split_.ranks->rank() == 0) m.write(path_join(split_.dir, kManifestName));
}

}  // namespace pretrain
