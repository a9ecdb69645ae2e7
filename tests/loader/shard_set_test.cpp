// LoaderConfig::sources resolved to files (loader/shard_set.cpp): manifests (as files or the
// directories holding them), checked against what they list; a binned split's manifest as one set
// per bin; globs, files and directories typed by their names (BERT .hdf5, Megatron .bin/.idx pairs
// or prefixes, llm.c .bin), lent a manifest beside them; and each source that cannot be read
// refused naming it and why.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bert_shards_fixture.h"
#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::shard_set_test {
namespace {

using testing::TempDir;

BertRecord record(int64_t g, int64_t length = 8) {
  BertRecord r;
  for (int64_t j = 0; j < length - g % 2; ++j) {
    r.input_ids.push_back(int32_t(j == 0 ? 101 : 1000 + g));
    r.input_mask.push_back(1);
    r.segment_ids.push_back(0);
  }
  return r;
}

// BERT shards of the given sizes in `dir` with their manifest (written unless `manifest` is false).
testing::BertShardFiles bert_shards(const std::string& dir, const std::vector<int64_t>& sizes, bool manifest = true) {
  auto written = testing::write_bert_shards(dir, sizes, 8, 2, {{"[CLS]", 101}}, [](int64_t g) { return record(g); });
  if (manifest) written.manifest.write(path_join(dir, kManifestName));
  return written;
}

void write_megatron(const std::string& prefix) {
  MegatronWriter writer(prefix, MegatronDType::u16);
  const std::vector<uint16_t> tokens = {1, 2, 3, 4, 5};
  writer.add_sequence(std::span<const uint16_t>(tokens));
  writer.end_document();
  writer.finalize();
}

void write_llmc(const std::string& path) {
  LlmcWriter writer(path);
  for (int64_t t = 0; t < 20; ++t) writer.add(t);
  writer.commit();
}

LoaderConfig config(std::vector<std::string> sources, ModelKind kind = ModelKind::bert) {
  LoaderConfig c;
  c.sources = std::move(sources);
  c.kind = kind;
  return c;
}

// The message of the Error resolving `c` throws, checking it is a UsageError when `usage`.
std::string error_of(const LoaderConfig& c, bool usage = false) {
  try {
    resolve_sources(c);
  } catch (const UsageError& e) {
    EXPECT_TRUE(usage) << "a UsageError: " << e.what();
    return e.what();
  } catch (const Error& e) {
    EXPECT_FALSE(usage) << "not a UsageError: " << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(ShardSet, AManifestGivesItsShardsInOrder) {
  TempDir dir;
  const auto written = bert_shards(dir.path(), {5, 3, 4});
  for (const std::string& source : {dir.path(), path_join(dir.path(), kManifestName)}) {
    const std::vector<ShardSet> sets = resolve_sources(config({source}));
    ASSERT_EQ(sets.size(), 1u) << source;
    EXPECT_EQ(sets[0].origin, source);
    EXPECT_EQ(sets[0].format, kFormatBertHdf5);
    EXPECT_EQ(sets[0].files, written.files);
    ASSERT_TRUE(sets[0].manifest.has_value());
    EXPECT_EQ(sets[0].manifest->tokenizer.vocab_size, 30522);
    EXPECT_EQ(sets[0].bin_length, 0);
  }
  // Two sources: two sets, in the order given.
  TempDir other;
  bert_shards(other.path(), {2});
  const auto sets = resolve_sources(config({other.path(), dir.path()}));
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].files.size(), 1u);
  EXPECT_EQ(sets[1].files.size(), 3u);
  EXPECT_NE(error_of(config({}), true).find("no shard sources given"), std::string::npos);
}

// A manifest is checked against the files before any is read: incomplete, missing or changed
// files, the wrong kind of shards, and (with verify_checksums) their contents.
TEST(ShardSet, AManifestThatDoesNotMatchItsFilesIsRefused) {
  TempDir dir;
  const auto written = bert_shards(dir.path(), {5, 3});
  const std::string manifest = path_join(dir.path(), kManifestName);
  EXPECT_NE(error_of(config({dir.path()}, ModelKind::gpt)).find("the shards are 'bert-hdf5', which a gpt loader does not read"),
            std::string::npos);
  Manifest m = Manifest::read(manifest);
  m.complete = false;
  m.write(manifest);
  EXPECT_NE(error_of(config({dir.path()})).find("the manifest is marked incomplete"), std::string::npos);
  m.complete = true;
  m.shards.clear();
  m.write(manifest);
  EXPECT_NE(error_of(config({dir.path()})).find("the manifest lists no shards"), std::string::npos);
  written.manifest.write(manifest);
  // The same size, other bytes: only the checksums see it.
  std::string bytes = read_file(written.files[1]);
  bytes[bytes.size() - 1] = char(bytes[bytes.size() - 1] ^ 1);
  write_file_atomic(written.files[1], bytes);
  EXPECT_EQ(error_of(config({dir.path()})), "(no error)");
  LoaderConfig verify = config({dir.path()});
  verify.verify_checksums = true;
  const std::string changed = error_of(verify);
  EXPECT_NE(changed.find("shard-1.hdf5: expected xxh3 "), std::string::npos) << changed;
  EXPECT_NE(changed.find("(checked against " + manifest + ")"), std::string::npos) << changed;
  {
    std::ofstream(written.files[1], std::ios::app) << "more";
  }
  const std::string grown = error_of(config({dir.path()}));
  EXPECT_NE(grown.find(written.files[1]), std::string::npos) << grown;
  EXPECT_NE(grown.find("bytes, but " + manifest + " says"), std::string::npos) << grown;
  std::filesystem::remove(written.files[0]);
  const std::string gone = error_of(config({dir.path()}));
  EXPECT_NE(gone.find(written.files[0] + ": listed in " + manifest + " but missing"), std::string::npos) << gone;
}

// A binned split: one set per bin, each with its records' length, from the bin's own manifest;
// a bin whose manifest disagrees with the split's is refused.
TEST(ShardSet, ABinnedSplitGivesOneSetPerBin) {
  TempDir dir;
  testing::write_binned_bert_shards(dir.path(), {8, 16}, {6, 4}, 2, {{"[CLS]", 101}}, record);
  const auto sets = resolve_sources(config({dir.path()}));
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].bin_length, 8);
  EXPECT_EQ(sets[1].bin_length, 16);
  EXPECT_EQ(sets[1].files.size(), 2u);
  EXPECT_EQ(sets[1].origin, dir.path() + " (bin-01)");
  EXPECT_NE(error_of(config({dir.path()}, ModelKind::gpt)).find("length-binned BERT shards"), std::string::npos);
  const std::string bin_manifest = path_join(path_join(dir.path(), "bin-01"), kManifestName);
  Manifest m = Manifest::read(bin_manifest);
  m.seq_len = 24;
  m.write(bin_manifest);
  const std::string wrong = error_of(config({dir.path()}));
  EXPECT_NE(wrong.find(bin_manifest), std::string::npos) << wrong;
}

