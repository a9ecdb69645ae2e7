// The documents make-pretraining-shards reads, in one stream from two kinds of input:
//
//  - Google BERT's text format (`*.txt`, optionally `.gz`/`.zst`/`.bz2` compressed, or a directory
//    whose manifest says wikiprep's "sentences-txt"): one sentence per line, blank lines between
//    documents, read by SentenceTextReader (formats/sentence_text.h) as Python reads it, so
//    documents split exactly where create_pretraining_data.py splits them.
//  - Our document shards and everything else DocReader reads (JSON lines, wikiextractor output):
//    each document's text, whose lines are split into sentences later (ICU, as wikiprep does),
//    on the worker that tokenizes it.
//
// A reader can also be given a piece of the input (input_pieces.h): the documents that begin in
// [begin, end), found without decoding what comes before: whole files a manifest counts are
// skipped undecoded, a document that runs on from the text-format file before the piece is read
// by that file's piece, not this one.
#pragma once
#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/manifest.h"

namespace pretrain {

struct RawDocument {
  bool presplit = false;               // lines are already sentences (text format)
  std::vector<std::string> sentences;  // presplit: the document's non-blank lines, stripped
  std::string text;                    // otherwise: the text, paragraphs separated by '\n'
  std::string source;                  // "file:line" of the document's start, for messages
};

// Where a document begins in the input: unit `unit` (TextDocumentReader::units()), its
// `document`-th document, counted across a document-shard directory's files in manifest order.
// Only a counted unit is cut inside (its manifest says where each file's documents begin); other
// units begin a piece only at their start (document 0).
struct InputPosition {
  uint64_t unit = 0, document = 0;
  friend auto operator<=>(const InputPosition&, const InputPosition&) = default;
};

class TextDocumentReader {
 public:
  explicit TextDocumentReader(const std::vector<std::string>& inputs);
  ~TextDocumentReader();
  // From now on only the documents that begin in [begin, end) (call before the first next()).
  void set_range(InputPosition begin, InputPosition end);
  // The next document, possibly without sentences (the caller drops those, as the Python code
  // does). False at the end of the last input (or of the range). Throws Error naming the file and
  // line or offset.
  bool next(RawDocument& doc);
  // Skips whole document files (a document-shard directory's, whose manifest counts them) whose
  // documents all come before input document `needed` (counting every document next() returned
  // or this skipped, from the range's start), without decoding them: DocReader::skip_files_before.
  // Returns the documents skipped; next() goes on after them.
  uint64_t skip_files_before(uint64_t needed);
  uint64_t files_skipped() const;
  uint64_t bytes_read() const;    // input bytes consumed so far (for progress)
  uint64_t total_bytes() const;   // sum of the input files' sizes (of the range's units, with a range)

  // The inputs in reading order; text-format units hold a text file, the others a path DocReader
  // reads (a file, or a directory with a manifest, whose shards are `shards`). A document of the
  // text format continues from one text file into the next unless a blank line ends it, as in the
  // Python script.
  struct Unit {
    bool text_format = false;
    std::string path;
    uint64_t bytes = 0;               // of its file(s)
    bool counted = false;             // a document-shard directory: its manifest counts each file
    std::vector<ShardEntry> shards;   // counted: the files, their sizes, checksums and documents
  };
  const std::vector<Unit>& units() const { return units_; }

 private:
  bool next_text(RawDocument& doc);
  bool open_next_unit();
  void start_range();
  std::vector<Unit> units_;
  size_t next_unit_ = 0;
  std::unique_ptr<class SentenceTextReader> text_;
  std::unique_ptr<class DocReader> docs_;
  RawDocument pending_;  // the text-format document being collected
  bool pending_open_ = false;
  uint64_t done_bytes_ = 0, total_bytes_ = 0;
  uint64_t documents_ = 0;      // returned by next() or skipped, from the range's start
  uint64_t files_skipped_ = 0;  // by the units done
  // The range: begin, end; started once the reader stands at begin.
  InputPosition begin_, end_{~uint64_t{0}, 0};
  bool ranged_ = false, started_ = false;
  bool dropping_ = false;  // the text document open at the range's start is the piece before's
  bool ending_ = false;    // past the range's end: only the text document still open is read
  bool finished_ = false;
};

}  // namespace pretrain
