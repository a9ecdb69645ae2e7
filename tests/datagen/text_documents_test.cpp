// The document reader of make-pretraining-shards: Google's text format split into documents as
// Python splits it (blank lines, a document continuing into the next file; the line reading itself
// is tests/formats/sentence_text_test.cpp), and the token store.
#include "datagen/shards/text_documents.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/file.h"
#include "compress_util.h"
#include "datagen/shards/token_store.h"
#include "test_util.h"

namespace pretrain::text_documents_test {
namespace {

std::vector<std::vector<std::string>> read_all(const std::vector<std::string>& inputs) {
  TextDocumentReader reader(inputs);
  std::vector<std::vector<std::string>> docs;
  RawDocument d;
  while (reader.next(d)) {
    EXPECT_TRUE(d.presplit);
    docs.push_back(d.sentences);
  }
  return docs;
}

TEST(TextDocuments, UniversalNewlinesAndBlankLinesSplitDocuments) {
  testing::TempDir dir;
  const std::string f = path_join(dir.path(), "a.txt");
  write_file_atomic(f, "one\r\ntwo\rthree\n \t\nfour\r\n\r\n\r\nfive");
  auto docs = read_all({f});
  ASSERT_EQ(docs.size(), 4u);  // the two blank lines in a row make an empty document
  EXPECT_EQ(docs[0], (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(docs[1], (std::vector<std::string>{"four"}));
  EXPECT_TRUE(docs[2].empty());
  EXPECT_EQ(docs[3], (std::vector<std::string>{"five"}));
}

TEST(TextDocuments, ADocumentRunsOnIntoTheNextFileWithoutABlankLine) {
  testing::TempDir dir;
  const std::string a = path_join(dir.path(), "a.txt"), b = path_join(dir.path(), "b.txt");
  write_file_atomic(a, "x1\nx2\n");
  write_file_atomic(b, "x3\n\ny1\n");
  auto docs = read_all({a, b});
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], (std::vector<std::string>{"x1", "x2", "x3"}));  // as create_pretraining_data.py reads them
  EXPECT_EQ(docs[1], (std::vector<std::string>{"y1"}));
}

TEST(TextDocuments, CompressedSentenceTextIsSentenceTextToo) {
  // *.txt.gz / .zst / .bz2 are the text format, read through formats/compressed_input.h, and a
  // document runs on from a compressed file into a plain one.
  testing::TempDir dir;
  const std::string a = path_join(dir.path(), "a.txt.gz"), b = path_join(dir.path(), "b.txt.zst"),
                    c = path_join(dir.path(), "c.txt.bz2"), d = path_join(dir.path(), "d.txt");
  write_file_atomic(a, testing::gzip_member("x1\r\nx2\r\n"));
  write_file_atomic(b, testing::zstd_frame("x3\n\ny1\n"));
  write_file_atomic(c, testing::bz2_stream("y2\n\n\xE3\x80\x80\nz1\n"));
  write_file_atomic(d, "z2");
  auto docs = read_all({a, b, c, d});
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0], (std::vector<std::string>{"x1", "x2", "x3"}));
  EXPECT_EQ(docs[1], (std::vector<std::string>{"y1", "y2"}));
  EXPECT_EQ(docs[2], (std::vector<std::string>{}));  // the U+3000 line is blank: an empty document
  EXPECT_EQ(docs[3], (std::vector<std::string>{"z1", "z2"}));
  TextDocumentReader reader({a, b, c, d});
  ASSERT_EQ(reader.units().size(), 4u);
  for (const auto& u : reader.units()) EXPECT_TRUE(u.text_format) << u.path;
}

TEST(TextDocuments, JsonLinesGiveTextForTheSentenceSplitter) {
  testing::TempDir dir;
  const std::string f = path_join(dir.path(), "d.jsonl");
  write_file_atomic(f, "{\"id\":\"1\",\"text\":\"A b. C d.\\nE f.\"}\n");
  TextDocumentReader reader({f});
  RawDocument d;
  ASSERT_TRUE(reader.next(d));
  EXPECT_FALSE(d.presplit);
  EXPECT_EQ(d.text, "A b. C d.\nE f.");
  EXPECT_FALSE(reader.next(d));
}

TEST(TextDocuments, MissingInputIsAUsageErrorNamingIt) {
  try {
    TextDocumentReader reader({"/nonexistent/corpus-*.txt"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus-"), std::string::npos);
  }
}

TEST(TokenStore, RoundTripsDocumentsAndDropsEmptyOnes) {
  testing::TempDir dir;
  TokenStoreWriter w(dir.path());
  w.add_document({{1, 2, 3}, {}, {4}});
  w.add_document({});
  w.add_document({{}, {}});
  w.add_document({{5, 6}});
  w.commit({{"k", 1}});
  EXPECT_TRUE(TokenStore::complete(dir.path(), {{"k", 1}}));
  EXPECT_FALSE(TokenStore::complete(dir.path(), {{"k", 2}}));
  TokenStore s(dir.path());
  ASSERT_EQ(s.num_documents(), 2u);
  ASSERT_EQ(s.num_sentences(0), 2u);
  EXPECT_EQ(std::vector<int32_t>(s.sentence(0, 0).begin(), s.sentence(0, 0).end()), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(s.sentence(0, 1).begin(), s.sentence(0, 1).end()), (std::vector<int32_t>{4}));
  EXPECT_EQ(std::vector<int32_t>(s.document_tokens(1).begin(), s.document_tokens(1).end()), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(s.num_tokens(), 6u);
}

TEST(TokenStore, DamagedIndexIsAnErrorNotACrash) {
  testing::TempDir dir;
  TokenStoreWriter w(dir.path());
  w.add_document({{1, 2}, {3}});
  w.commit({});
  uint64_t huge[2] = {2, 1000};
  write_file_atomic(path_join(dir.path(), "sentences.bin"), std::string_view(reinterpret_cast<char*>(huge), 16));
  EXPECT_THROW(TokenStore s(dir.path()), Error);
}

}  // namespace
}  // namespace pretrain::text_documents_test
