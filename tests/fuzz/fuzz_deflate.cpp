// Fuzz target for deflate::inflate, the raw-chunk reader's inflater (libdeflate), against zlib.
// Input: u32 little-endian expected size (kept under 1 MiB), then the zlib stream. An Error is an
// accepted outcome; a crash, a write past the buffer (ASan), another exception, or bytes other
// than zlib's where both accept the stream is a bug, and so is refusing what zlib decodes to the
// expected size. Ours may accept what zlib refuses (libdeflate ignores a header's window size
// under 32 KiB, for one): Adler-32 still vouches for the bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/error.h"
#include "formats/deflate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pretrain;
  uint32_t expected = 0;
  if (size >= 4) std::memcpy(&expected, data, 4);
  expected %= 1u << 20;
  const uint8_t* stream = data + std::min<size_t>(size, 4);
  const size_t n = size - std::min<size_t>(size, 4);
  // Exactly `expected` bytes on the heap, so ASan sees a write one past the end.
  auto ours = std::make_unique<uint8_t[]>(expected);
  bool ours_ok = true;
  try {
    deflate::inflate(stream, n, ours.get(), expected, Where{"fuzz.hdf5"}, "chunk");
  } catch (const Error&) {
    ours_ok = false;
  }
  std::vector<uint8_t> ref(expected);
  bool ref_ok = true;
  try {
    deflate::inflate(deflate::Codec::zlib, stream, n, ref.data(), expected, Where{"fuzz.hdf5"}, "chunk");
  } catch (const Error&) {
    ref_ok = false;
  }
  if (ours_ok && ref_ok && std::memcmp(ours.get(), ref.data(), expected) != 0) std::abort();
  if (ref_ok && !ours_ok) std::abort();
  return 0;
}
