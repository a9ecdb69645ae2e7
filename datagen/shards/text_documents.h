// The documents make-pretraining-shards reads, in one stream from two kinds of input:
//
//  - Google BERT's text format (`*.txt`, or a directory whose manifest says wikiprep's
//    "sentences-txt"): one sentence per line, blank lines between documents. Lines are read as
//    Python's universal-newline readline() reads them (\n, \r\n and \r end a line) and a line is
//    blank when Python's str.strip() leaves nothing, so documents split exactly where
//    create_pretraining_data.py splits them.
//  - Our document shards and everything else DocReader reads (JSON lines, wikiextractor output):
//    each document's text, whose lines are split into sentences later (ICU, as wikiprep does),
//    on the worker that tokenizes it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

struct RawDocument {
  bool presplit = false;               // lines are already sentences (text format)
  std::vector<std::string> sentences;  // presplit: the document's non-blank lines, stripped
  std::string text;                    // otherwise: the text, paragraphs separated by '\n'
  std::string source;                  // "file:line" of the document's start, for messages
};

// Python's str.isspace() for one code point (Unicode White_Space as CPython tables it).
bool python_isspace(char32_t c);
// Python's str.strip() with no argument.
std::string_view python_strip(std::string_view s);

class TextDocumentReader {
 public:
  explicit TextDocumentReader(const std::vector<std::string>& inputs);
  ~TextDocumentReader();
  // The next document, possibly without sentences (the caller drops those, as the Python code
  // does). False at the end of the last input. Throws Error naming the file and line or offset.
  bool next(RawDocument& doc);
  uint64_t bytes_read() const;    // input bytes consumed so far (for progress)
  uint64_t total_bytes() const;   // sum of the input files' sizes

  // The inputs in reading order; text-format units hold a text file, the others a path DocReader
  // reads (a file, or a directory with a manifest). A document of the text format continues from
  // one text file into the next unless a blank line ends it, as in the Python script.
  struct Unit {
    bool text_format = false;
    std::string path;
  };
  const std::vector<Unit>& units() const { return units_; }

 private:
  struct TextSource;
  bool next_text(RawDocument& doc);
  std::vector<Unit> units_;
  size_t next_unit_ = 0;
  std::unique_ptr<TextSource> text_;
  std::unique_ptr<class DocReader> docs_;
  RawDocument pending_;  // the text-format document being collected
  bool pending_open_ = false;
  uint64_t done_bytes_ = 0, total_bytes_ = 0;
};

}  // namespace pretrain
