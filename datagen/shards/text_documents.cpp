#include "datagen/shards/text_documents.h"

#include <filesystem>

#include "common/error.h"
#include "common/file.h"
#include "formats/doc_shards.h"
#include "formats/sentence_text.h"

namespace pretrain {

TextDocumentReader::TextDocumentReader(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  auto add_file = [&](const std::string& file) {
    units_.push_back({.text_format = is_sentence_text_name(file), .path = file, .bytes = file_size(file)});
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const std::string manifest = path_join(input, "manifest.json");
    if (fs::is_directory(input, ec) && fs::exists(manifest, ec)) {
      Manifest m = Manifest::read(manifest);
      if (m.format == kFormatSentences) {
        for (const auto& shard : m.shards) add_file(path_join(input, shard.file));
      } else {
        // DocReader checks the format and the shards itself; a docs manifest counts each file's documents.
        Unit u{.path = input, .counted = m.format == kFormatDocs};
        if (u.counted) u.shards = m.shards;
        for (const auto& shard : m.shards) u.bytes += shard.bytes;
        units_.push_back(std::move(u));
      }
      continue;
    }
    for (const std::string& file : expand_inputs({input})) add_file(file);
  }
  for (const auto& u : units_) total_bytes_ += u.bytes;
}

TextDocumentReader::~TextDocumentReader() = default;

void TextDocumentReader::set_range(InputPosition begin, InputPosition end) {
  if (started_ || text_ || docs_ || next_unit_ > 0) throw Error("internal: a reader's range is set before it reads");
  begin_ = begin, end_ = end;
  ranged_ = true;
  total_bytes_ = 0;
  for (uint64_t u = begin.unit; u < units_.size() && InputPosition{u, 0} < end; ++u) total_bytes_ += units_[u].bytes;
}

uint64_t TextDocumentReader::bytes_read() const {
  return done_bytes_ + (text_ ? text_->file_bytes_read() : 0) + (docs_ ? docs_->bytes_read() : 0);
}
uint64_t TextDocumentReader::total_bytes() const { return total_bytes_; }

namespace {

// Whether a text-format document is open where unit `u` begins: the last line of the text files
// right before it (empty ones passed over) is not blank. Reads those lines, undecoded otherwise.
bool text_runs_into(const std::vector<TextDocumentReader::Unit>& units, uint64_t u) {
  while (u-- > 0 && units[u].text_format) {
    SentenceTextReader lines(units[u].path);
    std::string_view line;
    bool any = false, blank = false;
    while (lines.next_sentence(line)) any = true, blank = line.empty();
    if (any) return !blank;
  }
  return false;
}

}  // namespace

void TextDocumentReader::start_range() {
  started_ = true;
  if (!ranged_) return;
  next_unit_ = size_t(std::min<uint64_t>(begin_.unit, units_.size()));
  if (next_unit_ == units_.size()) return;
  if (units_[next_unit_].text_format) {
    if (begin_.document != 0) throw Error(cat("internal: a piece begins inside text file ", units_[next_unit_].path));
    if (text_runs_into(units_, next_unit_)) pending_open_ = dropping_ = true;  // the piece before's document
    return;
  }
  if (begin_.document == 0) return;
  if (!units_[next_unit_].counted) throw Error(cat("internal: a piece begins inside ", units_[next_unit_].path));
  open_next_unit();
  docs_->skip_files_before(begin_.document);
  for (Document d; docs_->documents_read() < begin_.document;)
    if (!docs_->next(d))
      throw Error(Where{units_[next_unit_ - 1].path}, cat("expected at least ", begin_.document, " documents (manifest), found ",
                                                          docs_->documents_read()));
}

bool TextDocumentReader::open_next_unit() {
  const Unit& u = units_[next_unit_++];
  if (u.text_format) {
    text_ = std::make_unique<SentenceTextReader>(u.path);
    return true;
  }
  if (!u.counted) {
    docs_ = std::make_unique<DocReader>(u.path);
    return true;
  }
  // The shards this reader will decode are checked against the manifest (size, xxh3) first; the
  // others are not read at all.
  const uint64_t unit = next_unit_ - 1;
  const uint64_t lo = ranged_ && unit == begin_.unit ? begin_.document : 0;
  const uint64_t hi = ranged_ && unit == end_.unit ? end_.document : ~uint64_t{0};
  Manifest mine;
  mine.format = kFormatDocs;
  mine.complete = true;
  uint64_t first = 0;
  for (const ShardEntry& s : u.shards) {
    const bool decoded = s.records > 0 ? first + s.records > lo : first >= lo;
    if (decoded && first < hi) mine.shards.push_back(s);
    first += s.records;
  }
  for (const VerifyProblem& p : verify_manifest(mine, u.path)) throw Error(Where{path_join(u.path, p.file)}, p.message);
  docs_ = std::make_unique<DocReader>(u.path, DocReaderOptions{.verify_checksums = false});
  return true;
}

bool TextDocumentReader::next_text(RawDocument& doc) {
  std::string_view stripped;
  while (text_->next_sentence(stripped)) {
    if (!pending_open_) {
      if (ending_) return finished_ = true, false;  // a document that begins past the range's end
      pending_ = RawDocument{};
      pending_.presplit = true;
      pending_.source = cat(text_->path(), ":", text_->line_number());
      pending_open_ = true;
    }
    if (stripped.empty()) {  // a blank line ends the document
      pending_open_ = false;
      if (dropping_) {
        dropping_ = false;
        continue;
      }
      doc = std::move(pending_);
      return true;
    }
    if (!dropping_) pending_.sentences.emplace_back(stripped);
  }
  return false;
}

bool TextDocumentReader::next(RawDocument& doc) {
  if (!started_) start_range();
  for (;;) {
    if (finished_) return false;
    if (text_ && next_text(doc)) return ++documents_, true;
    if (finished_) return false;
    if (docs_) {
      if (ranged_ && next_unit_ - 1 == end_.unit && end_.document > 0 && docs_->documents_read() >= end_.document)
        return finished_ = true, false;
      Document d;
      if (docs_->next(d)) {
        doc = RawDocument{};
        doc.text = std::move(d.text);
        doc.source = cat(docs_->current_file(), ":", docs_->current_line());
        return ++documents_, true;
      }
    }
    // The current unit is done: move to the next one.
    if (text_) done_bytes_ += text_->file_bytes_read();
    text_.reset();
    if (docs_) {
      done_bytes_ += docs_->bytes_read();
      files_skipped_ += docs_->files_skipped();
      docs_.reset();
    }
    if (next_unit_ == units_.size() || !units_[next_unit_].text_format) {
      // A text document still open ends here (end of input, or documents of the other kind follow).
      if (pending_open_) {
        pending_open_ = false;
        if (dropping_) {
          dropping_ = false;
        } else {
          doc = std::move(pending_);
          return ++documents_, true;
        }
      }
    }
    if (next_unit_ == units_.size()) return finished_ = true, false;
    if (ranged_ && InputPosition{next_unit_, 0} >= end_) {
      // Past the range's end only a text document begun inside it is read on, to its end.
      if (!pending_open_ || dropping_ || !units_[next_unit_].text_format) return finished_ = true, false;
      ending_ = true;
    }
    open_next_unit();
  }
}

uint64_t TextDocumentReader::files_skipped() const {
  return files_skipped_ + (docs_ ? docs_->files_skipped() : 0);
}

uint64_t TextDocumentReader::skip_files_before(uint64_t needed) {
  if (!started_) start_range();
  // Between units (at the start): the next unit, when of documents, begins here, so that its
  // first files too can be skipped.
  if (!text_ && !docs_ && !pending_open_ && next_unit_ < units_.size() && !units_[next_unit_].text_format &&
      !(ranged_ && InputPosition{next_unit_, 0} >= end_))
    open_next_unit();
  if (!docs_ || needed <= documents_) return 0;
  const uint64_t skipped = docs_->skip_files_before(docs_->documents_read() + (needed - documents_));
  documents_ += skipped;
  return skipped;
}

}  // namespace pretrain
