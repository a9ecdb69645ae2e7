// The names of wikiprep's shards: written and parsed back, other names refused, and the removal
// of the shards a run writes again (with temp files), leaving everything else.
#include "datagen/wikiprep/document_shard_names.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "common/file.h"
#include "common/manifest.h"
#include "test_util.h"

namespace pretrain::document_shard_names_test {
namespace {

using testing::TempDir;

constexpr WikiprepFormat kJsonl = WikiprepFormat::jsonl, kSentences = WikiprepFormat::sentences;

TEST(DocumentShardNames, NamesOfEachFormat) {
  EXPECT_EQ(wikiprep_shard_name(kJsonl, 0), "docs-00000.jsonl.zst");
  EXPECT_EQ(wikiprep_shard_name(kJsonl, 7), "docs-00007.jsonl.zst");
  EXPECT_EQ(wikiprep_shard_name(kSentences, 7), "sentences-00007.txt");
  EXPECT_EQ(wikiprep_shard_name(kSentences, 123456), "sentences-123456.txt");  // more digits, not cut
  EXPECT_STREQ(wikiprep_shard_prefix(kJsonl), "docs");
  EXPECT_STREQ(wikiprep_shard_prefix(kSentences), "sentences");
  EXPECT_STREQ(wikiprep_manifest_format(kJsonl), kFormatDocs);
  EXPECT_STREQ(wikiprep_manifest_format(kSentences), kFormatSentences);
}

TEST(DocumentShardNames, IndexReadsItsOwnNamesBack) {
  for (WikiprepFormat format : {kJsonl, kSentences})
    for (uint64_t index : {0ull, 7ull, 12ull, 99999ull}) {
      std::optional<uint64_t> got = wikiprep_shard_index(format, wikiprep_shard_name(format, index));
      ASSERT_TRUE(got.has_value()) << wikiprep_shard_name(format, index);
      EXPECT_EQ(*got, index);
    }
}

TEST(DocumentShardNames, IndexRefusesEveryOtherName) {
  for (const char* name : {"", "docs-.jsonl.zst", "docs-0001.jsonl.zst", "docs-000001.jsonl.zst",
                           "docs-0000a.jsonl.zst", "docs-+0001.jsonl.zst", "docs- 0001.jsonl.zst",
                           "docs_00001.jsonl.zst", "xdocs-00001.jsonl.zst", "docs-00001.jsonl",
                           "docs-00001.jsonl.zst.tmp-123", "docs-00001.txt", "sentences-00001.txt",
                           "manifest.json", "train-00001.hdf5"})
    EXPECT_FALSE(wikiprep_shard_index(kJsonl, name).has_value()) << name;
  for (const char* name : {"docs-00001.jsonl.zst", "sentences-0001.txt", "sentences-00001.txt.tmp-9",
                           "sentences-00001.text", "sentences-1e001.txt"})
    EXPECT_FALSE(wikiprep_shard_index(kSentences, name).has_value()) << name;
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

TEST(DocumentShardNames, RemoveFromAnIndexKeepsTheShardsBeforeItAndOtherFiles) {
  TempDir dir;
  for (const char* name : {"docs-00000.jsonl.zst", "docs-00001.jsonl.zst", "docs-00002.jsonl.zst", "docs-00017.jsonl.zst",
                           "docs-00003.jsonl.zst.tmp-42", "manifest.json", "manifest.json.tmp-42", "sentences-00005.txt",
                           "sentences-00000.txt.tmp-42", "notes.txt", "docs-7.jsonl.zst"})
    write_file_atomic(dir.file(name), "x");
  remove_wikiprep_shards_from(dir.path(), kJsonl, 2);
  EXPECT_EQ(names_in(dir.path()), (std::set<std::string>{"docs-00000.jsonl.zst", "docs-00001.jsonl.zst", "manifest.json",
                                                         "sentences-00005.txt", "sentences-00000.txt.tmp-42", "notes.txt",
                                                         "docs-7.jsonl.zst"}));
  remove_wikiprep_shards_from(dir.path(), kSentences, 0);
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"docs-00000.jsonl.zst", "docs-00001.jsonl.zst", "manifest.json", "notes.txt", "docs-7.jsonl.zst"}));
  remove_wikiprep_shards_from(dir.file("missing"), kJsonl, 0);  // no directory yet: nothing to do
}

}  // namespace
}  // namespace pretrain::document_shard_names_test
