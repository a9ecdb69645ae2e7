// Inputs: sources in the order given, a manifest's shards in its order, a directory's files sorted;
// a file that differs from its manifest is refused naming it.
#include "datagen/dedup/dedup_inputs.h"

#include <gtest/gtest.h>

#include "common/file.h"
#include "dedup_fixture.h"
#include "test_util.h"

namespace pretrain::dedup_inputs_test {
namespace {

using namespace dedup_fixture;
using testing::TempDir;

TEST(DedupInputs, InputOrder) {
  TempDir dir;
  std::vector<Document> docs;
  for (int i = 0; i < 40; ++i) docs.push_back(doc(std::to_string(i), random_text(i, 30)));
  write_shards(dir.file("shards"), docs, 2000);
  make_dirs(dir.file("plain"));
  write_jsonl(dir.file("plain/b.jsonl"), {docs[0]});
  write_jsonl(dir.file("plain/a.jsonl"), {docs[1]});
  auto files = plan_dedup_inputs({dir.file("plain"), dir.file("shards")});
  ASSERT_GT(files.size(), 3u);
  EXPECT_EQ(base_name(files[0].path), "a.jsonl");
  EXPECT_EQ(base_name(files[1].path), "b.jsonl");
  EXPECT_EQ(files[1].source, 0);
  EXPECT_EQ(files[1].expected_records, -1);
  EXPECT_EQ(base_name(files[2].path), "docs-00000.jsonl.zst");
  EXPECT_EQ(files[2].source, 1);
  EXPECT_EQ(files[2].source_name, dir.file("shards"));
  EXPECT_GT(files[2].expected_records, 0);
  EXPECT_FALSE(files[2].manifest_xxh3.empty());
  for (const auto& f : files) EXPECT_NO_THROW(verify_dedup_input(f));
}

TEST(DedupInputs, DamagedShardIsNamed) {
  TempDir dir;
  write_shards(dir.file("shards"), {doc("1", random_text(1, 200))});
  auto files = plan_dedup_inputs({dir.file("shards")});
  std::string bytes = read_file(files[0].path);
  bytes[bytes.size() / 2] ^= 0x10;
  write_file_atomic(files[0].path, bytes);
  std::string message = testing::error_message([&] { verify_dedup_input(files[0]); });
  EXPECT_NE(message.find("docs-00000.jsonl.zst"), std::string::npos) << message;
  EXPECT_NE(message.find("xxh3"), std::string::npos) << message;
  write_file_atomic(files[0].path, bytes.substr(0, 10));
  message = testing::error_message([&] { verify_dedup_input(files[0]); });
  EXPECT_NE(message.find("bytes (manifest)"), std::string::npos) << message;
}

TEST(DedupInputs, NotDocumentShardsOrNothing) {
  TempDir dir;
  make_dirs(dir.file("m"));
  write_file_atomic(dir.file("m/manifest.json"), R"({"format":"megatron","version":1,"shards":[]})");
  EXPECT_NE(testing::error_message([&] { plan_dedup_inputs({dir.file("m")}); }).find("document shards"), std::string::npos);
  EXPECT_THROW(plan_dedup_inputs({dir.file("nothing-*.jsonl")}), UsageError);
}

}  // namespace
}  // namespace pretrain::dedup_inputs_test
