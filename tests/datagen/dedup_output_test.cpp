// Output parts: the record reads back with its key only, and a part is taken as committed only when
// its shard and report part are there as the record says.
#include "datagen/dedup/dedup_output.h"

#include <gtest/gtest.h>

#include "common/file.h"
#include "common/hash.h"
#include "test_util.h"

namespace pretrain::dedup_output_test {
namespace {

using testing::TempDir;

TEST(DedupOutput, RecordRoundTrip) {
  OutputPart p;
  p.shard = ShardEntry{"docs-00003.jsonl.zst", 5, 1234, "00000000000000ab", {}};
  p.documents = 9, p.kept = 5, p.removed_exact = 1, p.removed_near = 3, p.jsonl_bytes = 4000, p.report_bytes = 77;
  auto back = OutputPart::from_json(p.to_json(11), 11);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->shard->file, "docs-00003.jsonl.zst");
  EXPECT_EQ(back->removed_near, 3u);
  EXPECT_FALSE(OutputPart::from_json(p.to_json(11), 12));
  p.shard.reset();
  EXPECT_FALSE(OutputPart::from_json(p.to_json(11), 11)->shard);
  EXPECT_FALSE(OutputPart::from_json(nlohmann::json::parse(R"({"key":"000000000000000b"})"), 11));
}

TEST(DedupOutput, CommittedOnlyWhenFilesAgree) {
  TempDir dir;
  OutputFileJob job;
  job.key = 5;
  job.shard_path = dir.file("docs-00000.jsonl.zst");
  job.report_path = dir.file("report.jsonl");
  job.record_path = dir.file("out.json");
  write_file_atomic(job.shard_path, "shard bytes");
  write_file_atomic(job.report_path, "report\n");
  OutputPart p;
  p.shard = ShardEntry{"docs-00000.jsonl.zst", 1, 11, hex64(xxh3_file(job.shard_path)), {}};
  p.report_bytes = 7;
  write_file_atomic(job.record_path, p.to_json(5).dump());
  EXPECT_TRUE(committed_output_part(job));
  write_file_atomic(job.shard_path, "shard bytez");  // same size, other content
  EXPECT_FALSE(committed_output_part(job));
  write_file_atomic(job.shard_path, "shard bytes");
  write_file_atomic(job.report_path, "report\nmore\n");
  EXPECT_FALSE(committed_output_part(job));
  write_file_atomic(job.report_path, "report\n");
  job.key = 6;
  EXPECT_FALSE(committed_output_part(job));
}

}  // namespace
}  // namespace pretrain::dedup_output_test
