// PageRangeFeeder: a dump cut into ranges at random bytes (as mpirun wikiprep's ranks read it), each
// range fed in random pieces, gives every page exactly once, in order, to the rank its "<page"
// starts in; ranges with no page start give none; dump_head() is the bytes before the first page.
#include "datagen/wikiprep/page_range.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::page_range_test {
namespace {

std::string sample_dump() { return read_file(testing::source_dir() + "/tests/data/sample-dump.xml"); }

// The titles of the pages in dump[begin..] that the rank owning [begin, end) gets, feeding the
// range in pieces of random size (the cut marked in the piece that holds `end`).
std::vector<std::string> share(const std::string& dump, size_t begin, size_t end, std::mt19937& rng,
                               uint64_t* range_bytes = nullptr) {
  std::vector<std::string> titles;
  XmlPageReader xml("dump", [&](Page&& p) { titles.push_back(p.title); });
  std::string head = begin == 0 ? std::string() : dump.substr(0, dump.find("<page>"));
  PageRangeFeeder feeder(xml, head, begin == 0);
  for (size_t at = begin; at < dump.size() && !feeder.done();) {
    size_t n = std::min<size_t>(dump.size() - at, 1 + rng() % 700);
    size_t cut = end >= at && end < at + n ? end - at : PageRangeFeeder::npos;
    feeder.feed(std::string_view(dump).substr(at, n), cut);
    at += n;
  }
  feeder.finish();
  if (range_bytes) *range_bytes = feeder.range_bytes();
  return titles;
}

TEST(PageRange, RangesShareThePagesExactlyOnce) {
  std::string dump = sample_dump();
  std::mt19937 rng(7);
  std::vector<std::string> all = share(dump, 0, dump.size(), rng);
  ASSERT_GE(all.size(), 5u);
  std::vector<size_t> starts;  // of every "<page>"
  for (size_t p = dump.find("<page>"); p != std::string::npos; p = dump.find("<page>", p + 1)) starts.push_back(p);
  ASSERT_EQ(starts.size(), all.size());
  for (int trial = 0; trial < 300; ++trial) {
    int ranks = 2 + int(rng() % 6);
    std::vector<size_t> cuts = {0};
    for (int r = 1; r < ranks; ++r) cuts.push_back(rng() % dump.size());
    if (trial % 3 == 0) cuts[1] = starts[rng() % starts.size()] + rng() % 7 - 3;  // at and around a "<page"
    std::sort(cuts.begin(), cuts.end());
    cuts.push_back(dump.size());
    std::vector<std::string> joined;
    uint64_t bytes = 0;
    for (int r = 0; r < ranks; ++r) {
      uint64_t range_bytes = 0;
      auto got = share(dump, cuts[size_t(r)], cuts[size_t(r) + 1], rng, &range_bytes);
      // Rank r's pages are those whose "<page" starts in its range.
      size_t expected = 0;
      for (size_t p : starts) expected += p >= cuts[size_t(r)] && p < cuts[size_t(r) + 1];
      EXPECT_EQ(got.size(), expected) << "rank " << r << " of " << ranks << ", trial " << trial;
      joined.insert(joined.end(), got.begin(), got.end());
      bytes += range_bytes;
    }
    EXPECT_EQ(joined, all) << "trial " << trial;
    EXPECT_EQ(bytes, dump.size()) << "trial " << trial;
  }
}

TEST(PageRange, DumpHeadIsEverythingBeforeTheFirstPage) {
  testing::TempDir dir;
  std::string dump = sample_dump();
  write_file_atomic(dir.file("dump.xml"), dump);
  EXPECT_EQ(dump_head(dir.file("dump.xml")), dump.substr(0, dump.find("<page>")));
  write_file_atomic(dir.file("empty.xml"), "<mediawiki><siteinfo></siteinfo></mediawiki>\n");
  EXPECT_EQ(dump_head(dir.file("empty.xml")), "");
}

}  // namespace
}  // namespace pretrain::page_range_test
