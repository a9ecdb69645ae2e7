// Signature files: what is written reads back section by section; a damaged or truncated file is
// refused (or fails verify()) naming it.
#include "datagen/dedup/signature_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::signature_file_test {
namespace {

using testing::TempDir;

DocSignature make(int i, bool minhash) {
  DocSignature s;
  s.exact = {static_cast<uint64_t>(i) * 3 + 1, static_cast<uint64_t>(i) * 5 + 2};
  s.has_minhash = minhash;
  if (minhash) {
    s.band_keys = {100u + i, 200u + i};
    s.signature = {1u + i, 2u + i, 3u + i, 4u + i};
  }
  s.id = std::string(static_cast<size_t>(i), 'x') + std::to_string(i);
  return s;
}

TEST(SignatureFile, RoundTrip) {
  TempDir dir;
  SignatureFileBuilder b(0xabcdef, 4, 2);
  for (int i = 0; i < 5; ++i) b.add(make(i, i != 2));
  b.write(dir.file("s.bin"));
  SignatureFile f(dir.file("s.bin"));
  EXPECT_EQ(f.key(), 0xabcdefu);
  EXPECT_EQ(f.documents(), 5u);
  EXPECT_EQ(f.hashes(), 4);
  EXPECT_EQ(f.bands(), 2);
  EXPECT_TRUE(f.verify());
  EXPECT_EQ(f.flags(), (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  EXPECT_EQ(f.exact()[3], make(3, true).exact);
  EXPECT_EQ(f.exact_hash(4), make(4, true).exact);
  std::vector<uint64_t> keys(5);
  f.band_keys(1, keys.data());
  EXPECT_EQ(keys, (std::vector<uint64_t>{200, 201, 0, 203, 204}));
  std::vector<uint32_t> sig(4);
  f.signature(3, sig.data());
  EXPECT_EQ(sig, (std::vector<uint32_t>{4, 5, 6, 7}));
  EXPECT_EQ(f.id(0), "0");
  EXPECT_EQ(f.id(4), "xxxx4");
}

TEST(SignatureFile, DamageIsFound) {
  TempDir dir;
  SignatureFileBuilder b(1, 4, 2);
  for (int i = 0; i < 3; ++i) b.add(make(i, true));
  b.write(dir.file("s.bin"));
  std::string bytes = read_file(dir.file("s.bin"));
  std::string flipped = bytes;
  flipped[80] ^= 1;
  write_file_atomic(dir.file("flipped.bin"), flipped);
  EXPECT_FALSE(SignatureFile(dir.file("flipped.bin")).verify());
  write_file_atomic(dir.file("short.bin"), bytes.substr(0, bytes.size() - 16));
  EXPECT_NE(testing::error_message([&] { SignatureFile f(dir.file("short.bin")); }).find("short.bin"), std::string::npos);
  write_file_atomic(dir.file("other.bin"), std::string(100, 'z'));
  EXPECT_NE(testing::error_message([&] { SignatureFile f(dir.file("other.bin")); }).find("PTDDSIG1"), std::string::npos);
}

}  // namespace
}  // namespace pretrain::signature_file_test
