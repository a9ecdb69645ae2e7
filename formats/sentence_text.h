// Google BERT's sentence text: the input of create_pretraining_data.py and the output of
// `wikiprep --format sentences` (docs/architecture.md, "Documents"). One sentence per line, a blank line
// after each document; UTF-8.
//
//   SentenceTextReader   a file's lines as Python's universal-newline readline() reads them (\n,
//                        \r\n and \r each end a line), through open_byte_source, so the file may
//                        be gzip, zstd or bz2 compressed; next_sentence() gives what the Python
//                        script keeps of a line (invalid UTF-8 replaced, then str.strip()), empty
//                        for a blank line, which ends a document. A document runs on into the next
//                        file unless a blank line ends it: the caller joins files
//                        (make-pretraining-shards' TextDocumentReader does).
//   SentenceTextWriter   one file of documents, committed atomically, with its xxh3 for the
//                        manifest.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

class ByteSource;

// Python's str.isspace() for one code point (Unicode White_Space as CPython tables it).
bool python_isspace(char32_t c);
// Python's str.strip() with no argument.
std::string_view python_strip(std::string_view s);

// Whether a file name says sentence text: *.txt, or *.txt.gz / .txt.zst / .txt.bz2.
bool is_sentence_text_name(std::string_view path);

class SentenceTextReader {
 public:
  // Throws Error when the file cannot be opened.
  explicit SentenceTextReader(std::string path);
  ~SentenceTextReader();
  SentenceTextReader(const SentenceTextReader&) = delete;
  SentenceTextReader& operator=(const SentenceTextReader&) = delete;

  // The next line without its terminator; false at the end of the file. A last line without a
  // terminator is a line; an empty file has none. Throws Error on a corrupt compressed file.
  bool next_line(std::string& line);
  // The next line as the Python script keeps it: invalid UTF-8 replaced by U+FFFD, then stripped
  // of white space; empty for a blank line. Valid until the next call.
  bool next_sentence(std::string_view& sentence);

  const std::string& path() const { return path_; }
  const std::string& compression() const { return compression_; }  // as open_byte_source says
  int64_t line_number() const { return line_number_; }              // of the line just read, 1-based
  uint64_t file_bytes_read() const;                                   // compressed, read ahead

 private:
  std::string path_, compression_;
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  bool after_cr_ = false;  // the last line ended at '\r': a '\n' right after it belongs to it
  int64_t line_number_ = 0;
  std::string line_;  // next_sentence()'s line
};

class SentenceTextWriter {
 public:
  // Writes to a temporary file that commit() renames onto `path`.
  explicit SentenceTextWriter(std::string path);

  // One document: `lines` holds its sentences, each followed by '\n' (as
  // SentenceSplitter::append_lines gives them); the blank line that ends the document is added.
  void add_document(std::string_view lines);
  // The bytes add_document(lines) writes.
  static uint64_t document_bytes(std::string_view lines) { return lines.size() + 1; }

  const std::string& path() const { return file_.path(); }
  uint64_t documents() const { return documents_; }
  uint64_t bytes_written() const { return file_.bytes_written(); }
  uint64_t xxh3() const { return hash_.digest(); }  // of the bytes written so far
  void commit() { file_.commit(); }

 private:
  AtomicFile file_;
  Xxh3Stream hash_;
  uint64_t documents_ = 0;
};

}  // namespace pretrain
