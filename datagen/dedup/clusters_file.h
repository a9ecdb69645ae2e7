// dedup's stage-2 checkpoint (<output>/.work/clusters.bin): every document's kept document (its
// cluster's root) and the stage's counts, stamped with the key of the signatures and threshold that
// made them. Layout: magic "PTDDCLU1", key, documents, candidate pairs, checked pairs (u64 each),
// the roots (u64 per document), then xxh3-64 of all before.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pretrain {

struct Clusters {
  std::vector<uint64_t> roots;
  uint64_t candidate_pairs = 0, checked_pairs = 0;
};

void write_clusters(const std::string& path, uint64_t key, const Clusters& clusters);
// The clusters in `path` when it is whole and stamped with `key`; nullopt otherwise.
std::optional<Clusters> read_clusters(const std::string& path, uint64_t key);

}  // namespace pretrain
