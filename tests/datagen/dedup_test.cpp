// dedup end to end in one process: planted exact and near duplicates across two sources are
// removed and reported against the first document of their cluster in input order; the output is
// the same bytes at any thread count; --resume keeps the checkpoints that verify and gives the same
// output; bad inputs and options are refused naming what is wrong.
#include "datagen/dedup/dedup.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file.h"
#include "common/progress.h"
#include "dedup_fixture.h"
#include "test_util.h"

namespace pretrain::dedup_test {
namespace {

using namespace dedup_fixture;
using testing::TempDir;

struct Corpus {
  std::string a, b;  // source a: shards; source b: a JSON lines file
};

// Source a: 30 documents in several shards, its document 5 a copy of document 0 with its
// whitespace changed (an exact duplicate after folding). Source b: a copy of a's document 1 (exact),
// a copy of a's document 3 with every 100th word changed (near, Jaccard ~0.9), two documents of its own, and a
// near copy of its own first document.
Corpus make_corpus(const TempDir& dir) {
  std::vector<Document> a;
  for (int i = 0; i < 30; ++i) a.push_back(doc("a" + std::to_string(i), random_text(100 + i, 300)));
  a[5].text = "  " + a[0].text + "\n\n";
  write_shards(dir.file("a"), a, 20000);
  std::vector<Document> b = {doc("b0", a[1].text), doc("b1", edited(a[3].text, 100)), doc("b2", random_text(900, 300)),
                             doc("b3", random_text(901, 300))};
  b.push_back(doc("b4", edited(b[2].text, 80)));
  write_jsonl(dir.file("b.jsonl"), b);
  return {dir.file("a"), dir.file("b.jsonl")};
}

DedupOptions options(const Corpus& c, const std::string& out) {
  DedupOptions o;
  o.inputs = {c.a, c.b};
  o.output_dir = out;
  return o;
}

std::vector<nlohmann::json> report(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(read_file(path_join(out, kDedupReportName)));
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// Every output file's bytes (the manifest without the command line).
std::map<std::string, std::string> output_bytes(const std::string& out) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    if (!e.is_regular_file()) continue;
    std::string name = e.path().filename().string();
    std::string bytes = read_file(e.path().string());
    if (name == kManifestName) {
      auto j = nlohmann::json::parse(bytes);
      j.erase("args");
      bytes = j.dump();
    }
    files[name] = bytes;
  }
  return files;
}

class DedupTest : public ::testing::Test {
 protected:
  void SetUp() override { Progress::set_enabled(false); }
};

TEST_F(DedupTest, RemovesPlantedDuplicatesKeepingTheFirst) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  DedupStats s = run_dedup(options(c, dir.file("out")));
  EXPECT_EQ(s.documents, 35u);
  EXPECT_EQ(s.removed_exact, 2u);
  EXPECT_EQ(s.removed_near, 2u);
  EXPECT_EQ(s.kept, 31u);
  auto lines = report(dir.file("out"));
  ASSERT_EQ(lines.size(), 4u);
  // In input order: a5 (= a0), b0 (= a1), b1 (~ a3), b4 (~ b2).
  EXPECT_EQ(lines[0]["id"], "a5");
  EXPECT_EQ(lines[0]["kind"], "exact");
  EXPECT_EQ(lines[0]["kept"]["id"], "a0");
  EXPECT_EQ(lines[0]["cluster"], 0);
  EXPECT_EQ(lines[1]["id"], "b0");
  EXPECT_EQ(lines[1]["source"], c.b);
  EXPECT_EQ(lines[1]["kept"]["id"], "a1");
  EXPECT_EQ(lines[1]["kept"]["source"], c.a);
  EXPECT_EQ(lines[1]["kind"], "exact");
  EXPECT_EQ(lines[2]["id"], "b1");
  EXPECT_EQ(lines[2]["kind"], "near");
  EXPECT_EQ(lines[2]["kept"]["id"], "a3");
  EXPECT_GT(lines[2]["jaccard"].get<double>(), 0.6);
  EXPECT_LT(lines[2]["jaccard"].get<double>(), 1.0);
  EXPECT_EQ(lines[3]["id"], "b4");
  EXPECT_EQ(lines[3]["kept"]["id"], "b2");
  EXPECT_EQ(lines[3]["kept"]["index"], 32);
  // The output is the input less the removed documents, in input order.
  std::vector<Document> kept = read_docs(dir.file("out"));
  ASSERT_EQ(kept.size(), 31u);
  EXPECT_EQ(kept[0].id, "a0");
  EXPECT_EQ(kept[5].id, "a6");
  EXPECT_EQ(kept[29].id, "b2");
  EXPECT_EQ(kept[30].id, "b3");
  Manifest m = Manifest::read(dir.file("out/manifest.json"));
  EXPECT_EQ(m.format, kFormatDocs);
  EXPECT_EQ(m.total_records(), 31u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/.work")));
}

TEST_F(DedupTest, SourceOrderDecidesWhatIsKept) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  DedupOptions o = options(c, dir.file("out"));
  o.inputs = {c.b, c.a};
  DedupStats s = run_dedup(o);
  EXPECT_EQ(s.removed_exact + s.removed_near, 4u);
  auto lines = report(dir.file("out"));
  std::set<std::string> removed;
  for (const auto& l : lines) removed.insert(l["id"].get<std::string>());
  EXPECT_EQ(removed, (std::set<std::string>{"b4", "a1", "a3", "a5"}));
}