// Without a manifest, files are typed by their names; a directory yields its .hdf5 files (BERT);
// a manifest beside files that lists them all lends them its tokenizer.
TEST(ShardSet, FilesAndGlobsAreTypedByTheirNames) {
  TempDir dir;
  const auto written = bert_shards(dir.path(), {3, 3}, false);
  std::ofstream(dir.file("notes.txt")) << "not a shard";
  auto sets = resolve_sources(config({dir.path()}));
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].files, written.files) << "notes.txt is passed over in a directory";
  EXPECT_FALSE(sets[0].manifest.has_value());
  sets = resolve_sources(config({dir.file("shard-*.hdf5")}));
  EXPECT_EQ(sets[0].files, written.files);
  written.manifest.write(dir.file(kManifestName));
  sets = resolve_sources(config({dir.file("shard-1.hdf5")}));
  EXPECT_EQ(sets[0].files, std::vector<std::string>{written.files[1]});
  EXPECT_TRUE(sets[0].manifest.has_value()) << "the manifest beside it lists it";
  EXPECT_NE(error_of(config({dir.file("notes.txt")})).find("not a shard: expected .hdf5/.h5 (BERT)"), std::string::npos);

  // GPT: a Megatron prefix, its .bin or .idx (one set, the prefix once), an llm.c .bin.
  TempDir gpt;
  const std::string prefix = gpt.file("corpus_text_document");
  write_megatron(prefix);
  write_llmc(gpt.file("train.bin"));
  for (const std::string& source : {prefix, megatron_bin_path(prefix), megatron_idx_path(prefix)}) {
    sets = resolve_sources(config({source}, ModelKind::gpt));
    ASSERT_EQ(sets.size(), 1u) << source;
    EXPECT_EQ(sets[0].format, kFormatMegatron) << source;
    EXPECT_EQ(sets[0].files, std::vector<std::string>{prefix}) << source;
  }
  sets = resolve_sources(config({gpt.file("train.bin")}, ModelKind::gpt));
  EXPECT_EQ(sets[0].format, kFormatLlmc);
  EXPECT_EQ(sets[0].files, std::vector<std::string>{gpt.file("train.bin")});
  EXPECT_NE(error_of(config({prefix}, ModelKind::bert)).find("is a 'megatron' shard, which a bert loader does not read"),
            std::string::npos);
  // One source mixing formats is a usage error: they are separate sources.
  const std::string mixed = error_of(config({gpt.file("*.bin")}, ModelKind::gpt), true);
  EXPECT_NE(mixed.find("mixes '"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("give them as separate sources"), std::string::npos) << mixed;
}

TEST(ShardSet, SourcesThatMatchNothingAreUsageErrors) {
  TempDir dir;
  make_dirs(dir.file("empty"));
  EXPECT_NE(error_of(config({dir.file("empty")}), true).find(dir.file("empty") + ": no input files match"), std::string::npos);
  // A directory of other files: nothing a GPT loader reads.
  make_dirs(dir.file("notes"));
  std::ofstream(dir.file("notes/a.txt")) << "text";
  const std::string notes = error_of(config({dir.file("notes")}, ModelKind::gpt), true);
  EXPECT_NE(notes.find(dir.file("notes") + ": holds no gpt shards"), std::string::npos) << notes;
  const std::string missing = error_of(config({dir.file("nothing-*.hdf5")}), true);
  EXPECT_NE(missing.find("nothing-*.hdf5"), std::string::npos) << missing;
  const std::string manifest = error_of(config({dir.file("gone/manifest.json")}));
  EXPECT_NE(manifest.find("gone/manifest.json"), std::string::npos) << manifest;
}

}  // namespace
}  // namespace pretrain::shard_set_test
