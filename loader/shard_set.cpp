// LoaderConfig::sources → files. A manifest is the preferred entry: it says what the files are
// and what tokenizer made them (the vocabulary size lets ids travel as uint16), and it is checked
// against the files before a batch is read, so a wrong or half-written directory fails at once.
#include <algorithm>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/megatron.h"
#include "loader/source.h"

namespace pretrain {

namespace fs = std::filesystem;

namespace {

bool format_fits(const std::string& format, ModelKind kind) {
  return kind == ModelKind::bert ? format == kFormatBertHdf5 : format == kFormatMegatron || format == kFormatLlmc;
}

ShardSet from_manifest(const std::string& origin, const std::string& manifest_path, Manifest m,
                       const LoaderConfig& config) {
  ShardSet set;
  set.origin = origin;
  const std::string dir = dir_name(manifest_path);
  if (!m.complete)
    throw Error(Where{manifest_path}, "the manifest is marked incomplete: the run that writes these shards has not "
                                      "finished (or was interrupted; rerun it with --resume)");
  if (!format_fits(m.format, config.kind))
    throw Error(Where{manifest_path}, cat("the shards are '", m.format, "', which a ", model_kind_name(config.kind),
                                          " loader does not read"));
  if (m.shards.empty()) throw Error(Where{manifest_path}, "the manifest lists no shards");
  if (config.verify_checksums) {
    auto problems = verify_manifest(m, dir);
    if (!problems.empty())
      throw Error(Where{problems.front().file}, problems.front().message + " (checked against " + manifest_path + ")");
  }
  for (const ShardEntry& e : m.shards) {
    const std::string path = path_join(dir, e.file);
    if (!file_exists(path)) throw Error(Where{path}, "listed in " + manifest_path + " but missing");
    const uint64_t size = file_size(path);
    if (size != e.bytes)
      throw Error(Where{path}, cat("is ", size, " bytes, but ", manifest_path, " says ", e.bytes,
                                   " (changed or truncated since it was written)"));
    set.files.push_back(m.format == kFormatMegatron ? megatron_prefix(path) : path);
  }
  set.format = m.format;
  set.manifest = std::move(m);
  return set;
}

// A file named directly or by a glob: its format from its name (and, for .bin, its neighbour).
std::string format_of(const std::string& path) {
  if (path.ends_with(".hdf5") || path.ends_with(".h5")) return kFormatBertHdf5;
  if (path.ends_with(".idx")) return kFormatMegatron;
  if (path.ends_with(".bin")) return file_exists(megatron_idx_path(megatron_prefix(path))) ? kFormatMegatron : kFormatLlmc;
  if (file_exists(megatron_idx_path(path)) && file_exists(megatron_bin_path(path))) return kFormatMegatron;  // a prefix
  return "";
}

ShardSet from_files(const std::string& origin, const LoaderConfig& config) {
  ShardSet set;
  set.origin = origin;
  std::vector<std::string> paths;
  std::error_code ec;
  if (!fs::is_directory(origin, ec) && !fs::exists(origin, ec) && file_exists(megatron_idx_path(origin)))
    paths.push_back(origin);  // a Megatron prefix
  else
    paths = expand_inputs({origin}, fs::is_directory(origin, ec) && config.kind == ModelKind::bert ? ".hdf5" : "");
  std::set<std::string> seen;
  for (const std::string& path : paths) {
    const std::string format = format_of(path);
    if (format.empty()) {
      if (fs::is_directory(origin, ec)) continue;  // other files in a shard directory
      throw Error(Where{path}, "not a shard: expected .hdf5/.h5 (BERT), a Megatron .bin/.idx pair or an llm.c .bin");
    }
    if (!format_fits(format, config.kind))
      throw Error(Where{path}, cat("is a '", format, "' shard, which a ", model_kind_name(config.kind), " loader does not read"));
    if (!set.format.empty() && format != set.format)
      throw UsageError(Where{origin}, cat("mixes '", set.format, "' and '", format, "' shards; give them as separate sources"));
    set.format = format;
    const std::string file = format == kFormatMegatron ? megatron_prefix(path) : path;
    if (seen.insert(file).second) set.files.push_back(file);
  }
  if (set.files.empty()) throw UsageError(Where{origin}, cat("holds no ", model_kind_name(config.kind), " shards"));
  // A manifest beside the files that lists all of them lends its tokenizer (vocabulary size, ids).
  const std::string beside = path_join(dir_name(set.files.front()), kManifestName);
  if (file_exists(beside)) {
    try {
      Manifest m = Manifest::read(beside);
      std::set<std::string> listed;
      for (const ShardEntry& e : m.shards)
        listed.insert(m.format == kFormatMegatron ? megatron_prefix(path_join(dir_name(beside), e.file))
                                                  : path_join(dir_name(beside), e.file));
      bool all = m.format == set.format;
      for (const std::string& f : set.files) all = all && listed.count(f);
      if (all) set.manifest = std::move(m);
    } catch (const Error&) {
      // An unreadable neighbour is not this entry's problem: the files were named directly.
    }
  }
  return set;
}

// A manifest's set, or for a binned split's manifest (make-pretraining-shards --bin-size) one set
// per bin it lists, each checked against what the split's manifest says of it.
void add_manifest(const std::string& origin, const std::string& manifest_path, const LoaderConfig& config,
                  std::vector<ShardSet>& sets) {
  Manifest m = Manifest::read(manifest_path);
  if (m.format != kFormatBertHdf5Binned) return sets.push_back(from_manifest(origin, manifest_path, std::move(m), config));
  if (config.kind != ModelKind::bert)
    throw Error(Where{manifest_path}, cat("the shards are length-binned BERT shards, which a ",
                                          model_kind_name(config.kind), " loader does not read"));
  if (!m.complete)
    throw Error(Where{manifest_path}, "the manifest is marked incomplete: the run that writes these bins has not "
                                      "finished (or was interrupted; rerun it with --resume)");
  const std::vector<ManifestBin> bins = manifest_bins(m, manifest_path);
  if (bins.empty()) throw Error(Where{manifest_path}, "the binned manifest lists no bins");
  for (const ManifestBin& bin : bins) {
    const std::string bin_manifest = path_join(path_join(dir_name(manifest_path), bin.dir), kManifestName);
    ShardSet set = from_manifest(cat(origin, " (", bin.dir, ")"), bin_manifest, Manifest::read(bin_manifest), config);
    if (const std::string why = bin.mismatch(*set.manifest); !why.empty())
      throw Error(Where{bin_manifest}, cat(why, " (", manifest_path, ")"));
    set.bin_length = bin.max_length;
    sets.push_back(std::move(set));
  }
}

}  // namespace

std::vector<ShardSet> resolve_sources(const LoaderConfig& config) {
  if (config.sources.empty()) throw UsageError("no shard sources given");
  std::vector<ShardSet> sets;
  for (const std::string& origin : config.sources) {
    std::error_code ec;
    if (origin.ends_with(".json")) add_manifest(origin, origin, config, sets);
    else if (fs::is_directory(origin, ec) && file_exists(path_join(origin, kManifestName)))
      add_manifest(origin, path_join(origin, kManifestName), config, sets);
    else sets.push_back(from_files(origin, config));
  }
  return sets;
}

}  // namespace pretrain
