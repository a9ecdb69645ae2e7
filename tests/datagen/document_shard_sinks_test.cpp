// The shard sinks: each rotates at --shard-bytes as its comment says (a shard closed before a
// document would take it past the limit, a lone larger document alone), numbers shards from the
// first index it is given, commits only whole shards, and writes the same bytes for a document
// given whole or serialized (as the mpirun ranks give it).
#include "datagen/wikiprep/document_shard_sinks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/manifest.h"
#include "formats/doc_shards.h"
#include "test_util.h"

namespace pretrain::document_shard_sinks_test {
namespace {

using testing::TempDir;

WikiprepOptions options(const std::string& dir, WikiprepFormat format, uint64_t shard_bytes) {
  WikiprepOptions o;
  o.input = "unused.xml";
  o.output_dir = dir;
  o.format = format;
  o.shard_bytes = shard_bytes;
  return o;
}

CleanDocument lines(std::string sentences, uint64_t repaired = 0) {
  CleanDocument d;
  d.sentences = std::move(sentences);
  d.repaired = repaired;
  return d;
}

CleanDocument doc(std::string id, std::string text) {
  CleanDocument d;
  d.doc = {id, "https://example.org/?curid=" + id, "Title " + id, std::move(text)};
  return d;
}

std::vector<uint64_t> records_of(const std::vector<ShardEntry>& shards) {
  std::vector<uint64_t> records;
  for (const ShardEntry& e : shards) records.push_back(e.records);
  return records;
}

TEST(DocumentShardSinks, SerializedFormAndItsShardBytes) {
  std::string out;
  EXPECT_EQ(serialize_document(WikiprepFormat::sentences, lines("a b.\nc d.\n", 2), out), 2u);
  EXPECT_EQ(out, "a b.\nc d.\n");
  out.clear();
  CleanDocument d = doc("7", "Text.\nMore.");
  EXPECT_EQ(serialize_document(WikiprepFormat::jsonl, d, out), 0u);
  std::string line;
  append_doc_json_line(d.doc, line);
  EXPECT_EQ(out, line);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(shard_bytes_of(WikiprepFormat::jsonl, 10), 10u);
  EXPECT_EQ(shard_bytes_of(WikiprepFormat::sentences, 10), 11u);  // and the blank line after it
  EXPECT_EQ(shard_bytes_of(WikiprepFormat::sentences, 10), SentenceTextWriter::document_bytes(std::string(10, 'x')));
}

TEST(DocumentShardSinks, SentenceShardsRotateAtShardBytes) {
  TempDir dir;
  // Each document takes its lines plus a blank line: 7, 3, 22 (over the limit alone) and 3 bytes.
  std::unique_ptr<ShardSink> sink = open_shard_sink(options(dir.path(), WikiprepFormat::sentences, 20), 3);
  sink->add(lines("a1\na2\n"));
  sink->add(lines("b\n", 1));
  EXPECT_TRUE(sink->shards().empty());
  sink->add(lines("c1\nc2\nc3\nc4\nc5\nc6\nc7\n"));  // 10 + 22 > 20: the first shard is committed before it
  ASSERT_EQ(sink->shards().size(), 1u);
  EXPECT_EQ(sink->shards()[0].file, "sentences-00003.txt");
  EXPECT_EQ(read_file(dir.file("sentences-00003.txt")), "a1\na2\n\nb\n\n");
  sink->add(lines("d\n"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("sentences-00005.txt"))) << "the open shard is under its finished name";
  Manifest m = sink->finish(Manifest());
  EXPECT_EQ(m.format, kFormatSentences);
  EXPECT_EQ(records_of(m.shards), (std::vector<uint64_t>{2, 1, 1}));
  EXPECT_EQ(m.shards[1].file, "sentences-00004.txt");
  EXPECT_EQ(m.shards[1].bytes, 22u);  // a lone larger document: a shard of its own
  EXPECT_EQ(read_file(dir.file("sentences-00005.txt")), "d\n\n");
  EXPECT_EQ(m.stats["documents"], 4u);
  EXPECT_EQ(sink->text_bytes(), 7u + 3u + 22u + 3u);
  EXPECT_EQ(sink->invalid_utf8_replaced(), 1u);
  EXPECT_TRUE(verify_manifest(m, dir.path()).empty());
}

TEST(DocumentShardSinks, DocsShardsRotateAtShardBytes) {
  TempDir dir;
  std::vector<CleanDocument> docs = {doc("1", std::string(60, 'a')), doc("2", std::string(60, 'b')),
                                     doc("3", std::string(400, 'c')), doc("4", "d"), doc("5", "e")};
  std::vector<uint64_t> sizes;
  for (const CleanDocument& d : docs) {
    std::string line;
    serialize_document(WikiprepFormat::jsonl, d, line);
    sizes.push_back(line.size());
  }
  // Two of the short ones fit in a shard, a third would not; the long one is over the limit alone.
  const uint64_t limit = sizes[0] + sizes[1] + 5;
  ASSERT_LT(limit, sizes[2]);
  ASSERT_GT(sizes[0] + sizes[1] + sizes[3], limit);
  std::unique_ptr<ShardSink> sink = open_shard_sink(options(dir.path(), WikiprepFormat::jsonl, limit), 0);
  for (const CleanDocument& d : docs) sink->add(d);
  Manifest m = sink->finish(Manifest());
  m.write(dir.file(kManifestName));
  EXPECT_EQ(m.format, kFormatDocs);
  EXPECT_EQ(records_of(m.shards), (std::vector<uint64_t>{2, 1, 2}));
  EXPECT_EQ(m.shards[2].file, "docs-00002.jsonl.zst");
  EXPECT_EQ(sink->text_bytes(), sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4]);
  DocReader reader(dir.path());
  Document got;
  for (const CleanDocument& d : docs) {
    ASSERT_TRUE(reader.next(got));
    EXPECT_EQ(got, d.doc);
  }
  EXPECT_FALSE(reader.next(got));
}

// The mpirun ranks hand the sinks serialized documents: the shards must be the same bytes.
TEST(DocumentShardSinks, SerializedDocumentsMakeTheSameShards) {
  for (WikiprepFormat format : {WikiprepFormat::jsonl, WikiprepFormat::sentences}) {
    TempDir whole, serialized;
    std::vector<CleanDocument> docs;
    for (int i = 0; i < 12; ++i) {
      CleanDocument d = doc(std::to_string(i), std::string(size_t(20 + 13 * i), char('a' + i)));
      d.sentences = d.doc.text + ".\n" + std::string(size_t(i), 'z') + "\n";
      docs.push_back(d);
    }
    std::unique_ptr<ShardSink> a = open_shard_sink(options(whole.path(), format, 150), 0);
    std::unique_ptr<ShardSink> b = open_shard_sink(options(serialized.path(), format, 150), 0);
    for (const CleanDocument& d : docs) {
      a->add(d);
      std::string line;
      uint64_t replaced = serialize_document(format, d, line);
      b->add_serialized(line, replaced);
    }
    Manifest ma = a->finish(Manifest()), mb = b->finish(Manifest());
    ASSERT_GT(ma.shards.size(), 2u);
    ASSERT_EQ(ma.shards.size(), mb.shards.size());
    for (size_t i = 0; i < ma.shards.size(); ++i) {
      EXPECT_EQ(ma.shards[i].records, mb.shards[i].records);
      EXPECT_EQ(read_file(whole.file(ma.shards[i].file)), read_file(serialized.file(mb.shards[i].file))) << ma.shards[i].file;
    }
    EXPECT_EQ(a->text_bytes(), b->text_bytes());
  }
}

TEST(DocumentShardSinks, FinishKeepsTheBaseShardsFirst) {
  TempDir dir;
  Manifest base;
  base.shards.push_back(ShardEntry{"sentences-00000.txt", 5, 100, "0123456789abcdef", {}});
  std::unique_ptr<ShardSink> sink = open_shard_sink(options(dir.path(), WikiprepFormat::sentences, 1000), 1);
  sink->add(lines("x.\n"));
  Manifest m = sink->finish(base);
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[0].file, "sentences-00000.txt");
  EXPECT_EQ(m.shards[1].file, "sentences-00001.txt");
  EXPECT_EQ(m.stats["documents"], 6u);
}

// The same rule in a whole run of the sample dump.
TEST(DocumentShardSinks, SentenceShardsOfARunRotateBySize) {
  TempDir dir;
  WikiprepOptions o = options(dir.path(), WikiprepFormat::sentences, 400);
  o.input = testing::source_dir() + "/tests/data/sample-dump.xml";
  WikiprepStats s = run_wikiprep(o);
  Manifest m = Manifest::read(dir.file(kManifestName));
  EXPECT_GT(m.shards.size(), 2u);
  EXPECT_EQ(m.total_records(), s.articles_written);
  for (const ShardEntry& e : m.shards)
    EXPECT_TRUE(e.records == 1 || e.bytes <= 400) << e.file;
}

}  // namespace
}  // namespace pretrain::document_shard_sinks_test
