#include "datagen/dedup/clusters_file.h"

#include <cstring>

#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

namespace {

constexpr char kMagic[8] = {'P', 'T', 'D', 'D', 'C', 'L', 'U', '1'};
constexpr size_t kHeaderWords = 4;  // key, documents, candidate pairs, checked pairs

}  // namespace

void write_clusters(const std::string& path, uint64_t key, const Clusters& clusters) {
  std::string bytes(kMagic, sizeof kMagic);
  const uint64_t header[kHeaderWords] = {key, clusters.roots.size(), clusters.candidate_pairs, clusters.checked_pairs};
  bytes.append(reinterpret_cast<const char*>(header), sizeof header);
  bytes.append(reinterpret_cast<const char*>(clusters.roots.data()), clusters.roots.size() * sizeof(uint64_t));
  const uint64_t sum = xxh3_bytes(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  write_file_atomic(path, bytes);
}

std::optional<Clusters> read_clusters(const std::string& path, uint64_t key) {
  if (!file_exists(path)) return std::nullopt;
  const std::string bytes = read_file(path);
  const size_t fixed = sizeof kMagic + kHeaderWords * sizeof(uint64_t) + sizeof(uint64_t);
  if (bytes.size() < fixed || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  uint64_t header[kHeaderWords], sum;
  std::memcpy(header, bytes.data() + sizeof kMagic, sizeof header);
  std::memcpy(&sum, bytes.data() + bytes.size() - sizeof sum, sizeof sum);
  if (header[0] != key || bytes.size() != fixed + header[1] * sizeof(uint64_t)) return std::nullopt;
  if (xxh3_bytes(bytes.data(), bytes.size() - sizeof sum) != sum) return std::nullopt;
  Clusters c;
  c.roots.resize(header[1]);
  std::memcpy(c.roots.data(), bytes.data() + sizeof kMagic + sizeof header, c.roots.size() * sizeof(uint64_t));
  c.candidate_pairs = header[2];
  c.checked_pairs = header[3];
  return c;
}

}  // namespace pretrain
