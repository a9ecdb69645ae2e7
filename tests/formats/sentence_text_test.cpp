// Google BERT's sentence text read as create_pretraining_data.py reads it (Python's universal
// newlines, str.strip(), invalid UTF-8 replaced), plain or compressed, and written as wikiprep
// --format sentences writes it.
#include "formats/sentence_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "compress_util.h"
#include "test_util.h"

namespace pretrain::sentence_text_test {
namespace {

using testing::TempDir;

std::vector<std::string> lines_of(const std::string& path) {
  SentenceTextReader reader(path);
  std::vector<std::string> lines;
  for (std::string line; reader.next_line(line);) {
    lines.push_back(line);
    EXPECT_EQ(reader.line_number(), static_cast<int64_t>(lines.size()));
  }
  return lines;
}

std::vector<std::string> sentences_of(const std::string& path) {
  SentenceTextReader reader(path);
  std::vector<std::string> sentences;
  for (std::string_view s; reader.next_sentence(s);) sentences.emplace_back(s);
  return sentences;
}

// The lines of `bytes` written to a file.
std::vector<std::string> lines_of_bytes(const TempDir& dir, std::string_view bytes) {
  std::string path = dir.file("t.txt");
  write_file_atomic(path, bytes);
  return lines_of(path);
}

using Lines = std::vector<std::string>;

TEST(PythonStrip, StripsWhatStrStripStrips) {
  EXPECT_EQ(python_strip("  a b \t\n"), "a b");
  EXPECT_EQ(python_strip("\xE3\x80\x80x\xC2\xA0"), "x");       // U+3000, U+00A0
  EXPECT_EQ(python_strip("\xE2\x80\x8Bx"), "\xE2\x80\x8Bx");   // U+200B is not white space to Python
  EXPECT_EQ(python_strip("\xEF\xBB\xBFx"), "\xEF\xBB\xBFx");   // nor is the BOM
  EXPECT_EQ(python_strip("\x1C\x1Fx\xC2\x85"), "x");           // file/unit separators, U+0085 (NEL)
  EXPECT_EQ(python_strip("   "), "");
  EXPECT_EQ(python_strip(""), "");
}

TEST(PythonStrip, IsspaceIsCPythonsTable) {
  for (char32_t c : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028,
                     0x2029, 0x202F, 0x205F, 0x3000})
    EXPECT_TRUE(python_isspace(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {0x00, 0x08, 0x0E, 0x1B, 0x21, 0x84, 0x180E, 0x200B, 0x200C, 0x2060, 0xFEFF})
    EXPECT_FALSE(python_isspace(c)) << static_cast<uint32_t>(c);
}

TEST(SentenceText, UniversalNewlines) {
  TempDir dir;
  // The line reading of the make-pretraining-shards test this came from (text_documents_test).
  EXPECT_EQ(lines_of_bytes(dir, "one\r\ntwo\rthree\n \t\nfour\r\n\r\n\r\nfive"),
            (Lines{"one", "two", "three", " \t", "four", "", "", "five"}));
  EXPECT_EQ(lines_of_bytes(dir, "a\r\nb\r\n"), (Lines{"a", "b"}));   // CRLF
  EXPECT_EQ(lines_of_bytes(dir, "a\rb\r"), (Lines{"a", "b"}));       // CR (old Mac)
  // Mixed: "\r\r\n" is a line ended by "\r" and an empty one ended by "\r\n"; "\n\r" two ends.
  EXPECT_EQ(lines_of_bytes(dir, "a\nb\r\nc\rd\r\r\ne\n\rf"), (Lines{"a", "b", "c", "d", "", "e", "", "f"}));
  // Only \n, \r and \r\n end a line in a file: \v, \f, \x1c and U+2028 are inside one, as in Python.
  EXPECT_EQ(lines_of_bytes(dir, "a\vb\fc\x1C" "d\xE2\x80\xA8" "e\n"), (Lines{"a\vb\fc\x1C" "d\xE2\x80\xA8" "e"}));
}

TEST(SentenceText, MissingFinalNewlineAndEmptyFiles) {
  TempDir dir;
  EXPECT_EQ(lines_of_bytes(dir, "a\nb"), (Lines{"a", "b"}));
  EXPECT_EQ(lines_of_bytes(dir, "a\n"), (Lines{"a"}));
  EXPECT_EQ(lines_of_bytes(dir, "a\r"), (Lines{"a"}));
  EXPECT_EQ(lines_of_bytes(dir, "\n"), (Lines{""}));
  EXPECT_EQ(lines_of_bytes(dir, "\r\n"), (Lines{""}));
  EXPECT_EQ(lines_of_bytes(dir, ""), Lines{});
}

TEST(SentenceText, LinesAndTerminatorsAcrossReads) {
  // The reader decodes 64 KiB at a time: a line, and a "\r\n", split between two reads.
  TempDir dir;
  const size_t read = size_t{64} << 10;
  std::string long_line(read + 10, 'x');
  EXPECT_EQ(lines_of_bytes(dir, "a\n" + long_line + "\nb"), (Lines{"a", long_line, "b"}));
  std::string head(read - 1, 'y');
  EXPECT_EQ(lines_of_bytes(dir, head + "\r\nz\n"), (Lines{head, "z"}));
  EXPECT_EQ(lines_of_bytes(dir, head + "\r\r\n"), (Lines{head, ""}));
  EXPECT_EQ(lines_of_bytes(dir, head + "\r"), (Lines{head}));
}

TEST(SentenceText, SentencesAreStrippedAndBlankLinesEmpty) {
  TempDir dir;
  std::string path = dir.file("s.txt");
  // White-space-only lines of every kind Python strips: tabs, U+3000, U+00A0, NEL, U+2028, \x1c.
  write_file_atomic(path, "  First one. \nsecond\t\n \t\n\xE3\x80\x80\xC2\xA0\n\xC2\x85\xE2\x80\xA8\x1C\x0B\x0C\n"
                          "\xE2\x80\x8B\nthird\r\n");
  EXPECT_EQ(sentences_of(path), (Lines{"First one.", "second", "", "", "", "\xE2\x80\x8B", "third"}));
}

TEST(SentenceText, InvalidUtf8IsReplacedNotFatal) {
  TempDir dir;
  std::string path = dir.file("bad.txt");
  write_file_atomic(path, "ok \xFF\xFE end\n\xC3\n");
  EXPECT_EQ(sentences_of(path), (Lines{"ok \xEF\xBF\xBD\xEF\xBF\xBD end", "\xEF\xBF\xBD"}));
  EXPECT_EQ(lines_of(path), (Lines{"ok \xFF\xFE end", "\xC3"})) << "next_line gives the bytes as they are";
}

TEST(SentenceText, CompressedFilesReadLikeTheText) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += i % 9 == 8 ? "\r\n" : i % 5 == 0 ? "Sentence " + std::to_string(i) + ".\r" : "w" + std::to_string(i) + "\n";
  std::string plain = dir.file("plain.txt");
  write_file_atomic(plain, text);
  Lines want = lines_of(plain);
  ASSERT_GT(want.size(), 19000u);
  struct Case {
    const char* name;
    std::string bytes;
  };
  const Case cases[] = {{"a.txt.gz", testing::gzip_member(text.substr(0, 1000)) + testing::gzip_member(text.substr(1000))},
                        {"a.txt.zst", testing::zstd_frame(text)},
                        {"a.txt.bz2", testing::bz2_stream(text, 1)},
                        {"lies.txt", testing::bz2_stream(text)}};
  for (const Case& c : cases) {
    std::string path = dir.file(c.name);
    write_file_atomic(path, c.bytes);
    EXPECT_EQ(lines_of(path), want) << c.name;
  }
  SentenceTextReader reader(dir.file("a.txt.zst"));
  EXPECT_EQ(reader.compression(), "zst");
  EXPECT_EQ(reader.path(), dir.file("a.txt.zst"));
}

TEST(SentenceText, CorruptCompressedFileIsAnErrorNamingItAndAnOffset) {
  TempDir dir;
  std::string path = dir.file("cut.txt.gz");
  std::string whole = testing::gzip_member(std::string(100000, 'a') + "\n");
  write_file_atomic(path, whole.substr(0, whole.size() - 3));
  try {
    lines_of(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_GE(e.where().offset, 0);
  }
  try {
    SentenceTextReader missing(dir.file("missing.txt"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos) << e.what();
  }
}

TEST(SentenceText, FileBytesReadReachesTheFileSize) {
  TempDir dir;
  std::string path = dir.file("p.txt");
  write_file_atomic(path, "a\nb\n\nc\n");
  SentenceTextReader reader(path);
  EXPECT_EQ(reader.file_bytes_read(), 0u);
  std::string line;
  ASSERT_TRUE(reader.next_line(line));
  EXPECT_EQ(reader.file_bytes_read(), 7u);
  while (reader.next_line(line)) {
  }
  EXPECT_EQ(reader.line_number(), 4);
  EXPECT_EQ(reader.file_bytes_read(), 7u);
}

TEST(SentenceText, NamesThatSaySentenceText) {
  for (const char* yes : {"a.txt", "dir/sentences-00001.txt", "a.txt.gz", "a.txt.zst", "a.txt.bz2"})
    EXPECT_TRUE(is_sentence_text_name(yes)) << yes;
  for (const char* no : {"a.jsonl", "a.jsonl.zst", "a.txt.xz", "txt", "a.gz", "a.text"})
    EXPECT_FALSE(is_sentence_text_name(no)) << no;
}

TEST(SentenceTextWriter, WritesDocumentsThatTheReaderReadsBack) {
  TempDir dir;
  std::string path = dir.file("sentences-00000.txt");
  SentenceTextWriter writer(path);
  writer.add_document("First sentence.\nSecond one.\n");
  writer.add_document("");  // a document without sentences is a blank line alone
  writer.add_document("Last.\n");
  EXPECT_FALSE(file_exists(path)) << "nothing is there before commit()";
  EXPECT_EQ(writer.documents(), 3u);
  EXPECT_EQ(writer.bytes_written(), SentenceTextWriter::document_bytes("First sentence.\nSecond one.\n") +
                                        SentenceTextWriter::document_bytes("") +
                                        SentenceTextWriter::document_bytes("Last.\n"));
  uint64_t hash = writer.xxh3();
  writer.commit();
  EXPECT_EQ(read_file(path), "First sentence.\nSecond one.\n\n\nLast.\n\n");
  EXPECT_EQ(hash, xxh3_file(path));
  EXPECT_EQ(sentences_of(path), (Lines{"First sentence.", "Second one.", "", "", "Last.", ""}));
}

}  // namespace
}  // namespace pretrain::sentence_text_test
