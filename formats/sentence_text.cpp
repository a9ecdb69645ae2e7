#include "formats/sentence_text.h"

#include <cstring>

#include "common/utf8.h"
#include "formats/compressed_input.h"

namespace pretrain {

namespace {
constexpr size_t kReadBytes = size_t{64} << 10;  // decoded bytes per read, as DocReader reads (doc_shards.cpp)
}  // namespace

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

bool is_sentence_text_name(std::string_view path) {
  for (std::string_view suffix : {".txt", ".txt.gz", ".txt.zst", ".txt.bz2"})
    if (path.ends_with(suffix)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Reader

SentenceTextReader::SentenceTextReader(std::string path)
    : path_(std::move(path)), source_(open_byte_source(path_, compression_)), buf_(kReadBytes) {}

SentenceTextReader::~SentenceTextReader() = default;

uint64_t SentenceTextReader::file_bytes_read() const { return source_->file_bytes_read(); }

bool SentenceTextReader::next_line(std::string& line) {
  line.clear();
  bool started = false;  // bytes of this line (or its terminator) were seen
  for (;;) {
    if (pos_ == len_) {
      len_ = source_->read(buf_.data(), buf_.size());
      pos_ = 0;
      if (len_ == 0) {
        if (!started) return false;
        ++line_number_;
        return true;
      }
    }
    if (after_cr_) {
      after_cr_ = false;
      if (buf_[pos_] == '\n') {  // "\r\n" is one terminator
        ++pos_;
        continue;
      }
    }
    started = true;
    const char* start = buf_.data() + pos_;
    const char* end = buf_.data() + len_;
    const char* newline = static_cast<const char*>(std::memchr(start, '\n', static_cast<size_t>(end - start)));
    const char* stop = newline ? newline : end;
    if (const void* cr = std::memchr(start, '\r', static_cast<size_t>(stop - start))) stop = static_cast<const char*>(cr);
    line.append(start, stop);
    if (stop == end) {  // the line goes on in the next read
      pos_ = len_;
      continue;
    }
    after_cr_ = *stop == '\r';
    pos_ = static_cast<size_t>(stop - buf_.data()) + 1;
    ++line_number_;
    return true;
  }
}

bool SentenceTextReader::next_sentence(std::string_view& sentence) {
  if (!next_line(line_)) return false;
  repair_utf8(line_);
  sentence = python_strip(line_);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Writer

SentenceTextWriter::SentenceTextWriter(std::string path) : file_(std::move(path)) {}

void SentenceTextWriter::add_document(std::string_view lines) {
  file_.write(lines);
  file_.write("\n", 1);
  hash_.update(lines.data(), lines.size());
  hash_.update("\n", 1);
  ++documents_;
}

}  // namespace pretrain
