#include "datagen/dedup/dedup_inputs.h"

#include <filesystem>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/manifest.h"

namespace pretrain {

std::vector<DedupInputFile> plan_dedup_inputs(const std::vector<std::string>& sources) {
  std::vector<DedupInputFile> files;
  for (size_t s = 0; s < sources.size(); ++s) {
    const std::string& given = sources[s];
    std::string input = base_name(given) == kManifestName ? dir_name(given) : given;
    if (input.empty()) input.push_back('.');
    std::error_code ec;
    std::string manifest_path = path_join(input, kManifestName);
    auto add = [&](std::string path, uint64_t bytes, int64_t records, std::string xxh3) {
      DedupInputFile f;
      f.source = static_cast<int>(s);
      f.source_name = given;
      f.path = std::move(path);
      f.bytes = bytes;
      f.expected_records = records;
      f.manifest_xxh3 = std::move(xxh3);
      files.push_back(std::move(f));
    };
    if (std::filesystem::is_directory(input, ec) && file_exists(manifest_path)) {
      Manifest m = Manifest::read(manifest_path);
      if (m.format != kFormatDocs)
        throw Error(Where{manifest_path}, cat("expected format '", kFormatDocs, "' (document shards), found '", m.format, "'"));
      if (!m.complete) log_warn(manifest_path, ": the run that wrote these shards did not finish");
      for (const ShardEntry& e : m.shards) {
        std::string path = path_join(input, e.file);
        if (!file_exists(path)) throw Error(Where{path}, cat("listed in ", manifest_path, " but missing"));
        add(path, e.bytes, static_cast<int64_t>(e.records), e.xxh3);
      }
    } else {
      for (std::string& f : expand_inputs({input})) {
        uint64_t bytes = file_size(f);
        add(std::move(f), bytes, -1, "");
      }
    }
  }
  return files;
}

uint64_t verify_dedup_input(const DedupInputFile& file) {
  uint64_t size = file_size(file.path);
  if (size != file.bytes)
    throw Error(Where{file.path}, cat("expected ", file.bytes, " bytes (", file.manifest_xxh3.empty() ? "when dedup began" : "manifest",
                                      "), found ", size));
  std::string sum = hex64(xxh3_file(file.path));
  if (!file.manifest_xxh3.empty() && sum != file.manifest_xxh3)
    throw Error(Where{file.path}, cat("expected xxh3 ", file.manifest_xxh3, " (manifest), found ", sum));
  std::string identity = cat(file.path, '\n', size, '\n', sum);
  return xxh3_bytes(identity.data(), identity.size());
}

}  // namespace pretrain
