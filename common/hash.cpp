#include "common/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/file.h"

namespace pretrain {

uint64_t xxh3_bytes(const void* data, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(data, n, seed); }

// Streams through the map a piece at a time, dropping each piece from the resident set once
// hashed: a whole-file hash of a multi-GB shard would otherwise map all of it (peak RSS grew by the
// largest shard's size). The streaming state gives the same value as XXH3_64bits over the whole.
uint64_t xxh3_file(const std::string& path) {
  MappedFile map(path);
  map.advise_sequential();
  constexpr size_t kPiece = size_t{64} << 20;
  if (map.size() <= kPiece) return XXH3_64bits(map.data(), map.size());
  Xxh3Stream stream;
  for (size_t at = 0; at < map.size(); at += kPiece) {
    stream.update(map.data() + at, std::min(kPiece, map.size() - at));
    map.release_pages();
  }
  return stream.digest();
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t parse_hex64(const std::string& s) {
  uint64_t v = 0;
  if (s.size() != 16) throw Error(cat("expected 16 hex digits, found '", s, "'"));
  for (char c : s) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) throw Error(cat("expected 16 hex digits, found '", s, "'"));
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Xxh3Stream::update(const void* data, size_t n) { XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n); }
uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

}  // namespace pretrain
