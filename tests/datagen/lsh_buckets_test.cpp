// LSH buckets: runs of equal band keys join, with the Jaccard check when asked (against the run's
// first document, then the member before it, so drifting copies chain); exact hashes join, empty
// texts never; documents are numbered across files in order; the sets do not depend on band order.
#include "datagen/dedup/lsh_buckets.h"

#include <gtest/gtest.h>

#include "datagen/dedup/minhash.h"
#include "test_util.h"

namespace pretrain::lsh_buckets_test {
namespace {

using testing::TempDir;

DocSignature doc(std::vector<uint32_t> sig, int bands, Hash128 exact = {}, std::string id = "") {
  DocSignature d;
  d.exact = exact;
  d.id = std::move(id);
  if (sig.empty()) return d;
  d.has_minhash = true;
  const int rows = static_cast<int>(sig.size()) / bands;
  for (int b = 0; b < bands; ++b) d.band_keys.push_back(band_key(sig.data(), b, rows));
  d.signature = std::move(sig);
  return d;
}

SignatureSet make_set(const TempDir& dir, const std::vector<std::vector<DocSignature>>& files, int hashes, int bands) {
  std::vector<SignatureFile> opened;
  for (size_t f = 0; f < files.size(); ++f) {
    SignatureFileBuilder b(f, hashes, bands);
    for (const auto& d : files[f]) b.add(d);
    std::string path = dir.file("sig-" + std::to_string(f));
    b.write(path);
    opened.emplace_back(path);
  }
  return SignatureSet(std::move(opened));
}

std::vector<uint64_t> clusters(const SignatureSet& set, double threshold, std::vector<int> bands) {
  UnionFind u(set.documents());
  JoinStats stats;
  join_exact(set, u, nullptr, stats);
  for (int b : bands) join_band(set, b, threshold, u, nullptr, stats);
  return u.roots();
}

TEST(LshBuckets, RunsOfEqualKeysJoinAcrossFiles) {
  TempDir dir;
  // 4 hashes in 2 bands of 2 rows. Document 1 shares band 0 with 0, document 2 band 1, document 4
  // is 0's signature again; document 3 has none.
  SignatureSet set = make_set(dir,
                              {{doc({1, 2, 3, 4}, 2, {1, 1}), doc({1, 2, 9, 9}, 2, {2, 2})},
                               {doc({7, 7, 3, 4}, 2, {3, 3}), doc({}, 2, {4, 4}), doc({1, 2, 3, 4}, 2, {5, 5})}},
                              4, 2);
  EXPECT_EQ(set.documents(), 5u);
  EXPECT_EQ(set.locate(3), (std::pair<size_t, uint64_t>{1, 1}));
  EXPECT_EQ(clusters(set, 0, {0, 1}), (std::vector<uint64_t>{0, 0, 0, 3, 0}));
  // With a check at 0.75 only the identical signature joins (1 and 2 estimate 0.5 against 0).
  EXPECT_EQ(clusters(set, 0.75, {0, 1}), (std::vector<uint64_t>{0, 1, 2, 3, 0}));
  EXPECT_EQ(clusters(set, 0.75, {1, 0}), clusters(set, 0.75, {0, 1}));
  EXPECT_EQ(clusters(set, 0.5, {1, 0}), (std::vector<uint64_t>{0, 0, 0, 3, 0}));
}

TEST(LshBuckets, DriftingCopiesChainThroughThePredecessor) {
  TempDir dir;
  // One band of one row: every document shares it. 0~1 and 1~2 estimate 0.75, 0~2 only 0.5.
  SignatureSet set = make_set(dir, {{doc({5, 1, 1, 1}, 4), doc({5, 1, 1, 2}, 4), doc({5, 1, 2, 2}, 4), doc({5, 9, 9, 9}, 4)}}, 4, 4);
  UnionFind u(set.documents());
  JoinStats stats;
  join_band(set, 0, 0.7, u, nullptr, stats);
  EXPECT_EQ(u.roots(), (std::vector<uint64_t>{0, 0, 0, 3}));
  EXPECT_GT(stats.checked, 0u);
}

TEST(LshBuckets, ExactHashesJoinButEmptyTextsDoNot) {
  TempDir dir;
  const Hash128 empty = xxh3_128("");
  SignatureSet set = make_set(dir, {{doc({}, 1, {9, 9}), doc({}, 1, empty), doc({}, 1, {9, 9}), doc({}, 1, empty)}}, 1, 1);
  std::vector<DocPair> merged;
  UnionFind u(set.documents());
  JoinStats stats;
  join_exact(set, u, &merged, stats);
  EXPECT_EQ(u.roots(), (std::vector<uint64_t>{0, 1, 0, 3}));
  EXPECT_EQ(merged, (std::vector<DocPair>{{0, 2}}));
}

TEST(LshBuckets, MismatchedFilesAreRefused) {
  TempDir dir;
  SignatureFileBuilder a(1, 4, 2), b(2, 8, 2);
  a.write(dir.file("a"));
  b.write(dir.file("b"));
  std::vector<SignatureFile> files;
  files.emplace_back(dir.file("a"));
  files.emplace_back(dir.file("b"));
  EXPECT_THROW(SignatureSet(std::move(files)), Error);
}

}  // namespace
}  // namespace pretrain::lsh_buckets_test
