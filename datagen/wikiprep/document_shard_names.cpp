#include "datagen/wikiprep/document_shard_names.h"

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/manifest.h"
#include "formats/doc_shards.h"

namespace pretrain {
namespace {

const char* shard_suffix(WikiprepFormat f) { return f == WikiprepFormat::jsonl ? ".jsonl.zst" : ".txt"; }

}  // namespace

const char* wikiprep_manifest_format(WikiprepFormat f) { return f == WikiprepFormat::jsonl ? kFormatDocs : kFormatSentences; }

const char* wikiprep_shard_prefix(WikiprepFormat f) { return f == WikiprepFormat::jsonl ? "docs" : "sentences"; }

std::string wikiprep_shard_name(WikiprepFormat format, uint64_t index) {
  if (format == WikiprepFormat::jsonl) return DocShardWriter::shard_name(wikiprep_shard_prefix(format), index);
  char digits[24];
  std::snprintf(digits, sizeof digits, "%05llu", static_cast<unsigned long long>(index));
  return cat(wikiprep_shard_prefix(format), "-", digits, shard_suffix(format));
}

std::optional<uint64_t> wikiprep_shard_index(WikiprepFormat format, const std::string& name) {
  std::string prefix = std::string(wikiprep_shard_prefix(format)) + "-", suffix = shard_suffix(format);
  if (name.size() != prefix.size() + 5 + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return std::nullopt;
  uint64_t index = 0;
  for (size_t i = prefix.size(); i < prefix.size() + 5; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    index = index * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return index;
}

void remove_wikiprep_shards_from(const std::string& dir, WikiprepFormat format, uint64_t first) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    auto index = wikiprep_shard_index(format, name);
    bool temp = name.find(".tmp-") != std::string::npos &&
                (name.starts_with(wikiprep_shard_prefix(format)) || name.starts_with(kManifestName));
    if (temp || (index && *index >= first)) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace pretrain
