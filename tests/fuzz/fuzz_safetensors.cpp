// Fuzz target: arbitrary bytes as a safetensors file (what `--init-from` and `--resume` read).
// Any pretrain::Error is a fine answer; a crash, a sanitizer report or any other exception is a bug.
// Seeds (corpus/safetensors/) were written by HF's safetensors.torch.save_file: F32, BF16, F16,
// an empty tensor and metadata.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "fuzz_util.h"
#include "trainer/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pretrain::fuzz::ScratchFile scratch("safetensors", ".safetensors");
  scratch.write(std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    std::map<std::string, std::string> metadata;
    const auto tensors = pretrain::read_safetensors(scratch.path(), &metadata);
    for (const auto& [name, t] : tensors) {
      uint64_t n = 1;
      for (int64_t d : t.shape)
        if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) __builtin_trap();  // the reader let it through
      if (n != t.data.size()) __builtin_trap();  // a shape that does not match its data
    }
  } catch (const pretrain::Error&) {
  }
  return 0;
}
