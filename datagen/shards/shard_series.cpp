#include "datagen/shards/shard_series.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/communicator.h"
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
    : dir_(output.dir), extension_(format.extension), commits_dir_(output.commits_dir), base_(output.manifest),
      ranks_(output.ranks), sizes_(std::move(sizes)), slots_(sizes_.size()), stop_after_(output.stop_after_shards) {
  base_.format = format.name;
  base_.seq_len = format.seq_len;
  base_.max_predictions = format.max_predictions;
  const size_t n = count(), size = ranks_ ? size_t(ranks_->size()) : 1, rank = ranks_ ? size_t(ranks_->rank()) : 0;
  first_owned_ = rank * n / size;
  end_owned_ = (rank + 1) * n / size;
  if (lead()) {
    make_dirs(dir_);
    // A run killed while writing leaves its shard's (or manifest's) temp file; this run, resumed or
    // not, writes that shard again under its own pid, so the dead one's would stay forever. (Rank
    // 0 alone, before any rank writes: another node's live pid means nothing here.)
    for (const std::string& stale : remove_stale_temp_files(dir_, &is_series_file))
      log_info(cat("removed ", stale, ", left by a writer that was killed"));
    if (output.resume) keep_verified();
  }
  if (!distributed()) return;
  // Rank 0's verdict on the earlier run's shards, for every rank; then the lists start over from
  // kept.json (the kept shards) and the manifest says the split is under way.
  Manifest kept = base_;
  kept.complete = false;
  kept.shards = listed(0, count());
  kept = Manifest::from_json(nlohmann::json::parse(ranks_->broadcast_string(kept.to_json().dump(), 0)));
  for (const ShardEntry& e : kept.shards) slots_[size_t(std::stoul(e.file.substr(6, 5)))] = e;
  if (lead()) {
    make_dirs(commits_dir_);
    kept.write(path_join(commits_dir_, "kept.json"));
    for (const auto& entry : std::filesystem::directory_iterator(commits_dir_))  // the ranks' lists
      if (entry.path().filename().string().starts_with("rank-")) std::filesystem::remove(entry.path());
    kept.write(path_join(dir_, kManifestName));
  }
  ranks_->barrier();
}

bool ShardSeries::lead() const { return !ranks_ || ranks_->rank() == 0; }
bool ShardSeries::distributed() const { return ranks_ && ranks_->distributed(); }

std::vector<ShardEntry> ShardSeries::listed(size_t first, size_t end) const {
  std::vector<ShardEntry> out;
  for (size_t i = first; i < end; ++i)
    if (slots_[i]) out.push_back(*slots_[i]);
  return out;
}

void ShardSeries::keep_verified() {
  // The candidates: what the manifest lists, and every rank's list of a multi-rank run (any N).
  std::vector<std::string> sources = {path_join(dir_, kManifestName)};
  if (!commits_dir_.empty() && file_exists(commits_dir_))
    for (const auto& entry : std::filesystem::directory_iterator(commits_dir_)) {
      const std::string name = entry.path().filename().string();
      if (name == "kept.json" || (name.starts_with("rank-") && name.ends_with(".json"))) sources.push_back(entry.path().string());
    }
  const nlohmann::json key = base_.extra.value("key", nlohmann::json());
  Manifest found = base_;
  std::vector<std::optional<ShardEntry>> candidates(count());
  for (const std::string& source : sources) {
    if (!file_exists(source)) continue;
    Manifest old = Manifest::read(source);
    if (old.extra.value("key", nlohmann::json()) != key) {
      log_warn(cat("--resume: ", source, " was made with other inputs or options; starting this split over"));
      return;
    }
    for (const ShardEntry& e : old.shards)
      for (size_t i = 0; i < count(); ++i)
        if (e.file == name(i)) candidates[i] = e;
  }
  for (const auto& c : candidates)
    if (c) found.shards.push_back(*c);
  // An interrupted run's manifest (complete = false) lists the shards it finished: verify those
  // like any other, rather than stopping at the manifest's own "did not finish".
  found.complete = true;
  const std::vector<VerifyProblem> problems = verify_manifest(found, dir_);
  for (size_t i = 0; i < count(); ++i) {
    if (!candidates[i]) continue;
    const ShardEntry& e = *candidates[i];
    // A problem may name a shard's companion (.idx): the shard is written again.
    const auto bad = std::find_if(problems.begin(), problems.end(), [&](const VerifyProblem& p) {
      return p.file == e.file || e.companions.count(p.file);
    });
    if (bad == problems.end()) {
      slots_[i] = e;
    } else {
      log_warn(cat("--resume: ", bad->file, ": ", bad->message, "; writing it again"));
    }
  }
  log_info(cat("--resume: ", listed(0, count()).size(), " shard(s) in ", dir_, " already written"));
}

std::string ShardSeries::name(size_t shard) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "train-%05zu", shard);
  return std::string(buf) + extension_;
}

std::string ShardSeries::path(size_t shard) const { return path_join(dir_, name(shard)); }

const ShardEntry& ShardSeries::committed(size_t shard, uint64_t records,
                                        const std::map<std::string, std::string>& companions) {
  ShardEntry e = Manifest::describe(dir_, name(shard), records);
  for (const auto& [file, _] : companions) e.companions[file] = hex64(xxh3_file(path_join(dir_, file)));
  slots_[shard] = e;
  Manifest m = base_;
  m.complete = false;
  if (distributed()) {
    committed_here_.push_back(e);
    m.shards = committed_here_;
    m.write(path_join(commits_dir_, cat("rank-", ranks_->rank(), ".json")));
  } else {
    m.shards = listed(0, count());
    m.write(path_join(dir_, kManifestName));
  }
  if (stop_after_ > 0 && ++written_ >= stop_after_)
    throw MakeShardsInterrupted(cat("stopped after ", written_, " shard(s) as asked (--stop-after-shards)"));
  return *slots_[shard];
}

void ShardSeries::finish(const nlohmann::json& stats) {
  Manifest m = base_;
  m.complete = true;
  m.stats = stats;
  if (!distributed()) {
    m.shards = listed(0, count());
  } else {
    Manifest mine = base_;
    mine.shards = listed(first_owned_, end_owned_);
    for (const std::string& part : ranks_->all_gather_strings(mine.to_json().dump())) {
      const Manifest theirs = Manifest::from_json(nlohmann::json::parse(part));
      m.shards.insert(m.shards.end(), theirs.shards.begin(), theirs.shards.end());
    }
  }
  if (m.shards.size() != count()) throw Error(cat("internal: ", m.shards.size(), " of ", count(), " shards written"));
  if (lead()) m.write(path_join(dir_, kManifestName));
  if (distributed()) ranks_->barrier();
}

}  // namespace pretrain
