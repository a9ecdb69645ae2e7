// The token store's resident budget: reading it in random order (as BERT's random next sentences
// and GPT's shuffled documents do) keeps its mapped share of the RSS near the budget however large
// the store is. Narrow (uint16) ids read as the int32 ones; a stage that takes the store over
// gives its blocks back and says so in store.json; pieces moved into the one store in chunks,
// the pieces cut back behind them, resumed after a kill. (Round trip and damaged-index tests:
// text_documents_test.cpp.)
#include "datagen/shards/token_store.h"

#include <gtest/gtest.h>

#include <fstream>
#include <algorithm>
#include <numeric>
#include <thread>

#include <sys/stat.h>
#include <string>

#include "common/counter_rng.h"
#include "common/error.h"
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

// 300 documents of 1–5 sentences of 1–40 ids below `limit`, into a store of `width`-byte ids.
std::vector<std::vector<std::vector<TokenId32>>> write_documents(const std::string& dir, int width, TokenId32 limit,
                                                                 size_t first = 0, size_t count = 300) {
  std::vector<std::vector<std::vector<TokenId32>>> docs;
  make_dirs(dir);
  TokenStoreWriter w(dir, width);
  for (size_t d = first; d < first + count; ++d) {
    std::vector<std::vector<TokenId32>> doc(1 + d % 5);
    for (size_t s = 0; s < doc.size(); ++s) {
      doc[s].resize(1 + (d * 7 + s * 13) % 40);
      for (size_t t = 0; t < doc[s].size(); ++t) doc[s][t] = TokenId32((d * 1009 + s * 31 + t * 7) % size_t(limit));
    }
    w.add_document(doc);
    docs.push_back(doc);
  }
  w.commit({{"test", 1}});
  return docs;
}

// Before, ids were stored as int32 whatever the vocabulary: a GPT-2 store was twice its
// Megatron output. Now a vocabulary that fits 16 bits stores 16-bit ids, read back as int32.
TEST(TokenStore, NarrowIdsReadAsTheWideOnes) {
  testing::TempDir dir;
  const auto docs = write_documents(dir.file("narrow"), 2, 65536);
  write_documents(dir.file("wide"), 4, 65536);
  const TokenStore narrow(dir.file("narrow"), 1), wide(dir.file("wide"));
  EXPECT_EQ(narrow.token_bytes(), 2);
  EXPECT_EQ(file_size(dir.file("narrow/tokens.bin")) * 2, file_size(dir.file("wide/tokens.bin")));
  ASSERT_EQ(narrow.num_documents(), docs.size());
  std::vector<TokenId32> read;
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<TokenId32> all;
    for (size_t i = 0; i < docs[d].size(); ++i) {
      auto s = narrow.sentence(d, i);
      ASSERT_EQ(std::vector<TokenId32>(s.begin(), s.end()), docs[d][i]) << d << " " << i;
      auto w = narrow.read_sentence(d, i);
      ASSERT_EQ(std::vector<TokenId32>(w.begin(), w.end()), docs[d][i]) << d << " " << i;
      all.insert(all.end(), docs[d][i].begin(), docs[d][i].end());
    }
    auto t = narrow.document_tokens(d);
    ASSERT_EQ(std::vector<TokenId32>(t.begin(), t.end()), all) << d;
    EXPECT_EQ(narrow.document_size(d), all.size());
    const TokenStoreCounts at = narrow.counts_before(d);
    read.resize(all.size());
    narrow.read_tokens(at.tokens, at.tokens + all.size(), read.data());
    ASSERT_EQ(read, all) << d;
  }
  make_dirs(dir.file("bad"));
  TokenStoreWriter w(dir.file("bad"), 2);
  try {
    w.add_document({{1, 65536}});
    ADD_FAILURE() << "an id past 16 bits was stored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("65536"), std::string::npos) << e.what();
  }
}

