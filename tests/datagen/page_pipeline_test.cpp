// The page pipeline alone, into a sink that records what it is given: what becomes of each page
// of the sample dump (namespaces, redirects, --min-chars), the pages a resumed run skips, the
// checkpoint after each committed shard, and bad input or a failing checkpoint ending the run
// with every page before it handed over.
#include "datagen/wikiprep/page_pipeline.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::page_pipeline_test {
namespace {

using testing::TempDir;

std::string sample_dump() { return testing::source_dir() + "/tests/data/sample-dump.xml"; }

// Keeps every document; with `per_shard` > 0, "commits" a shard before each document that would
// be the (per_shard + 1)th of the open one, as the real sinks commit before the document that
// does not fit.
class RecordingSink final : public ShardSink {
 public:
  explicit RecordingSink(uint64_t per_shard = 0) : per_shard_(per_shard) {}
  void add(const CleanDocument& document) override {
    if (per_shard_ && open_ == per_shard_) close_shard();
    docs.push_back(document);
    ++open_;
    text_bytes_ += document.doc.text.size() + document.sentences.size();
  }
  void add_serialized(std::string_view, uint64_t) override { throw std::logic_error("not here"); }
  void close_shard() override {
    if (open_ == 0) return;
    shards_.push_back(ShardEntry{"shard-" + std::to_string(shards_.size()), open_, 0, "", {}});
    open_ = 0;
  }
  const std::vector<ShardEntry>& shards() const override { return shards_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t invalid_utf8_replaced() const override { return 0; }
  Manifest finish(Manifest base) override { return base; }

  std::vector<CleanDocument> docs;

 private:
  uint64_t per_shard_, open_ = 0, text_bytes_ = 0;
  std::vector<ShardEntry> shards_;
};

WikiprepOptions options_for(const std::string& input) {
  WikiprepOptions o;
  o.input = input;
  o.output_dir = "unused";
  return o;
}

PipelineResult run(const WikiprepOptions& o, ShardSink& sink, const PipelineSetup& setup = {}) {
  Bz2Reader reader(o.input);
  return run_page_pipeline(o, reader, sink, setup);
}

std::vector<std::string> ids_of(const std::vector<CleanDocument>& docs) {
  std::vector<std::string> ids;
  for (const CleanDocument& d : docs) ids.push_back(d.doc.id);
  return ids;
}

TEST(PagePipeline, WhatBecomesOfEachPageOfTheSample) {
  RecordingSink sink;
  PipelineResult r = run(options_for(sample_dump()), sink);
  EXPECT_FALSE(r.read_error);
  EXPECT_FALSE(r.write_error);
  const WikiprepCounts& c = r.totals.counts;
  EXPECT_EQ(c.pages_seen, 10u);
  EXPECT_EQ(c.articles_written, 6u);
  EXPECT_EQ(c.redirects_skipped, 1u);
  EXPECT_EQ(c.namespaces_skipped, 3u);  // Talk, Template, Category
  EXPECT_EQ(c.short_skipped, 0u);
  EXPECT_EQ(c.text_bytes, sink.text_bytes());
  EXPECT_EQ(ids_of(sink.docs), (std::vector<std::string>{"10", "12", "21", "22", "25", "30"}));  // in dump order
  EXPECT_EQ(sink.docs[0].doc.url, "https://en.wikipedia.org/wiki?curid=10");
  EXPECT_EQ(r.totals.bytes_in, file_size(sample_dump()));
  EXPECT_EQ(r.totals.xml_bytes, file_size(sample_dump()));
  EXPECT_TRUE(r.totals.site.present);
  EXPECT_EQ(r.totals.site.lang, "en");
  EXPECT_TRUE(r.totals.warnings.empty());
}

// The sample's documents when o's options are changed by `change`, with the pipeline's counts.
struct SampleRun {
  WikiprepCounts counts;
  std::vector<CleanDocument> docs;
};
template <typename Change>
SampleRun run_sample(Change change) {
  WikiprepOptions o = options_for(sample_dump());
  change(o);
  RecordingSink sink;
  PipelineResult r = run(o, sink);
  EXPECT_FALSE(r.read_error || r.write_error);
  return {r.totals.counts, std::move(sink.docs)};
}

TEST(PagePipeline, KeepRedirectsHandsThemOverWithEmptyText) {
  SampleRun s = run_sample([](WikiprepOptions& o) { o.keep_redirects = true; });
  EXPECT_EQ(s.counts.articles_written, 7u);
  EXPECT_EQ(s.counts.redirects_skipped, 0u);
  ASSERT_EQ(s.docs.size(), 7u);
  EXPECT_EQ(s.docs[2].doc.id, "13");
  EXPECT_EQ(s.docs[2].doc.title, "Lanternfish bay");
  EXPECT_EQ(s.docs[2].doc.text, "");
}

TEST(PagePipeline, NamespacesChooseThePages) {
  SampleRun s = run_sample([](WikiprepOptions& o) { o.namespaces = {0, 10}; });
  EXPECT_EQ(s.counts.articles_written, 7u);
  EXPECT_EQ(s.counts.namespaces_skipped, 2u);
  ASSERT_EQ(s.docs.size(), 7u);
  EXPECT_EQ(s.docs[2].doc.title, "Template:Infobox bay");
}

TEST(PagePipeline, MinCharsDropsStubs) {
  std::vector<CleanDocument> all = run_sample([](WikiprepOptions&) {}).docs;
  SampleRun s = run_sample([](WikiprepOptions& o) { o.min_chars = 300; });
  size_t long_enough = 0;
  for (const CleanDocument& d : all) {
    size_t chars = 0;
    for (char c : d.doc.text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    long_enough += chars >= 300;
  }
  ASSERT_GT(long_enough, 0u);
  ASSERT_LT(long_enough, all.size());
  EXPECT_EQ(s.counts.articles_written, long_enough);
  EXPECT_EQ(s.counts.short_skipped, all.size() - long_enough);
  EXPECT_EQ(s.docs.size(), long_enough);
}

TEST(PagePipeline, SentencesFormatHandsOverLinesNotText) {
  SampleRun s = run_sample([](WikiprepOptions& o) { o.format = WikiprepFormat::sentences; });
  ASSERT_EQ(s.docs.size(), 6u);
  uint64_t lines = 0;
  for (const CleanDocument& d : s.docs) {
    EXPECT_TRUE(d.doc.text.empty()) << d.doc.title;
    EXPECT_TRUE(d.sentences.ends_with("\n")) << d.doc.title;
    EXPECT_EQ(d.sentences.find("\n\n"), std::string::npos) << d.doc.title << ": a blank line inside a document";
    lines += d.sentence_count;
  }
  EXPECT_EQ(s.counts.sentences, lines);
  EXPECT_GT(lines, 12u);
}

TEST(PagePipeline, PagesAlreadyInKeptShardsAreSkippedAndCountsGoOn) {
  RecordingSink whole;
  PipelineResult all = run(options_for(sample_dump()), whole);
  PipelineSetup setup;
  setup.skip_pages = 4;  // Lanternfish Bay, Harbour Signal Code, a redirect and a Talk page
  setup.baseline.pages_seen = 4;
  setup.baseline.articles_written = 2;
  setup.baseline.text_bytes = 1000;
  RecordingSink rest;
  PipelineResult r = run(options_for(sample_dump()), rest, setup);
  const std::vector<std::string> ids = ids_of(whole.docs);
  EXPECT_EQ(ids_of(rest.docs), std::vector<std::string>(ids.begin() + 2, ids.end()));
  EXPECT_EQ(r.totals.counts.pages_seen, all.totals.counts.pages_seen);
  EXPECT_EQ(r.totals.counts.articles_written, all.totals.counts.articles_written);
  EXPECT_EQ(r.totals.counts.text_bytes, 1000 + rest.text_bytes());
}

TEST(PagePipeline, EachCommittedShardIsCheckpointedWithTheCountsAtItsEnd) {
  RecordingSink sink(2);  // two documents a shard
  std::vector<WikiprepCounts> checkpoints;
  PipelineSetup setup;
  setup.shard_committed = [&](const WikiprepCounts& at) {
    checkpoints.push_back(at);
    EXPECT_EQ(sink.shards().back().records, 2u);
  };
  PipelineResult r = run(options_for(sample_dump()), sink, setup);
  ASSERT_EQ(checkpoints.size(), 2u);  // the third shard is still open at the end
  EXPECT_EQ(checkpoints[0].articles_written, 2u);
  EXPECT_EQ(checkpoints[1].articles_written, 4u);
  EXPECT_LT(checkpoints[0].pages_seen, checkpoints[1].pages_seen);
  EXPECT_EQ(r.totals.counts.articles_written, 6u);
}

TEST(PagePipeline, AFailingCheckpointStopsTheRun) {
  RecordingSink sink(1);
  PipelineSetup setup;
  setup.shard_committed = [](const WikiprepCounts&) { throw WikiprepInterrupted("stop here"); };
  PipelineResult r = run(options_for(sample_dump()), sink, setup);
  ASSERT_TRUE(r.write_error);
  EXPECT_FALSE(r.read_error);
  EXPECT_THROW(std::rethrow_exception(r.write_error), WikiprepInterrupted);
  EXPECT_EQ(sink.docs.size(), 2u);  // the checkpoint before the second document threw: nothing after it
  EXPECT_EQ(r.totals.counts.articles_written, 2u);
}

TEST(PagePipeline, BadInputEndsTheReadingAfterHandingOverThePagesBeforeIt) {
  TempDir dir;
  std::string xml = read_file(sample_dump());
  size_t seventh = 0;
  for (int i = 0; i < 7; ++i) seventh = xml.find("<page>", seventh + 1);
  write_file_atomic(dir.file("broken.xml"), xml.substr(0, seventh) + "<page><title>Broken</title><ns>0</x></page>" + xml.substr(seventh));
  RecordingSink sink;
  PipelineResult r = run(options_for(dir.file("broken.xml")), sink);
  ASSERT_TRUE(r.read_error);
  EXPECT_FALSE(r.write_error);
  EXPECT_EQ(ids_of(sink.docs), (std::vector<std::string>{"10", "12"}));
  std::string what = testing::error_message([&] { std::rethrow_exception(r.read_error); });
  EXPECT_NE(what.find("broken.xml"), std::string::npos) << what;
}

}  // namespace
}  // namespace pretrain::page_pipeline_test
