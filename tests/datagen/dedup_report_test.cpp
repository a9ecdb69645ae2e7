// The report's line: every field its header lists, in that order, parseable JSON, null Jaccard
// without signatures.
#include "datagen/dedup/dedup_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pretrain::dedup_report_test {
namespace {

TEST(DedupReport, LineHasTheDocumentItsClusterAndTheKeptOne) {
  RemovedDocument r;
  r.removed = {7, "12", "wiki-b/", "wiki-b/docs-00000.jsonl.zst", 3};
  r.kept = {2, "5", "wiki-a/", "wiki-a/docs-00000.jsonl.zst", 2};
  r.jaccard = 0.9375;
  std::string line = report_line(r);
  EXPECT_EQ(line,
            R"({"index":7,"id":"12","source":"wiki-b/","file":"wiki-b/docs-00000.jsonl.zst","record":3,"cluster":2,)"
            R"("kind":"near","jaccard":0.9375,"kept":{"index":2,"id":"5","source":"wiki-a/",)"
            R"("file":"wiki-a/docs-00000.jsonl.zst","record":2}})"
            "\n");
  r.exact = true;
  r.jaccard.reset();
  r.removed.id = "quote\"and\\ü";
  auto j = nlohmann::json::parse(report_line(r));
  EXPECT_EQ(j["kind"], "exact");
  EXPECT_TRUE(j["jaccard"].is_null());
  EXPECT_EQ(j["id"], "quote\"and\\ü");
  EXPECT_EQ(j["cluster"], 2);
}

}  // namespace
}  // namespace pretrain::dedup_report_test
