// The safetensors reader and writer (trainer/safetensors.h): what we write reads back with its
// names, shapes, values and metadata, in the format's layout (names sorted, data 8-byte aligned,
// contiguous offsets); F16 and BF16 tensors (PyTorch's and HF's half-precision files) widen to
// the exact float; damaged or foreign files are errors naming the file and the tensor.
#include "trainer/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"

namespace pretrain::safetensors_test {
namespace {

using pretrain::testing::error_message;
using pretrain::testing::TempDir;

// A file of `header` after its 8-byte little-endian length, then `data`.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::string length(8, '\0');
  for (size_t i = 0; i < 8; ++i) length[i] = char((header.size() >> (8 * i)) & 0xff);
  write_file_atomic(path, length + header + data);
}

// n 16-bit values, little-endian.
std::string halves(const std::vector<uint16_t>& values) {
  std::string out;
  for (uint16_t v : values) out += char(v & 0xff), out += char(v >> 8);
  return out;
}

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const std::map<std::string, HostTensor> tensors = {{"b.weight", {{2, 3}, {1, -2, 3.5f, 4, 5, 6e-30f}}},
                                                     {"a.bias", {{3}, {0.25f, -0.0f, 1e30f}}},
                                                     {"c.empty", {{0, 4}, {}}}};
  write_safetensors(path, tensors, {{"format", "pt"}, {"model", "tiny"}});
  std::map<std::string, std::string> metadata;
  const auto back = read_safetensors(path, &metadata);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(back.at(name).shape, t.shape) << name;
    EXPECT_EQ(back.at(name).data, t.data) << name;
  }
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"model", "tiny"}}));

  // The layout other readers expect: a header padded so the data starts 8-byte aligned, and each
  // tensor's bytes right after the one before it in name order.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  uint64_t offset = 0;
  for (const char* name : {"a.bias", "b.weight", "c.empty"}) {
    const auto range = header.at(name).at("data_offsets").get<std::vector<uint64_t>>();
    EXPECT_EQ(header.at(name).at("dtype"), "F32") << name;
    EXPECT_EQ(range[0], offset) << name;
    offset = range[1];
  }
  EXPECT_EQ(8 + n + offset, bytes.size());
}

// F16 (normal, subnormal, zero of each sign, infinities, NaN) and BF16 widen to the float they
// stand for; a metadata value that is not a string comes back as its JSON text.
TEST(Safetensors, HalfAndBfloat16TensorsWidenExactly) {
  TempDir dir;
  const std::string path = dir.file("half.safetensors");
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x03ff, 0x8000, 0x7c00, 0xfc00, 0x7e00};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x0001, 0x7f80};
  write_raw(path,
            R"({"__metadata__":{"n":3},"h":{"dtype":"F16","shape":[10],"data_offsets":[0,20]},)"
            R"("b":{"dtype":"BF16","shape":[2,2],"data_offsets":[20,28]}})",
            halves(f16) + halves(bf16));
  std::map<std::string, std::string> metadata;
  const auto t = read_safetensors(path, &metadata);
  EXPECT_EQ(metadata.at("n"), "3");
  const std::vector<float>& h = t.at("h").data;
  ASSERT_EQ(h.size(), 10u);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], 0.333251953125f);            // 2^-2 × (1 + 0x155 / 1024)
  EXPECT_EQ(h[3], 65504.0f);                   // the largest half
  EXPECT_EQ(h[4], std::ldexp(1.0f, -24));      // the smallest subnormal
  EXPECT_EQ(h[5], std::ldexp(1023.0f, -24));   // the largest subnormal
  EXPECT_EQ(h[6], 0.0f);
  EXPECT_TRUE(std::signbit(h[6]));
  EXPECT_EQ(h[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(h[8], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(h[9]));
  EXPECT_EQ(t.at("b").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.at("b").data, (std::vector<float>{1.0f, -3.0f, std::ldexp(1.0f, -133), INFINITY}));
}

// A dtype we do not read (integer tensors) is refused naming the file, the tensor and the dtype.
TEST(Safetensors, AnotherDtypeIsNamed) {
  TempDir dir;
  const std::string path = dir.file("ids.safetensors");
  write_raw(path, R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'));
  const std::string e = error_message([&] { read_safetensors(path); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'ids': dtype I64 (expected F32, F16 or BF16)"), std::string::npos) << e;
}

TEST(Safetensors, DamagedFilesAreClearErrors) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"a", HostTensor{{2, 3}, {1, 2, 3, 4, 5, 6}}}});
  auto back = read_safetensors(path);
  EXPECT_EQ(back.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back.at("a").data[5], 6.0f);
  const std::string bytes = read_file(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() - 4));  // truncated data
  EXPECT_THROW(
      {
        try {
          read_safetensors(path);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("tensor 'a'"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  write_file_atomic(path, std::string("\xff\xff\xff\xff\0\0\0\0{}", 10));  // header longer than the file
  EXPECT_THROW(read_safetensors(path), Error);
  write_file_atomic(path, std::string("\x02\0\0\0\0\0\0\0[]", 10));  // not an object
  EXPECT_THROW(read_safetensors(path), Error);
  // 2^62 × 4 elements wrap to 0 in 64 bits: an empty tensor that claims a huge shape.
  write_raw(path, R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", "");
  EXPECT_THROW(read_safetensors(path), Error);
  // A dimension past 2^64 parses as a float, which nlohmann's get<int64_t>() cast out of range
  // (UBSan, found by fuzzing; the reproducer is in the corpus); a fractional one it truncated.
  for (const std::string dim : {"461168601842738793047", "2.5"}) {
    write_raw(path, R"({"a":{"dtype":"F32","shape":[)" + dim + R"(,1],"data_offsets":[0,8]}})", std::string(8, '\0'));
    try {
      read_safetensors(path);
      ADD_FAILURE() << "read a shape of " << dim;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tensor 'a': [json.exception.type_error.302] type must be an integer"),
                std::string::npos)
          << e.what();
    }
  }
  // An empty tensor is fine.
  write_safetensors(path, {{"e", HostTensor{{0, 3}, {}}}});
  EXPECT_TRUE(read_safetensors(path).at("e").data.empty());
}

}  // namespace
}  // namespace pretrain::safetensors_test
