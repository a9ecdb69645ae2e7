// xxh3-64 of bytes and files (the checksum in every manifest), as 16 lowercase hex digits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace pretrain {

uint64_t xxh3_bytes(const void* data, size_t n, uint64_t seed = 0);
uint64_t xxh3_file(const std::string& path);
std::string hex64(uint64_t v);  // "00ab…", 16 digits
// Parses hex64 output back; throws Error on anything else.
uint64_t parse_hex64(const std::string& s);

// Incremental xxh3-64, for writers that hash while they write.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(const void* data, size_t n);
  uint64_t digest() const;

 private:
  void* state_;
};

}  // namespace pretrain
