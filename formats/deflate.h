// Deflate and inflate of whole buffers as zlib streams (RFC 1950: what HDF5's gzip filter stores in
// a chunk), through one of three libraries that all read and write that same format: zlib (the
// reference: HDF5's own filter and NVIDIA's files use it), libdeflate and ISA-L's igzip (several
// times faster). The shard writer, the reader and shard-tool use kCompressor / kInflater, chosen from
// scripts/bench/deflate.sh's numbers on our shards' chunks; tests and the bench name the others.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace pretrain::deflate {

enum class Codec { zlib, libdeflate, isal };
const char* codec_name(Codec codec);

// libdeflate (scripts/bench/deflate.sh on our shards' chunks, one thread): ~2× zlib's deflate speed
// at the same gzip level for a few % fewer bytes (its level 1 is 3.1× zlib level 4's speed for 1.7%
// more), and 2.7× zlib's inflate speed on zlib's own streams. ISA-L deflates 2× faster again for
// ~5% larger chunks, but it picks SIMD code at run time and does not promise the same bytes on every
// CPU; libdeflate's are the same everywhere, and our shards' bytes should not depend on the machine.
inline constexpr Codec kCompressor = Codec::libdeflate;
inline constexpr Codec kInflater = Codec::libdeflate;

// The library's own level for a gzip level 0–9: zlib and libdeflate take it as is (libdeflate's 0
// is stored blocks too); ISA-L has 0–3 and no stored-only level: 0–1 → 0, 2–3 → 1, 4–6 → 2,
// 7–9 → 3.
int library_level(Codec codec, int gzip_level);

// The most bytes compress() writes for `n` input bytes, whatever the codec and level.
size_t compress_bound(size_t n);

// Compresses src[0, n) into one zlib stream at `gzip_level` (0–9) into `out`, grown when too small
// (its capacity is reused across calls); returns the stream's size. Each thread keeps its own
// compressor state for the codec, so calls on many threads run concurrently. Throws Error.
size_t compress(Codec codec, const uint8_t* src, size_t n, int gzip_level, std::vector<uint8_t>& out);
inline size_t compress(const uint8_t* src, size_t n, int gzip_level, std::vector<uint8_t>& out) {
  return compress(kCompressor, src, n, gzip_level, out);
}

// Inflates the zlib stream src[0, n) into out[0, out_size), which it must fill exactly: a stream
// that is corrupt, fails its Adler-32, ends early or decodes to fewer or more bytes throws
// Error(where, what + ": …") saying which; `what` names the chunk. Bytes after the stream's end are
// ignored, as HDF5's gzip filter ignores them.
void inflate(Codec codec, const uint8_t* src, size_t n, uint8_t* out, size_t out_size, const Where& where,
             const std::string& what);
inline void inflate(const uint8_t* src, size_t n, uint8_t* out, size_t out_size, const Where& where,
                    const std::string& what) {
  inflate(kInflater, src, n, out, out_size, where, what);
}

}  // namespace pretrain::deflate
