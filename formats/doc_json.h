// One document as one JSON line, the record of document shards (docs/architecture.md, "Documents") and of
// wikiextractor's `--json` output: {"id":…,"url":…,"title":…,"text":…}. Writing escapes by hand
// (fast, and the bytes of written shards are fixed); reading goes through nlohmann-json's SAX
// parser, after a pre-pass that repairs what nlohmann would refuse but we accept and takes the
// long strings that need only decoding past nlohmann's byte-by-byte lexer (doc_json.cpp, prepare).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace pretrain {

struct Document {
  std::string id, url, title;
  std::string text;  // paragraphs separated by '\n'
  bool operator==(const Document&) const = default;
};

// Appends the JSON line of doc ({"id":…,"url":…,"title":…,"text":…}\n) to out: control characters
// escaped, non-ASCII written as raw UTF-8, invalid UTF-8 replaced. Returns the replacements made.
size_t append_doc_json_line(const Document& doc, std::string& out);

// Reads JSON lines into documents; one per input file, so that its buffers serve every line.
// Strict JSON (RFC 8259) except that invalid UTF-8 and \u escapes of lone surrogates become U+FFFD
// and are counted. The top-level string fields id, url, title and text are kept (`text` is
// required, the others default to ""; of a repeated field the last wins); other fields may hold
// any JSON value nested at most kMaxDepth deep and are skipped.
class DocJsonLineReader {
 public:
  static constexpr int kMaxDepth = 64;  // objects and arrays, the line's own object included

  // Parses `line` (without its '\n') into doc and returns the replacements made. Throws
  // Error(where, "… (column N)") for a line that is not such an object.
  size_t read(std::string_view line, Document& doc, const Where& where);

 private:
  struct Shift {  // a change in parsed_ that moved what follows it
    size_t parsed_end, original_end;
  };
  size_t prepare(std::string_view line);
  int64_t original_column(size_t parsed_offset) const;

  std::string parsed_;  // the line as nlohmann parses it, when it differs from the line as read
  bool rewritten_ = false;
  std::vector<Shift> shifts_;
  std::vector<size_t> elided_;          // long strings parsed as "": their index among the literals
  std::vector<std::string> decoded_;    // and their values (buffers kept from line to line)
};

}  // namespace pretrain
