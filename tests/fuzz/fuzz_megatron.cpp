// Fuzz target for MegatronReader. Input: u16 little-endian n, then n bytes of .idx, then the
// .bin (the rest; when n exceeds what is there, the .idx takes it all and the .bin is empty).
// Any pretrain::Error is an accepted outcome; a crash, a hang or another exception is a bug.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "formats/megatron.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pretrain;
  uint16_t n = 0;
  if (size >= 2) std::memcpy(&n, data, 2);
  std::string_view rest(reinterpret_cast<const char*>(data) + std::min<size_t>(size, 2), size - std::min<size_t>(size, 2));
  const size_t idx_len = std::min<size_t>(n, rest.size());
  // The reader opens <prefix>.idx and <prefix>.bin: the input's first two bytes split it in two.
  static const fuzz::ScratchFile idx("megatron", ".idx"), bin("megatron", ".bin");
  const std::string prefix = megatron_prefix(idx.path());
  idx.write(rest.substr(0, idx_len));
  bin.write(rest.substr(idx_len));
  try {
    MegatronReader r(prefix);
    // Everything the reader accepted must be readable without going out of bounds.
    uint64_t sum = 0;
    std::vector<int32_t> scratch;
    for (size_t i = 0; i < r.num_sequences(); ++i) {
      TokenSpan s = r.sequence(i);
      for (size_t k = 0; k < s.size; ++k) sum += uint64_t(s[k]);
      scratch.resize(s.size);
      try {
        s.to_int32(scratch.data());
      } catch (const Error&) {
      }
    }
    for (size_t d = 0; d < r.num_documents(); ++d) {
      auto [first, last] = r.document_range(d);
      if (first > last || last > r.num_sequences()) __builtin_trap();
    }
    volatile uint64_t sink = sum;  // keeps the reads from being optimized away
    (void)sink;
  } catch (const Error&) {
  }
  return 0;
}
