// The files of wikiprep's output directory by name: each format's shards (docs-00007.jsonl.zst,
// sentences-00007.txt), the format the manifest names, and the clean-up of the shards a run is
// about to write again (with the temp files an interrupted run left).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace pretrain {

enum class WikiprepFormat { jsonl, sentences };

// The manifest's format: kFormatDocs or kFormatSentences (common/manifest.h).
const char* wikiprep_manifest_format(WikiprepFormat format);

// What the shards' names start with: "docs", "sentences".
const char* wikiprep_shard_prefix(WikiprepFormat format);

// The manifest's shard file names: docs-00007.jsonl.zst, sentences-00007.txt.
std::string wikiprep_shard_name(WikiprepFormat format, uint64_t index);

// "docs-00012.jsonl.zst" → 12 when it is one of this format's shard names (five digits, as
// wikiprep_shard_name writes the first 100,000); nullopt for any other name.
std::optional<uint64_t> wikiprep_shard_index(WikiprepFormat format, const std::string& name);

// Removes this format's shards numbered `first` and up from `dir`, and the temp files an
// interrupted run left (a shard's or the manifest's .tmp-<pid>). Other files stay.
void remove_wikiprep_shards_from(const std::string& dir, WikiprepFormat format, uint64_t first);

}  // namespace pretrain
