// GPT shards of one split: the documents' tokens in the order given, one Megatron sequence (and
// document) each, or back to back in an llm.c file; equal document counts per shard; the counts in
// the statistics; the narrowest token width the vocabulary allows; bad options refused.
#include "datagen/shards/gpt_shards.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "test_util.h"

namespace pretrain::gpt_shards_test {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Document d: 1–3 sentences of 4 tokens (100 d + 1, 100 d + 2, …), the last ending in EOD (7);
// the GPT stage writes a document's sentences back to back.
std::vector<std::vector<TokenId32>> document(int d) {
  std::vector<std::vector<TokenId32>> doc(size_t(d % 3) + 1);
  TokenId32 next = 100 * d + 1;
  for (auto& s : doc)
    for (int i = 0; i < 4; ++i) s.push_back(next++);
  doc.back().push_back(7);
  return doc;
}

std::vector<TokenId32> flat(int d) {
  std::vector<TokenId32> out;
  for (const auto& s : document(d)) out.insert(out.end(), s.begin(), s.end());
  return out;
}

class GptShards : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::warn);
    make_dirs(dir.file("store"));
    TokenStoreWriter w(dir.file("store"));
    for (int d = 0; d < 7; ++d) w.add_document(document(d));
    w.commit({{"test", 1}});
    store.emplace(dir.file("store"));
  }
  SplitOutput output(const std::string& name, int shards) const {
    SplitOutput out;
    out.dir = dir.file(name);
    out.num_shards = shards;
    out.manifest.extra["key"] = "k";
    return out;
  }
  TempDir dir;
  std::optional<TokenStore> store;
  const std::vector<uint32_t> order = {6, 2, 0, 5, 1};  // documents 3 and 4 are in the other split
};

TEST_F(GptShards, MegatronShardsHoldTheDocumentsInTheOrderGiven) {
  MakeShardsStats stats;
  write_gpt_split({.format = GptFormat::megatron, .vocab_size = 1000}, *store, order, output("m", 2), stats);
  EXPECT_EQ(stats.instances, 5u);
  EXPECT_EQ(stats.shards, 2u);
  const Manifest m = Manifest::read(path_join(dir.file("m"), kManifestName));
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.format, kFormatMegatron);
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[0].file, "train-00000.bin");
  EXPECT_EQ(m.shards[0].records, 3u);
  EXPECT_EQ(m.shards[1].records, 2u);
  EXPECT_EQ(m.shards[0].companions.count("train-00000.idx"), 1u);
  size_t k = 0;
  uint64_t tokens = 0;
  for (const auto& e : m.shards) {
    MegatronReader r(path_join(dir.file("m"), e.file));
    EXPECT_EQ(r.dtype(), MegatronDType::u16) << "1000 ids fit 16 bits";
    EXPECT_EQ(r.num_documents(), r.num_sequences());
    for (size_t i = 0; i < r.num_sequences(); ++i, ++k) {
      const TokenSpan s = r.sequence(i);
      std::vector<TokenId32> got;
      for (size_t t = 0; t < s.size; ++t) got.push_back(TokenId32(s[t]));
      EXPECT_EQ(got, flat(int(order[k]))) << k;
      tokens += s.size;
    }
  }
  EXPECT_EQ(k, order.size());
  EXPECT_EQ(stats.instance_tokens, tokens);
}

TEST_F(GptShards, LlmcShardsHoldTheTokensBackToBackAndAValidSplitCountsApart) {
  MakeShardsStats stats;
  SplitOutput out = output("l", 1);
  out.valid = true;
  write_gpt_split({.format = GptFormat::llmc, .vocab_size = 100000}, *store, order, out, stats);
  EXPECT_EQ(stats.valid_instances, 5u);
  EXPECT_EQ(stats.instances, 0u);
  const Manifest m = Manifest::read(path_join(dir.file("l"), kManifestName));
  EXPECT_EQ(m.format, kFormatLlmc);
  ASSERT_EQ(m.shards.size(), 1u);
  EXPECT_EQ(m.shards[0].file, "train-00000.llmc.bin");
  LlmcReader r(path_join(dir.file("l"), m.shards[0].file));
  EXPECT_EQ(r.format(), LlmcFormat::llama3) << "100000 ids need 32 bits";
  std::vector<TokenId32> want, got;
  for (uint32_t d : order) {
    const auto doc = flat(int(d));
    want.insert(want.end(), doc.begin(), doc.end());
  }
  for (size_t i = 0; i < r.size(); ++i) got.push_back(TokenId32(r[i]));
  EXPECT_EQ(got, want);
  EXPECT_EQ(m.shards[0].records, want.size()) << "an llm.c shard counts tokens";
}

TEST_F(GptShards, BadOptionsAreRefusedBeforeAnythingIsWritten) {
  MakeShardsStats stats;
  EXPECT_THROW(write_gpt_split({.vocab_size = 0}, *store, order, output("bad", 1), stats), UsageError);
  try {
    write_gpt_split({.vocab_size = 1000}, *store, order, output("bad", 0), stats);
    ADD_FAILURE() << "no error for 0 shards";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--num-shards"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("bad")));
}

}  // namespace
}  // namespace pretrain::gpt_shards_test
