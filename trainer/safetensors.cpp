#include "trainer/safetensors.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"

namespace pretrain {

void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  AtomicFile out(path);
  const uint64_t n = text.size();
  out.write_pod(n);
  out.write(text);
  for (const auto& [name, t] : tensors) out.write(t.data.data(), t.data.size() * sizeof(float));
  out.commit();
}

namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do { ++e, m <<= 1; } while (!(m & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

std::map<std::string, HostTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  MappedFile file(path);
  const uint8_t* base = file.data();
  const uint64_t size = file.size();
  if (size < 8) throw Error(Where::at_offset(path, 0), cat("expected an 8-byte safetensors header length, found ", size, " bytes"));
  uint64_t n;
  std::memcpy(&n, base, 8);
  if (n > size - 8) throw Error(Where::at_offset(path, 0), cat("header length ", n, " runs past the end of the file (", size, " bytes)"));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(base + 8, base + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Where::at_offset(path, 8), cat("expected a JSON header: ", e.what()));
  }
  if (!header.is_object()) throw Error(Where::at_offset(path, 8), "expected a JSON object as the header");
  const uint64_t data_start = 8 + n, data_size = size - data_start;
  std::map<std::string, HostTensor> out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (metadata && info.is_object())
        for (const auto& [k, v] : info.items()) (*metadata)[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    try {
      const std::string dtype = info.at("dtype").get<std::string>();
      HostTensor t;
      t.shape = json_integers<int64_t>(info.at("shape"));
      const auto range = json_integers<uint64_t>(info.at("data_offsets"));
      uint64_t numel = 1;
      for (int64_t d : t.shape) {
        if (d < 0) throw Error("negative dimension");
        if (__builtin_mul_overflow(numel, uint64_t(d), &numel)) throw Error("shape with more than 2^64 elements");
      }
      const uint64_t width = dtype == "F32" ? 4 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
      if (width == 0) throw Error(cat("dtype ", dtype, " (expected F32, F16 or BF16)"));
      if (range.size() != 2 || range[0] > range[1] || range[1] > data_size || numel > data_size / width ||
          range[1] - range[0] != numel * width)
        throw Error(cat("data_offsets do not hold ", numel, " ", dtype, " values inside the ", data_size, " data bytes"));
      const uint8_t* src = base + data_start + range[0];
      t.data.resize(numel);
      if (width == 4) {
        if (numel) std::memcpy(t.data.data(), src, numel * 4);  // an empty vector's data() may be null
      } else {
        for (uint64_t i = 0; i < numel; ++i) {
          uint16_t h;
          std::memcpy(&h, src + 2 * i, 2);
          if (dtype == "BF16") {
            const uint32_t bits = uint32_t(h) << 16;
            std::memcpy(&t.data[i], &bits, 4);
          } else {
            t.data[i] = half_to_float(h);
          }
        }
      }
      out.emplace(name, std::move(t));
    } catch (const std::exception& e) {
      throw Error(Where::at_offset(path, 8), cat("tensor '", name, "': ", e.what()));
    }
  }
  return out;
}

}  // namespace pretrain