TEST_F(DedupTest, ExactOnlyAndThreshold) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  DedupOptions o = options(c, dir.file("exact"));
  o.sign.near = false;
  DedupStats s = run_dedup(o);
  EXPECT_EQ(s.removed_exact, 2u);
  EXPECT_EQ(s.removed_near, 0u);
  o = options(c, dir.file("strict"));
  o.jaccard_threshold = 0.99;  // the near copies estimate below it
  s = run_dedup(o);
  EXPECT_EQ(s.removed_exact, 2u);
  EXPECT_EQ(s.removed_near, 0u);
  EXPECT_GT(s.checked_pairs, 0u);
}

TEST_F(DedupTest, SameBytesAtAnyThreadCount) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  std::map<std::string, std::string> first;
  for (int threads : {1, 4}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
    std::string out = dir.file("out" + std::to_string(threads));
    run_dedup(options(c, out));
    if (first.empty()) first = output_bytes(out);
    else EXPECT_EQ(output_bytes(out), first);
  }
}

TEST_F(DedupTest, ResumeKeepsWhatVerifies) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  DedupOptions o = options(c, dir.file("out"));
  o.keep_work = true;
  run_dedup(o);
  auto expected = output_bytes(dir.file("out"));
  // As if killed during the output stage: a part's record and shard gone, a signature file too.
  std::filesystem::remove(dir.file("out/.work/out-00001.json"));
  std::filesystem::remove(dir.file("out/docs-00001.jsonl.zst"));
  std::filesystem::remove(dir.file("out/.work/sig-00002.bin"));
  std::filesystem::remove(dir.file("out/manifest.json"));
  o.resume = true;
  DedupStats s = run_dedup(o);
  EXPECT_EQ(s.resumed_signatures, s.input_files - 1);
  EXPECT_EQ(s.resumed_parts, s.input_files - 1);  // the signatures came out the same: clusters and parts kept
  EXPECT_EQ(output_bytes(dir.file("out")), expected);
  std::filesystem::remove(dir.file("out/.work/out-00001.json"));
  s = run_dedup(o);
  EXPECT_EQ(s.resumed_signatures, s.input_files);
  EXPECT_EQ(s.resumed_parts, s.input_files - 1);
  EXPECT_EQ(output_bytes(dir.file("out")), expected);
}

TEST_F(DedupTest, BadInputIsNamed) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  // A malformed line in the JSON lines source.
  std::string lines = read_file(c.b);
  write_file_atomic(dir.file("bad.jsonl"), lines + "{\"id\": 1, \"text\": \n");
  DedupOptions o = options(c, dir.file("out"));
  o.inputs = {c.a, dir.file("bad.jsonl")};
  std::string message = testing::error_message([&] { run_dedup(o); });
  EXPECT_NE(message.find("bad.jsonl:6"), std::string::npos) << message;
  // A manifest whose record count is wrong.
  auto j = nlohmann::json::parse(read_file(c.a + "/manifest.json"));
  j["shards"][0]["records"] = j["shards"][0]["records"].get<int>() + 1;
  write_file_atomic(c.a + "/manifest.json", j.dump());
  o.inputs = {c.a};
  message = testing::error_message([&] { run_dedup(o); });
  EXPECT_NE(message.find("docs-00000.jsonl.zst"), std::string::npos) << message;
  EXPECT_NE(message.find("(manifest)"), std::string::npos) << message;
}

TEST_F(DedupTest, BadOptionsAreUsageErrors) {
  TempDir dir;
  Corpus c = make_corpus(dir);
  DedupOptions o = options(c, dir.file("out"));
  o.jaccard_threshold = 1.5;
  EXPECT_THROW(run_dedup(o), UsageError);
  o = options(c, dir.file("out"));
  o.sign.minhash.bands = 0;
  EXPECT_THROW(run_dedup(o), UsageError);
  o = options(c, c.a);  // into an input directory
  EXPECT_THROW(run_dedup(o), UsageError);
  o = options(c, dir.file("out"));
  o.inputs = {dir.file("missing-*.jsonl")};
  EXPECT_THROW(run_dedup(o), UsageError);
}

}  // namespace
}  // namespace pretrain::dedup_test
