#include "datagen/shards/shard_series.h"

#include <algorithm>
#include <cstdio>

#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"

namespace pretrain {

void SplitOutput::check() const {
  if (num_shards < 1) throw UsageError("--num-shards must be at least 1");
  if (dir.empty()) throw UsageError("no output directory");
}

namespace {
// A file a series writes: its manifest, or train-NNNNN followed by a shard's extension (.hdf5,
// .bin, .idx, .llmc.bin, …).
bool is_series_file(std::string_view name) {
  if (name == kManifestName) return true;
  if (name.size() < 12 || name.substr(0, 6) != "train-" || name[11] != '.') return false;
  return name.substr(6, 5).find_first_not_of("0123456789") == std::string_view::npos;
}
}  // namespace

std::vector<uint64_t> equal_sizes(uint64_t n, int k) {
  std::vector<uint64_t> sizes(size_t(std::max(1, k)), n / uint64_t(std::max(1, k)));
  for (uint64_t i = 0; i < n % sizes.size(); ++i) ++sizes[i];
  return sizes;
}

ShardSeries::ShardSeries(const SplitOutput& output, const ShardFormat& format, std::vector<uint64_t> sizes)
    : dir_(output.dir), extension_(format.extension), base_(output.manifest), sizes_(std::move(sizes)),
      stop_after_(output.stop_after_shards) {
  base_.format = format.name;
  base_.seq_len = format.seq_len;
  base_.max_predictions = format.max_predictions;
  make_dirs(dir_);
  // A run killed while writing leaves its shard's (or manifest's) temp file; this run, resumed or
  // not, writes that shard again under its own pid, so the dead one's would stay forever.
  for (const std::string& stale : remove_stale_temp_files(dir_, &is_series_file))
    log_info(cat("removed ", stale, ", left by a writer that was killed"));
  const std::string manifest_path = path_join(dir_, kManifestName);
  if (!output.resume || !file_exists(manifest_path)) return;
  Manifest old = Manifest::read(manifest_path);
  if (old.extra.value("key", nlohmann::json()) != base_.extra.value("key", nlohmann::json())) {
    log_warn(cat("--resume: ", manifest_path, " was made with other inputs or options; starting this split over"));
    return;
  }
  Manifest kept = old;
  // An interrupted run's manifest (complete = false) lists the shards it finished: verify those
  // like any other, rather than stopping at the manifest's own "did not finish".
  kept.complete = true;
  auto problems = verify_manifest(kept, dir_);
  if (!problems.empty()) {
    log_warn(cat("--resume: ", problems[0].file, ": ", problems[0].message, "; rewriting the shards from there"));
    // Keep the shards before the first bad one (the problem may name a shard's companion .idx).
    auto names = [&](const ShardEntry& e) { return e.file == problems[0].file || e.companions.count(problems[0].file); };
    size_t good = 0;
    while (good < kept.shards.size() && !names(kept.shards[good])) ++good;
    kept.shards.resize(good);
  }
  entries_ = kept.shards;
  log_info(cat("--resume: ", entries_.size(), " shard(s) in ", dir_, " already written"));
}

std::string ShardSeries::name(size_t shard) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "train-%05zu", shard);
  return std::string(buf) + extension_;
}

std::string ShardSeries::path(size_t shard) const { return path_join(dir_, name(shard)); }

void ShardSeries::committed(size_t shard, uint64_t records, const std::map<std::string, std::string>& companions) {
  ShardEntry e = Manifest::describe(dir_, name(shard), records);
  for (const auto& [file, _] : companions) e.companions[file] = hex64(xxh3_file(path_join(dir_, file)));
  entries_.push_back(e);
  Manifest m = base_;
  m.complete = false;
  m.shards = entries_;
  m.write(path_join(dir_, kManifestName));
  if (stop_after_ > 0 && ++written_ >= stop_after_)
    throw MakeShardsInterrupted(cat("stopped after ", written_, " shard(s) as asked (--stop-after-shards)"));
}

void ShardSeries::finish(const nlohmann::json& stats) {
  Manifest m = base_;
  m.complete = true;
  m.shards = entries_;
  m.stats = stats;
  m.write(path_join(dir_, kManifestName));
}

}  // namespace pretrain
