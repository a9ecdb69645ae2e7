// wikiprep's manifest: the counts to JSON and back (a missing one named), the options and input a
// --resume compares, the checkpoint's resume point, and the complete manifest's stats and site.
#include "datagen/wikiprep/wikiprep_manifest.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::wikiprep_manifest_test {
namespace {

using nlohmann::json;
using testing::TempDir;

// Every count different, so a field read into another shows.
WikiprepCounts distinct_counts() {
  WikiprepCounts c;
  c.pages_seen = 11, c.articles_written = 7, c.redirects_skipped = 2, c.namespaces_skipped = 1;
  c.short_skipped = 3, c.sentences = 40, c.text_bytes = 5000, c.invalid_utf8_replaced = 5;
  return c;
}

bool same(const WikiprepCounts& a, const WikiprepCounts& b) { return counts_to_json(a) == counts_to_json(b); }

TEST(WikiprepManifest, CountsRoundTripByName) {
  json j = counts_to_json(distinct_counts());
  EXPECT_EQ(j["pages_seen"], 11u);
  EXPECT_EQ(j["short_skipped"], 3u);
  EXPECT_EQ(j["invalid_utf8_replaced"], 5u);
  EXPECT_EQ(j.size(), 8u);
  WikiprepCounts back = counts_from_json(j, "m.json");
  EXPECT_EQ(back.pages_seen, 11u);
  EXPECT_EQ(back.sentences, 40u);
  EXPECT_TRUE(same(back, distinct_counts()));
}

TEST(WikiprepManifest, AMissingOrWrongCountIsNamed) {
  json j = counts_to_json(distinct_counts());
  j.erase("sentences");
  std::string what = testing::error_message([&] { counts_from_json(j, "out/manifest.json"); });
  EXPECT_NE(what.find("out/manifest.json"), std::string::npos) << what;
  EXPECT_NE(what.find("stats.sentences: expected an unsigned number"), std::string::npos) << what;
  j = counts_to_json(distinct_counts());
  j["text_bytes"] = -1;
  EXPECT_NE(testing::error_message([&] { counts_from_json(j, "m"); }).find("stats.text_bytes"), std::string::npos);
  j["text_bytes"] = "5000";
  EXPECT_NE(testing::error_message([&] { counts_from_json(j, "m"); }).find("stats.text_bytes"), std::string::npos);
}

TEST(WikiprepManifest, AddCountsAddsEveryField) {
  WikiprepCounts sum = distinct_counts();
  add_counts(sum, distinct_counts());
  json j = counts_to_json(sum), one = counts_to_json(distinct_counts());
  for (const auto& [key, value] : one.items()) EXPECT_EQ(j[key], 2 * value.get<uint64_t>()) << key;
}

TEST(WikiprepManifest, BaseManifestRecordsInputAndOptions) {
  WikiprepOptions o;
  o.input = "dump.xml.bz2";
  o.format = WikiprepFormat::sentences;
  o.shard_bytes = 1234;
  o.namespaces = {0, 14};
  o.min_chars = 9;
  o.args = {"dump.xml.bz2", "-o", "out"};
  Manifest m = wikiprep_base_manifest(o, 777);
  EXPECT_EQ(m.format, kFormatSentences);
  EXPECT_TRUE(m.tool.starts_with("wikiprep ")) << m.tool;
  EXPECT_EQ(m.args, o.args);
  EXPECT_EQ(m.extra["input"], (json{{"path", "dump.xml.bz2"}, {"size", 777}}));
  EXPECT_EQ(m.extra["options"], wikiprep_options_json(o));
  json options = wikiprep_options_json(o);
  EXPECT_EQ(options["format"], kFormatSentences);
  EXPECT_EQ(options["shard_bytes"], 1234u);
  EXPECT_EQ(options["namespaces"], json({0, 14}));
  EXPECT_EQ(options["min_chars"], 9u);
  WikiprepOptions other = o;
  other.keep_redirects = true;
  EXPECT_NE(wikiprep_options_json(other), options);
  other = o;
  other.args = {"something", "else"};  // the command line is not an option a --resume compares
  EXPECT_EQ(wikiprep_options_json(other), options);
}

TEST(WikiprepManifest, CheckpointListsKeptAndWrittenShardsWithTheResumePoint) {
  TempDir dir;
  WikiprepOptions o;
  o.input = "dump.xml";
  Manifest base = wikiprep_base_manifest(o, 10);
  std::vector<ShardEntry> kept = {{"docs-00000.jsonl.zst", 3, 100, "00000000000000aa", {}}};
  std::vector<ShardEntry> written = {{"docs-00001.jsonl.zst", 4, 120, "00000000000000bb", {}}};
  write_checkpoint(dir.path(), base, kept, written, distinct_counts());
  Manifest m = Manifest::read(dir.file(kManifestName));
  EXPECT_FALSE(m.complete);
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[0].file, "docs-00000.jsonl.zst");
  EXPECT_EQ(m.shards[1].records, 4u);
  EXPECT_EQ(m.extra["resume"], (json{{"pages_seen", 11}, {"shards", 2}}));
  EXPECT_TRUE(same(counts_from_json(m.stats, "m"), distinct_counts()));
  EXPECT_EQ(m.extra["options"], base.extra["options"]);
}

TEST(WikiprepManifest, CompleteManifestAddsTotalsSiteAndWarnings) {
  TempDir dir;
  WikiprepOptions o;
  o.input = "dump.xml";
  Manifest kept = base_with_kept_shards(wikiprep_base_manifest(o, 10), {{"docs-00000.jsonl.zst", 3, 100, "00000000000000aa", {}}},
                                        distinct_counts());
  EXPECT_EQ(kept.stats, (json{{"jsonl_bytes", 5000}, {"invalid_utf8_replaced", 5}}));
  kept.shards.push_back({"docs-00001.jsonl.zst", 4, 120, "00000000000000bb", {}});
  WikiprepTotals totals;
  totals.counts = distinct_counts();
  totals.bytes_in = 300;
  totals.xml_bytes = 900;
  totals.site.present = true;
  totals.site.dbname = "enwiki";
  totals.site.lang = "en";
  totals.warnings = {"the input ends without </mediawiki>"};
  WikiprepStats s = write_complete_manifest(dir.path(), kept, totals, 4, true, std::chrono::steady_clock::now());
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.shards, 2u);
  EXPECT_EQ(s.bytes_out, 220u);
  EXPECT_EQ(s.resumed_pages, 4u);
  EXPECT_EQ(s.articles_written, 7u);
  Manifest m = Manifest::read(dir.file(kManifestName));
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.stats["bytes_out"], 220u);
  EXPECT_EQ(m.stats["xml_bytes"], 900u);
  EXPECT_EQ(m.stats["jsonl_bytes"], 5000u);  // the kept shards' bytes stay beside the counts
  EXPECT_TRUE(m.stats.contains("seconds"));
  EXPECT_TRUE(same(counts_from_json(m.stats, "m"), distinct_counts()));
  EXPECT_EQ(m.extra["site"]["dbname"], "enwiki");
  EXPECT_EQ(m.extra["site"]["bz2"], true);
  EXPECT_EQ(m.extra["warnings"], json({"the input ends without </mediawiki>"}));
  EXPECT_FALSE(m.extra.contains("resume"));
  totals.warnings.clear();
  write_complete_manifest(dir.path(), kept, totals, 0, false, std::chrono::steady_clock::now());
  EXPECT_FALSE(Manifest::read(dir.file(kManifestName)).extra.contains("warnings"));
}

}  // namespace
}  // namespace pretrain::wikiprep_manifest_test
