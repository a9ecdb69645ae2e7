#include "datagen/shards/text_documents.h"

#include <filesystem>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/doc_shards.h"
#include "formats/sentence_text.h"

namespace pretrain {

TextDocumentReader::TextDocumentReader(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  auto add_file = [&](const std::string& file) {
    units_.push_back({is_sentence_text_name(file), file});
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const std::string manifest = path_join(input, "manifest.json");
    if (fs::is_directory(input, ec) && fs::exists(manifest, ec)) {
      Manifest m = Manifest::read(manifest);
      if (m.format == kFormatSentences) {
        for (const auto& shard : m.shards) units_.push_back({true, path_join(input, shard.file)});
      } else {
        units_.push_back({false, input});  // DocReader checks the manifest's shards itself
      }
      continue;
    }
    for (const std::string& file : expand_inputs({input})) add_file(file);
  }
  for (const auto& u : units_) {
    std::error_code ec;
    if (fs::is_directory(u.path, ec)) {
      for (const auto& f : expand_inputs({u.path})) total_bytes_ += file_size(f);
    } else {
      total_bytes_ += file_size(u.path);
    }
  }
}

TextDocumentReader::~TextDocumentReader() = default;

uint64_t TextDocumentReader::bytes_read() const {
  return done_bytes_ + (text_ ? text_->file_bytes_read() : 0) + (docs_ ? docs_->bytes_read() : 0);
}
uint64_t TextDocumentReader::total_bytes() const { return total_bytes_; }

bool TextDocumentReader::next_text(RawDocument& doc) {
  std::string_view stripped;
  while (text_->next_sentence(stripped)) {
    if (!pending_open_) {
      pending_ = RawDocument{};
      pending_.presplit = true;
      pending_.source = cat(text_->path(), ":", text_->line_number());
      pending_open_ = true;
    }
    if (stripped.empty()) {  // a blank line ends the document
      doc = std::move(pending_);
      pending_open_ = false;
      return true;
    }
    pending_.sentences.emplace_back(stripped);
  }
  return false;
}

bool TextDocumentReader::next(RawDocument& doc) {
  for (;;) {
    if (text_ && next_text(doc)) return ++documents_, true;
    if (docs_) {
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
      for (const auto& f : docs_->files()) done_bytes_ += file_size(f);
      files_skipped_ += docs_->files_skipped();
      docs_.reset();
    }
    if (next_unit_ == units_.size() || !units_[next_unit_].text_format) {
      // A text document still open ends here (end of input, or documents of the other kind follow).
      if (pending_open_) {
        pending_open_ = false;
        doc = std::move(pending_);
        return ++documents_, true;
      }
    }
    if (next_unit_ == units_.size()) return false;
    const Unit& u = units_[next_unit_++];
    if (u.text_format)
      text_ = std::make_unique<SentenceTextReader>(u.path);
    else
      docs_ = std::make_unique<DocReader>(u.path);
  }
}

uint64_t TextDocumentReader::files_skipped() const {
  return files_skipped_ + (docs_ ? docs_->files_skipped() : 0);
}

uint64_t TextDocumentReader::skip_files_before(uint64_t needed) {
  // Between units (at the start): the next unit, when of documents, begins here, so that its
  // first files too can be skipped.
  if (!text_ && !docs_ && !pending_open_ && next_unit_ < units_.size() && !units_[next_unit_].text_format)
    docs_ = std::make_unique<DocReader>(units_[next_unit_++].path);
  if (!docs_ || needed <= documents_) return 0;
  const uint64_t skipped = docs_->skip_files_before(docs_->documents_read() + (needed - documents_));
  documents_ += skipped;
  return skipped;
}

}  // namespace pretrain
