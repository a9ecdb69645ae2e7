// The documents make-pretraining-shards reads, in one stream from two kinds of input:
//
//  - Google BERT's text format (`*.txt`, optionally `.gz`/`.zst`/`.bz2` compressed, or a directory
//    whose manifest says wikiprep's "sentences-txt"): one sentence per line, blank lines between
//    documents, read by SentenceTextReader (formats/sentence_text.h) as Python reads it, so
//    documents split exactly where create_pretraining_data.py splits them.
//  - Our document shards and everything else DocReader reads (JSON lines, wikiextractor output):
//    each document's text, whose lines are split into sentences later (ICU, as wikiprep does),
//    on the worker that tokenizes it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pretrain {

struct RawDocument {
  bool presplit = false;               // lines are already sentences (text format)
  std::vector<std::string> sentences;  // presplit: the document's non-blank lines, stripped
  std::string text;                    // otherwise: the text, paragraphs separated by '\n'
  std::string source;                  // "file:line" of the document's start, for messages
};

class TextDocumentReader {
 public:
  explicit TextDocumentReader(const std::vector<std::string>& inputs);
  ~TextDocumentReader();
  // The next document, possibly without sentences (the caller drops those, as the Python code
  // does). False at the end of the last input. Throws Error naming the file and line or offset.
  bool next(RawDocument& doc);
  // Skips whole document files (a document-shard directory's, whose manifest counts them) whose
  // documents all come before input document `needed` (counting every document next() returned
  // or this skipped), without decoding them: DocReader::skip_files_before. Returns the documents
  // skipped; next() goes on after them.
  uint64_t skip_files_before(uint64_t needed);
  uint64_t files_skipped() const;
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
  bool next_text(RawDocument& doc);
  std::vector<Unit> units_;
  size_t next_unit_ = 0;
  std::unique_ptr<class SentenceTextReader> text_;
  std::unique_ptr<class DocReader> docs_;
  RawDocument pending_;  // the text-format document being collected
  bool pending_open_ = false;
  uint64_t done_bytes_ = 0, total_bytes_ = 0;
  uint64_t documents_ = 0;      // returned by next() or skipped
  uint64_t files_skipped_ = 0;  // by the units done
};

}  // namespace pretrain
