// --resume's starting point: from an interrupted run's checkpoint (its shards kept, the later ones
// removed, the pages to skip and the counts to go on from), a complete run's stats, or the
// beginning; and the refusals: other options, format or input, a damaged kept shard, a resume
// point that does not match the shard list.
#include "datagen/wikiprep/resume_point.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "datagen/wikiprep/wikiprep_manifest.h"
#include "test_util.h"

namespace pretrain::resume_point_test {
namespace {

using nlohmann::json;
using testing::TempDir;

std::string sample_dump() { return testing::source_dir() + "/tests/data/sample-dump.xml"; }

// The options of a run of the sample into `dir` that stops after two of its shards (of 900 bytes).
WikiprepOptions interrupted_run(const std::string& dir) {
  WikiprepOptions o;
  o.input = sample_dump();
  o.output_dir = dir;
  o.shard_bytes = 900;
  o.stop_after_shards = 2;
  EXPECT_THROW(run_wikiprep(o), WikiprepInterrupted);
  o.stop_after_shards = 0;
  o.resume = true;
  return o;
}

Manifest base_of(const WikiprepOptions& o) { return wikiprep_base_manifest(o, file_size(o.input)); }

std::vector<std::string> files_and_checksums(const std::vector<ShardEntry>& shards) {
  std::vector<std::string> out;
  for (const ShardEntry& e : shards) out.push_back(e.file + " " + e.xxh3);
  return out;
}

TEST(ResumePoint, AnInterruptedRunGoesOnAfterItsCheckpoint) {
  TempDir dir;
  WikiprepOptions o = interrupted_run(dir.path());
  Manifest checkpoint = Manifest::read(dir.file(kManifestName));
  write_file_atomic(dir.file("docs-00002.jsonl.zst"), "a shard the killed run had not listed");
  write_file_atomic(dir.file("docs-00003.jsonl.zst.tmp-99"), "its temp file");
  ResumePoint point = load_resume_point(o, base_of(o));
  EXPECT_FALSE(point.finished);
  EXPECT_EQ(files_and_checksums(point.kept), files_and_checksums(checkpoint.shards));
  ASSERT_EQ(point.kept.size(), 2u);
  EXPECT_EQ(point.skip_pages, checkpoint.extra["resume"]["pages_seen"].get<uint64_t>());
  EXPECT_GT(point.skip_pages, 0u);
  EXPECT_EQ(counts_to_json(point.baseline), counts_to_json(counts_from_json(checkpoint.stats, "m")));
  EXPECT_EQ(point.baseline.articles_written, checkpoint.total_records());
  EXPECT_TRUE(file_exists(dir.file("docs-00001.jsonl.zst")));
  EXPECT_FALSE(file_exists(dir.file("docs-00002.jsonl.zst")));
  EXPECT_FALSE(file_exists(dir.file("docs-00003.jsonl.zst.tmp-99")));
}

TEST(ResumePoint, ACompleteRunIsFinished) {
  TempDir dir;
  WikiprepOptions o = interrupted_run(dir.path());
  WikiprepStats done = run_wikiprep(o);
  ResumePoint point = load_resume_point(o, base_of(o));
  ASSERT_TRUE(point.finished);
  EXPECT_TRUE(point.finished->complete);
  EXPECT_EQ(point.finished->shards, done.shards);
  EXPECT_EQ(point.finished->articles_written, 6u);
  EXPECT_EQ(point.finished->pages_seen, 10u);
}

TEST(ResumePoint, NoManifestStartsFromTheBeginning) {
  TempDir dir;
  write_file_atomic(dir.file("docs-00004.jsonl.zst"), "left over");
  WikiprepOptions o;
  o.input = sample_dump();
  o.output_dir = dir.path();
  o.resume = true;
  ResumePoint point = load_resume_point(o, base_of(o));
  EXPECT_FALSE(point.finished);
  EXPECT_TRUE(point.kept.empty());
  EXPECT_EQ(point.skip_pages, 0u);
  EXPECT_FALSE(file_exists(dir.file("docs-00004.jsonl.zst")));
}

TEST(ResumePoint, ChecksOptionsAndShards) {
  TempDir dir;
  WikiprepOptions o = interrupted_run(dir.path());
  WikiprepOptions other = o;
  other.min_chars = 10;
  EXPECT_THROW(run_wikiprep(other), UsageError);
  {
    std::ofstream damage(dir.file("docs-00001.jsonl.zst"), std::ios::app);
    damage << "x";
  }
  try {
    run_wikiprep(o);
    FAIL() << "damaged shard accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("docs-00001.jsonl.zst"), std::string::npos) << e.what();
  }
}

TEST(ResumePoint, AnotherFormatOrInputIsRefused) {
  TempDir dir;
  WikiprepOptions o = interrupted_run(dir.path());
  WikiprepOptions sentences = o;
  sentences.format = WikiprepFormat::sentences;
  try {
    load_resume_point(sentences, base_of(sentences));
    FAIL() << "another format accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume of format docs-jsonl-zst with --format sentences-txt"), std::string::npos)
        << e.what();
  }
  WikiprepOptions renamed = o;
  renamed.input = dir.file("other-dump.xml");
  write_file_atomic(renamed.input, read_file(o.input));
  try {
    load_resume_point(renamed, base_of(renamed));
    FAIL() << "another input accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume on another input"), std::string::npos) << e.what();
  }
  Manifest bigger = base_of(o);
  bigger.extra["input"]["size"] = file_size(o.input) + 1;  // the same name, another size
  EXPECT_THROW(load_resume_point(o, bigger), UsageError);
  WikiprepOptions from_stdin = o;
  from_stdin.input = "-";  // cannot be checked: a warning, and the run goes on
  EXPECT_EQ(load_resume_point(from_stdin, base_of(o)).kept.size(), 2u);
}

TEST(ResumePoint, AResumePointThatDoesNotMatchTheShardsIsAnError) {
  TempDir dir;
  WikiprepOptions o = interrupted_run(dir.path());
  Manifest m = Manifest::read(dir.file(kManifestName));
  m.extra["resume"]["shards"] = 3;
  m.write(dir.file(kManifestName));
  std::string what = testing::error_message([&] { load_resume_point(o, base_of(o)); });
  EXPECT_NE(what.find(dir.file(kManifestName)), std::string::npos) << what;
  EXPECT_NE(what.find("extra.resume: expected {pages_seen, shards} matching the shard list"), std::string::npos) << what;
}

}  // namespace
}  // namespace pretrain::resume_point_test
