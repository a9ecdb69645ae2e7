#include "datagen/shards/text_documents.h"

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "common/utf8.h"
#include "formats/doc_shards.h"

namespace pretrain {

bool python_isspace(char32_t c) {
  // CPython's _PyUnicode_IsWhitespace: bidirectional types WS, B, S and category Zs.
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
    case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string_view python_strip(std::string_view s) {
  // Leading: decode forwards. Trailing: step back to each code point's first byte.
  auto is_space_at = [&](size_t i, size_t* len) {
    Utf8Step st = decode_utf8(reinterpret_cast<const uint8_t*>(s.data()) + i,
                              reinterpret_cast<const uint8_t*>(s.data()) + s.size());
    *len = st.length;
    return st.valid && python_isspace(st.code_point);
  };
  size_t begin = 0, len = 0;
  while (begin < s.size() && is_space_at(begin, &len)) begin += len;
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    if (!is_space_at(start, &len) || start + len != end) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

// One text-format file, read line by line with universal newlines.
struct TextDocumentReader::TextSource {
  std::string path;
  std::FILE* f = nullptr;
  int64_t line = 0;
  std::vector<std::string> queued;  // lines split out of one '\n'-terminated chunk at '\r'
  size_t queued_next = 0;
  uint64_t bytes = 0;

  explicit TextSource(std::string p) : path(std::move(p)) {
    f = std::fopen(path.c_str(), "rb");
    if (!f) throw_errno("cannot open", path);
  }
  ~TextSource() {
    if (f) std::fclose(f);
  }
  // Next line without its terminator; false at the end of the file.
  bool next_line(std::string& out) {
    if (queued_next < queued.size()) {
      out = std::move(queued[queued_next++]);
      ++line;
      return true;
    }
    queued.clear();
    queued_next = 0;
    std::string chunk;
    int c;
    bool any = false;
    while ((c = getc_unlocked(f)) != EOF) {  // one reader per file: no stdio lock per byte
      any = true;
      ++bytes;
      if (c == '\n') break;
      chunk.push_back(static_cast<char>(c));
    }
    if (std::ferror(f)) throw_errno("cannot read", path);
    if (!any) return false;
    // "\r" ends a line too; "\r\n" ends one line, so a '\r' just before the '\n' adds nothing.
    size_t start = 0;
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (chunk[i] != '\r') continue;
      queued.push_back(chunk.substr(start, i - start));
      start = i + 1;
    }
    if (start < chunk.size() || chunk.empty() || chunk.back() != '\r') queued.push_back(chunk.substr(start));
    return next_line(out);
  }
};

TextDocumentReader::TextDocumentReader(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  auto add_file = [&](const std::string& file) {
    const bool text = file.size() >= 4 && file.compare(file.size() - 4, 4, ".txt") == 0;
    units_.push_back({text, file});
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
  return done_bytes_ + (text_ ? text_->bytes : 0) + (docs_ ? docs_->bytes_read() : 0);
}
uint64_t TextDocumentReader::total_bytes() const { return total_bytes_; }

bool TextDocumentReader::next_text(RawDocument& doc) {
  std::string line;
  while (text_->next_line(line)) {
    repair_utf8(line);
    std::string_view stripped = python_strip(line);
    if (!pending_open_) {
      pending_ = RawDocument{};
      pending_.presplit = true;
      pending_.source = cat(text_->path, ":", text_->line);
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
    if (text_ && next_text(doc)) return true;
    if (docs_) {
      Document d;
      if (docs_->next(d)) {
        doc = RawDocument{};
        doc.text = std::move(d.text);
        doc.source = cat(docs_->current_file(), ":", docs_->current_line());
        return true;
      }
    }
    // The current unit is done: move to the next one.
    if (text_) done_bytes_ += text_->bytes;
    text_.reset();
    if (docs_) {
      for (const auto& f : docs_->files()) done_bytes_ += file_size(f);
      docs_.reset();
    }
    if (next_unit_ == units_.size() || !units_[next_unit_].text_format) {
      // A text document still open ends here (end of input, or documents of the other kind follow).
      if (pending_open_) {
        pending_open_ = false;
        doc = std::move(pending_);
        return true;
      }
    }
    if (next_unit_ == units_.size()) return false;
    const Unit& u = units_[next_unit_++];
    if (u.text_format)
      text_ = std::make_unique<TextSource>(u.path);
    else
      docs_ = std::make_unique<DocReader>(u.path);
  }
}

}  // namespace pretrain
