// Compressed input: the one place that decodes the files the tools read (docs/architecture.md, formats/).
//
//   open_byte_source(path, compression)   plain, gzip (single or multi-member), zstd (single or
//                                         multi-frame) or bz2 (single or multistream), picked by
//                                         the file's magic bytes whatever it is called; read
//                                         sequentially on the caller's thread (document shards,
//                                         wikiextractor output, sentence text)
//   Bz2Reader (bz2_parallel.h)            a whole dump decoded block-parallel in a oneTBB pipeline,
//                                         pieces in order (wikiprep); built on bz2_scan.h, which
//                                         finds bz2 blocks and decodes one on its own
//
// They decode with zlib / libzstd / our bz2 block decoder (libbz2 its reference, bz2_scan.h) and
// give exactly `gzip -dc` / `zstd -dc` / `bzip2 -dc`.
// There is one bz2 decoder: the serial bz2 source is Bz2Reader with its stages run on the caller's
// thread, so both give the same bytes and the same errors for the same file. Streams (members)
// are read one after another; bytes after the last one that do not start another are trailing
// garbage, ignored with a warning as bzip2 -d and gzip -d do. A truncated or corrupt stream is an
// Error naming the file and a compressed byte offset, after every byte decoded before the damage
// (for bz2: every complete block; zstd and gzip may hand out bytes of a member whose checksum then
// fails, as their tools do).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace pretrain {

// Decoded bytes of one file, read in order.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n decompressed bytes; 0 only at the end (or for n == 0). Throws Error on a truncated or
  // corrupt stream, naming the compressed byte offset.
  virtual size_t read(char* buf, size_t n) = 0;
  // Bytes read from the file so far (compressed, and read ahead of what read() returned).
  virtual uint64_t file_bytes_read() const = 0;
};

// Opens `path` with the decoder its first bytes call for; `compression` is set to "gz", "zst",
// "bz2" or "" (plain). Throws Error when the file cannot be opened.
std::unique_ptr<ByteSource> open_byte_source(const std::string& path, std::string& compression);

}  // namespace pretrain
