// The token store's resident budget: reading it in random order (as BERT's random next sentences
// and GPT's shuffled documents do) keeps its mapped share of the RSS near the budget however large
// the store is. (Round trip and damaged-index tests: text_documents_test.cpp.)
#include "datagen/shards/token_store.h"

#include <gtest/gtest.h>

#include <fstream>
#include <algorithm>
#include <numeric>
#include <thread>
#include <string>

#include "common/counter_rng.h"
#include "test_util.h"

namespace pretrain::token_store_test {
namespace {

// RssFile of this process (file-backed mapped pages, the store's share), in bytes.
uint64_t rss_file_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("RssFile:", 0) == 0) return std::stoull(line.substr(8)) << 10;
  return 0;
}

// `docs` documents of `sentences` sentences of `tokens` ids each; token t of sentence s of
// document d is d * 1000003 + s * 1009 + t, so any misplaced read shows.
void write_store(const std::string& dir, size_t docs, size_t sentences, size_t tokens) {
  TokenStoreWriter w(dir);
  std::vector<std::vector<TokenId32>> doc(sentences, std::vector<TokenId32>(tokens));
  for (size_t d = 0; d < docs; ++d) {
    for (size_t s = 0; s < sentences; ++s)
      for (size_t t = 0; t < tokens; ++t) doc[s][t] = TokenId32(d * 1000003 + s * 1009 + t);
    w.add_document(doc);
  }
  w.commit({{"test", 1}});
}

// 64 MiB of tokens read in a random document order: with a 4 MiB budget the mapped pages stay
// within a few budgets; without one they grow to the whole file (the control, so that the check
// measures something). Before the budget, a BERT run's RSS grew by the whole token store.
TEST(TokenStore, RandomReadsStayWithinTheResidentBudget) {
  testing::TempDir dir;
  const size_t docs = 4096, sentences = 16, tokens = 256;  // 16M tokens, 64 MiB
  write_store(dir.path(), docs, sentences, tokens);
  std::vector<uint32_t> order(docs);
  std::iota(order.begin(), order.end(), 0u);
  CounterRng rng(1, 2, 3);
  rng.shuffle(order);

  auto peak_growth = [&](uint64_t budget) {
    TokenStore store(dir.path(), budget);
    const uint64_t before = rss_file_bytes();
    uint64_t peak = 0, sum = 0;
    for (size_t k = 0; k < docs; ++k) {
      const uint32_t d = order[k];
      for (size_t s = 0; s < sentences; ++s) {
        auto span = store.sentence(d, s);
        sum += uint64_t(span[0]) + uint64_t(span[span.size() - 1]);
      }
      auto all = store.document_tokens(order[docs - 1 - k]);
      sum += uint64_t(all[all.size() / 2]);
      if (k % 16 == 0) peak = std::max(peak, rss_file_bytes());
    }
    EXPECT_GT(sum, 0u);
    peak = std::max(peak, rss_file_bytes());
    return peak > before ? peak - before : 0;
  };
  const uint64_t unbounded = peak_growth(uint64_t{1} << 40);
  const uint64_t bounded = peak_growth(uint64_t{4} << 20);
  EXPECT_GT(unbounded, uint64_t{48} << 20) << "the control read did not map the store";
  EXPECT_LT(bounded, uint64_t{16} << 20) << "random reads mapped " << (bounded >> 20) << " MiB with a 4 MiB budget";
}

// read_sentence (pread windows, for stores past their budget) gives what the map gives, in any
// order, across documents longer than a window (40 sentences) and sentences longer than a
// window's token cap (20000 tokens), from two threads at once.
TEST(TokenStore, WindowedReadsEqualMappedReads) {
  testing::TempDir dir;
  {
    TokenStoreWriter w(dir.path());
    for (size_t d = 0; d < 50; ++d) {
      std::vector<std::vector<TokenId32>> doc(d % 7 == 0 ? 40 : 1 + d % 5);
      for (size_t s = 0; s < doc.size(); ++s) {
        doc[s].resize(d == 3 && s == 1 ? 20000 : 1 + (d * 31 + s * 17) % 90);
        for (size_t t = 0; t < doc[s].size(); ++t) doc[s][t] = TokenId32(d * 1000003 + s * 1009 + t);
      }
      w.add_document(doc);
    }
    w.commit({{"test", 1}});
  }
  TokenStore store(dir.path());
  std::vector<std::pair<size_t, size_t>> all;
  for (size_t d = 0; d < store.num_documents(); ++d)
    for (size_t i = 0; i < store.num_sentences(d); ++i) all.emplace_back(d, i);
  auto check = [&](uint64_t seed) {
    std::vector<std::pair<size_t, size_t>> order = all;
    CounterRng rng(seed, 0, 0);
    rng.shuffle(order);
    for (int pass = 0; pass < 2; ++pass) {  // random, then in order (window hits)
      for (const auto& [d, i] : order) {
        auto mapped = store.sentence(d, i);
        auto read = store.read_sentence(d, i);
        ASSERT_TRUE(std::equal(mapped.begin(), mapped.end(), read.begin(), read.end())) << "document " << d << " sentence " << i;
      }
      std::sort(order.begin(), order.end());
    }
  };
  std::thread other([&] { check(7); });
  check(8);
  other.join();
}

}  // namespace
}  // namespace pretrain::token_store_test