// A stage that takes the store over says so before it frees any of it: the store is no longer
// complete() for anyone else; its blocks are given back (the file keeps its size); freed, only
// store.json stays, with the counts.
TEST(TokenStore, ATakenStoreIsFreedAndSaysSo) {
  testing::TempDir dir;
  const std::string store = dir.file("s");
  write_documents(store, 2, 30000, 0, 3000);
  const nlohmann::json key = {{"test", 1}};
  ASSERT_TRUE(TokenStore::complete(store, key));
  take_token_store(store, {{"stage", "x"}});
  EXPECT_FALSE(TokenStore::complete(store, key)) << "taken over: only that stage reads it";
  const auto meta = read_token_store_meta(store, key);
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(meta->taken_by.at("stage"), "x");
  EXPECT_FALSE(meta->freed);
  const TokenStore s(store);
  struct stat before {}, after {};
  ASSERT_EQ(::stat(path_join(store, "tokens.bin").c_str(), &before), 0);
  ASSERT_TRUE(s.free_tokens(0, s.num_tokens() / 2)) << "this filesystem cannot punch holes";
  ASSERT_EQ(::stat(path_join(store, "tokens.bin").c_str(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_LE(uint64_t(after.st_blocks) * 512 + uint64_t(before.st_size) / 2 - 8192, uint64_t(before.st_blocks) * 512);
  std::vector<TokenId32> zeros(100);
  s.read_tokens(0, 100, zeros.data());
  EXPECT_EQ(zeros, std::vector<TokenId32>(100, 0)) << "freed tokens read as zeros";
  free_token_store(store);
  EXPECT_FALSE(file_exists(path_join(store, "tokens.bin")));
  const auto freed = read_token_store_meta(store, key);
  ASSERT_TRUE(freed.has_value());
  EXPECT_TRUE(freed->freed);
  EXPECT_EQ(freed->counts, meta->counts);
}

// Three pieces moved into the one store, the last first, in 4 KiB chunks: the store is the one a
// writer of all the documents makes. A move killed after its first chunk (the piece's tokens.bin
// cut back behind it, moving.json there) is continued by moving the piece again.
TEST(TokenStore, PiecesAreMovedIntoTheOneStoreAndAMoveCutShortGoesOn) {
  testing::TempDir dir;
  write_documents(dir.file("whole"), 2, 60000, 0, 900);
  std::vector<TokenStoreCounts> counts;
  for (size_t p = 0; p < 3; ++p) {
    write_documents(dir.file(cat("piece-", p)), 2, 60000, 300 * p, 300);
    counts.push_back(*TokenStoreJoin::piece_counts(dir.file(cat("piece-", p)), {{"test", 1}}));
  }
  const nlohmann::json key = {{"test", 1}};
  TokenStoreJoin::begin(dir.file("store"), counts, 2, key);
  ASSERT_TRUE(TokenStoreJoin::begun(dir.file("store"), key).has_value());
  EXPECT_EQ(*TokenStoreJoin::begun(dir.file("store"), key), counts);
  const uint64_t piece_bytes = file_size(dir.file("piece-1/tokens.bin"));
  ::setenv("PRETRAIN_FAULT", "0:store-move-chunk", 1);
  EXPECT_THROW(TokenStoreJoin::move_piece(dir.file("store"), dir.file("piece-1"), counts[0], 4096), Error);
  ::unsetenv("PRETRAIN_FAULT");
  EXPECT_LT(file_size(dir.file("piece-1/tokens.bin")), piece_bytes) << "the moved chunk is cut from the piece";
  EXPECT_TRUE(file_exists(dir.file("piece-1/moving.json")));
  EXPECT_EQ(TokenStoreJoin::piece_counts(dir.file("piece-1"), key), counts[1]) << "a piece being moved is still done";
  TokenStoreCounts at;
  for (size_t p : {2, 1, 0}) {
    at = TokenStoreCounts{};
    for (size_t q = 0; q < p; ++q) at += counts[q];
    TokenStoreJoin::move_piece(dir.file("store"), dir.file(cat("piece-", p)), at, 4096);
    EXPECT_FALSE(file_exists(dir.file(cat("piece-", p)))) << p;
  }
  TokenStoreCounts total;
  for (const auto& c : counts) total += c;
  TokenStoreJoin::commit(dir.file("store"), total, 2, key);
  for (const char* name : {"tokens.bin", "sentences.bin", "documents.bin", "store.json"})
    EXPECT_EQ(read_file(path_join(dir.file("store"), name)), read_file(path_join(dir.file("whole"), name))) << name;
  EXPECT_FALSE(file_exists(dir.file("store/join.json")));
}

}  // namespace
}  // namespace pretrain::token_store_test
