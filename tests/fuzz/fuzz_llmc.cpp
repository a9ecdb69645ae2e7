// Fuzz target for LlmcReader: the input is the whole shard file. Any pretrain::Error is an
// accepted outcome; a crash or another exception is a bug.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/error.h"
#include "formats/llmc.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pretrain;
  static const fuzz::ScratchFile scratch("llmc", ".bin");
  const std::string& path = scratch.path();
  scratch.write(std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    LlmcReader r(path);
    uint64_t sum = 0;
    for (size_t i = 0; i < r.size(); ++i) sum += r[i];
    if (r.size() == 0 && sum != 0) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
