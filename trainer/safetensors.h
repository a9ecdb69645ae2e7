// The safetensors format (HF): an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data. We write F32 tensors and
// read F32 (and F16/BF16, widened) so weights move between us, PyTorch, HF and nanoGPT.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pretrain {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Tensors in name order (the format sorts them); `metadata` goes into "__metadata__". Atomic.
void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Throws Error naming the file and what is wrong (truncated, bad header, offsets out of range).
std::map<std::string, HostTensor> read_safetensors(const std::string& path,
                                                   std::map<std::string, std::string>* metadata = nullptr);

}  // namespace pretrain
