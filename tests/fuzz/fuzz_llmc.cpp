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

namespace {

// The reader opens a file, so each input is written to a scratch file, removed at exit.
struct Scratch {
  std::string path = "/tmp/fuzz-llmc-" + std::to_string(::getpid()) + ".bin";
  ~Scratch() { ::unlink(path.c_str()); }
};

// Plain writes: write_file_atomic would fsync every input.
void write_scratch(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pretrain;
  static const Scratch scratch;
  const std::string& path = scratch.path;
  write_scratch(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    LlmcReader r(path);
    uint64_t sum = 0;
    for (size_t i = 0; i < r.size(); ++i) sum += r[i];
    if (r.size() == 0 && sum != 0) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
