// common/manifest.h: manifest.json round trips, verification of the shards it lists, malformed
// input named.
#include "common/manifest.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "test_util.h"

namespace pretrain::manifest_test {
namespace {

using testing::TempDir;

TEST(Manifest, RoundTripsAndVerifies) {
  TempDir dir;
  write_file_atomic(dir.file("a.bin"), "0123456789");
  write_file_atomic(dir.file("a.idx"), "idx");
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer.kind = "wordpiece";
  m.tokenizer.vocab_hash = "abcd";
  m.tokenizer.vocab_size = 30522;
  m.tokenizer.special_ids = {{"[CLS]", 101}, {"[SEP]", 102}};
  m.seq_len = 128;
  m.tool = "test";
  m.args = {"--x", "1"};
  m.seed = 12345;
  ShardEntry e = Manifest::describe(dir.path(), "a.bin", 2);
  e.companions["a.idx"] = hex64(xxh3_file(dir.file("a.idx")));
  m.shards.push_back(e);
  m.write(dir.file(kManifestName));

  Manifest r = Manifest::read(dir.file(kManifestName));
  EXPECT_EQ(r.to_json(), m.to_json());
  EXPECT_EQ(r.tokenizer.special_ids.at("[SEP]"), 102);
  EXPECT_EQ(*r.seed, 12345u);
  EXPECT_TRUE(verify_manifest(r, dir.path(), [](const std::string&) { return uint64_t{2}; }).empty());

  auto wrong_count = verify_manifest(r, dir.path(), [](const std::string&) { return uint64_t{3}; });
  ASSERT_EQ(wrong_count.size(), 1u);
  EXPECT_NE(wrong_count[0].message.find("expected 2 records, found 3"), std::string::npos);

  write_file_atomic(dir.file("a.bin"), "0123456780");  // same size, other bytes
  auto bad = verify_manifest(r, dir.path());
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].file, "a.bin");
  EXPECT_NE(bad[0].message.find("xxh3"), std::string::npos);

  std::remove(dir.file("a.idx").c_str());
  auto missing = verify_manifest(r, dir.path());
  ASSERT_FALSE(missing.empty());
}

TEST(Manifest, MalformedInputNamesTheProblem) {
  TempDir dir;
  write_file_atomic(dir.file("m.json"), "{not json");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1})");
  try {
    Manifest::read(dir.file("m.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'shards'"), std::string::npos) << e.what();
  }
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1,"shards":[{"file":"../x","records":1,"bytes":1,"xxh3":"0"}]})");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":99,"shards":[]})");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  // Counts must be integers: a float (here past 2^64) was cast, undefined behaviour out of range.
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1,"shards":[{"file":"x","records":1e30,"bytes":1,"xxh3":"0"}]})");
  try {
    Manifest::read(dir.file("m.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: malformed manifest:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("but is 1e+30"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::manifest_test
