#include "formats/doc_shards.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <ostream>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "common/utf8.h"
#include "formats/compressed_input.h"

namespace pretrain {

namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;      // JSON lines handed to zstd at a time
constexpr size_t kZstdJobBytes = size_t{4} << 20;    // fixed, so output is the same at any thread count
// Decompressed bytes per read: 64 KiB reads cost no measurable CPU more than 1 MiB ones, and a
// buffer this size is a small allocation, not a megabyte mapped per file (with the compressed
// window at 64 KiB too, the doc_shards fuzz target runs 2x as fast).
constexpr size_t kReadBytes = size_t{64} << 10;

void check_zstd(size_t rc, const std::string& path, const char* what) {
  if (ZSTD_isError(rc)) throw Error(Where{path}, cat(what, ": ", ZSTD_getErrorName(rc)));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

struct DocShardWriter::Shard {
  Shard(const std::string& path, uint64_t index) : file(path), index(index) {}
  AtomicFile file;
  Xxh3Stream hash;
  uint64_t index;
  uint64_t records = 0, jsonl_bytes = 0, compressed_bytes = 0;
};

std::string DocShardWriter::shard_name(const std::string& prefix, uint64_t index) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%05llu", static_cast<unsigned long long>(index));
  return cat(prefix, "-", digits, ".jsonl.zst");
}

DocShardWriter::DocShardWriter(std::string dir, DocShardOptions options)
    : dir_(std::move(dir)), options_(std::move(options)), next_index_(options_.first_shard_index) {
  if (options_.shard_bytes == 0) throw UsageError(Where{dir_}, "shard_bytes must be positive");
  if (options_.prefix.empty() || options_.prefix.find('/') != std::string::npos)
    throw UsageError(Where{dir_}, cat("expected a plain shard prefix, found '", options_.prefix, "'"));
  int level_min = ZSTD_minCLevel(), level_max = ZSTD_maxCLevel();
  if (options_.zstd_level < level_min || options_.zstd_level > level_max)
    throw UsageError(Where{dir_}, cat("expected a zstd level in ", level_min, "..", level_max, ", found ",
                                      options_.zstd_level));
  make_dirs(dir_);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) throw Error(Where{dir_}, "cannot create a zstd compression context");
  cctx_ = cctx;
  check_zstd(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, options_.zstd_level), dir_, "zstd level");
  check_zstd(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1), dir_, "zstd checksum flag");
  // Multi-threaded mode with a fixed job size cuts the input into the same jobs at any worker
  // count; only nbWorkers = 0 (single-threaded mode) would give different bytes. A libzstd built
  // without threads rejects nbWorkers >= 1, and then every run is single-threaded (also identical).
  int workers = std::max(1, options_.threads);
  if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_nbWorkers, workers))) {
    zstd_mt_ = false;
    log_warn("libzstd has no multi-threading; compressing document shards on one thread");
  } else {
    check_zstd(ZSTD_CCtx_setParameter(cctx, ZSTD_c_jobSize, static_cast<int>(kZstdJobBytes)), dir_,
               "zstd job size");
  }
  out_buffer_.resize(ZSTD_CStreamOutSize());
  pending_.reserve(kChunkBytes + (kChunkBytes >> 2));
}

DocShardWriter::~DocShardWriter() {
  shard_.reset();  // an unfinished shard: AtomicFile removes its temp file
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

bool DocShardWriter::single_threaded_fallback() const { return !zstd_mt_; }

void DocShardWriter::open_shard() {
  ZSTD_CCtx_reset(static_cast<ZSTD_CCtx*>(cctx_), ZSTD_reset_session_only);
  uint64_t index = next_index_++;
  shard_ = std::make_unique<Shard>(path_join(dir_, shard_name(options_.prefix, index)), index);
}

void DocShardWriter::compress(const char* data, size_t n, bool end) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  ZSTD_inBuffer in{data, n, 0};
  for (;;) {
    ZSTD_outBuffer out{out_buffer_.data(), out_buffer_.size(), 0};
    size_t remaining = ZSTD_compressStream2(cctx, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    check_zstd(remaining, shard_->file.tmp_path(), "zstd compression failed");
    if (out.pos) {
      shard_->file.write(out.dst, out.pos);
      shard_->hash.update(out.dst, out.pos);
      shard_->compressed_bytes += out.pos;
    }
    if (end ? remaining == 0 : in.pos == in.size) break;
  }
}

void DocShardWriter::flush_pending(bool end) {
  compress(pending_.data(), pending_.size(), end);
  pending_.clear();
}

void DocShardWriter::add(const Document& doc) {
  if (finished_) throw Error(Where{dir_}, "add() after finish()");
  size_t before = pending_.size();
  size_t replaced = append_doc_json_line(doc, pending_);
  add_pending_line(before, replaced);
}

void DocShardWriter::add_serialized(std::string_view line, uint64_t replaced) {
  if (finished_) throw Error(Where{dir_}, "add_serialized() after finish()");
  if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1)
    throw Error(Where{dir_}, "add_serialized(): expected one JSON line ending in a newline");
  size_t before = pending_.size();
  pending_.append(line);
  add_pending_line(before, replaced);
}

// The line at pending_[before..] is one document: it opens a new shard when it would take the
// current one past shard_bytes.
void DocShardWriter::add_pending_line(size_t before, uint64_t replaced) {
  size_t line_bytes = pending_.size() - before;
  if (shard_ && shard_->records > 0 && shard_->jsonl_bytes + line_bytes > options_.shard_bytes) {
    // The new line starts the next shard: compress what came before it and close this one.
    std::string line = pending_.substr(before);
    pending_.resize(before);
    close_shard();
    pending_ = std::move(line);
  }
  if (!shard_) open_shard();
  shard_->records += 1;
  shard_->jsonl_bytes += line_bytes;
  documents_ += 1;
  jsonl_bytes_ += line_bytes;
  invalid_utf8_replaced_ += replaced;
  if (pending_.size() >= kChunkBytes) flush_pending(false);
}

void DocShardWriter::close_shard() {
  if (!shard_) return;
  flush_pending(true);
  shard_->file.commit();
  shards_.push_back(ShardEntry{base_name(shard_->file.path()), shard_->records, shard_->compressed_bytes,
                               hex64(shard_->hash.digest()), {}});
  shard_.reset();
}

Manifest DocShardWriter::finish(Manifest base) {
  Manifest m = finish_manifest(std::move(base));
  m.write(path_join(dir_, kManifestName));
  return m;
}

Manifest DocShardWriter::finish_manifest(Manifest base) {
  if (finished_) throw Error(Where{dir_}, "finish() called twice");
  close_shard();
  finished_ = true;
  Manifest m = std::move(base);
  m.format = kFormatDocs;
  m.shards.insert(m.shards.end(), shards_.begin(), shards_.end());
  if (!m.stats.is_object()) m.stats = nlohmann::json::object();
  // A resumed run passes the earlier manifest as base: its byte and repair counts carry on.
  auto add_stat = [&](const char* key, uint64_t v) {
    uint64_t earlier = m.stats.contains(key) && m.stats[key].is_number_unsigned() ? json_integer<uint64_t>(m.stats[key]) : 0;
    m.stats[key] = earlier + v;
  };
  m.stats["documents"] = m.total_records();
  add_stat("jsonl_bytes", jsonl_bytes_);
  add_stat("invalid_utf8_replaced", invalid_utf8_replaced_);
  if (!m.extra.is_object()) m.extra = nlohmann::json::object();
  m.extra["docs"] = {{"prefix", options_.prefix},
                     {"shard_bytes", options_.shard_bytes},
                     {"zstd_level", options_.zstd_level}};
  return m;
}

namespace {

// Lines of any length from a byte source; a line inside the buffer is returned without a copy.
class LineReader {
 public:
  explicit LineReader(std::unique_ptr<ByteSource> source)
      : source_(std::move(source)), buf_(std::make_unique_for_overwrite<char[]>(kReadBytes)) {}
  uint64_t file_bytes_read() const { return source_->file_bytes_read(); }  // compressed, read ahead

  bool next(std::string_view& line) {
    bool carried = false;
    carry_.clear();
    for (;;) {
      if (pos_ == len_) {
        len_ = source_->read(buf_.get(), kReadBytes);
        pos_ = 0;
        if (len_ == 0) {
          if (!carried) return false;
          ++line_number_;
          line = carry_;
          return true;
        }
      }
      const char* start = buf_.get() + pos_;
      const char* newline = static_cast<const char*>(std::memchr(start, '\n', len_ - pos_));
      if (newline) {
        size_t n = static_cast<size_t>(newline - start);
        pos_ += n + 1;
        ++line_number_;
        if (carried) {
          carry_.append(start, n);
          line = carry_;
        } else {
          line = std::string_view(start, n);
        }
        return true;
      }
      carry_.append(start, len_ - pos_);
      carried = true;
      pos_ = len_;
    }
  }
  int64_t line_number() const { return line_number_; }

 private:
  std::unique_ptr<ByteSource> source_;
  std::unique_ptr<char[]> buf_;  // not zero-filled: a file shorter than it touches only what it reads
  size_t pos_ = 0, len_ = 0;
  std::string carry_;
  int64_t line_number_ = 0;
};

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// The value of name="…" in a <doc …> header. The title runs to the last '"' before the closing
// '>', so a title with a raw quote in it still reads whole.
std::string doc_attribute(std::string_view header, std::string_view name) {
  std::string key = cat(" ", name, "=\"");
  size_t start = header.find(key);
  if (start == std::string_view::npos) return {};
  start += key.size();
  size_t end = name == "title" ? header.rfind('"') : header.find('"', start);
  if (end == std::string_view::npos || end < start) return {};
  return std::string(header.substr(start, end - start));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reader

struct DocReader::Input {
  enum class Format { unknown, json, doc };
  std::string path, compression;
  std::unique_ptr<LineReader> lines;
  DocJsonLineReader json;
  Format format = Format::unknown;
  int64_t record_line = 0;
  uint64_t records = 0;
  int64_t expected_records = -1;
};

DocReader::DocReader(const std::string& input, DocReaderOptions options)
    : DocReader(std::vector<std::string>{input}, options) {}

DocReader::DocReader(const std::vector<std::string>& inputs, DocReaderOptions options) : options_(options) {
  for (const std::string& given : inputs) {
    // A manifest named directly stands for its directory.
    std::string input = base_name(given) == kManifestName ? dir_name(given) : given;
    if (input.empty()) input = ".";
    std::error_code ec;
    std::string manifest_path = path_join(input, kManifestName);
    if (std::filesystem::is_directory(input, ec) && file_exists(manifest_path)) {
      Manifest m = Manifest::read(manifest_path);
      if (m.format != kFormatDocs)
        throw Error(Where{manifest_path}, cat("expected format '", kFormatDocs, "', found '", m.format, "'"));
      if (!m.complete) log_warn(manifest_path, ": the run that wrote these shards did not finish");
      for (const ShardEntry& s : m.shards) {
        files_.push_back(path_join(input, s.file));
        expected_records_.push_back(static_cast<int64_t>(s.records));
        if (!options_.verify_checksums) continue;
        const std::string& path = files_.back();
        uint64_t size = file_size(path);
        if (size != s.bytes) throw Error(Where{path}, cat("expected ", s.bytes, " bytes (manifest), found ", size));
        std::string sum = hex64(xxh3_file(path));
        if (sum != s.xxh3) throw Error(Where{path}, cat("expected xxh3 ", s.xxh3, " (manifest), found ", sum));
      }
    } else {
      for (std::string& f : expand_inputs({input})) {
        files_.push_back(std::move(f));
        expected_records_.push_back(-1);
      }
    }
  }
}

DocReader::~DocReader() = default;

const std::string& DocReader::current_file() const {
  static const std::string kNone;
  return input_ ? input_->path : kNone;
}

int64_t DocReader::current_line() const { return input_ ? input_->record_line : 0; }

std::string DocReader::current_kind() const {
  if (!input_ || input_->format == Input::Format::unknown) return "";
  std::string kind = input_->format == Input::Format::json ? "jsonl" : "doc";
  return input_->compression.empty() ? kind : cat(kind, ".", input_->compression);
}

bool DocReader::open_next_file() {
  if (next_file_ == files_.size()) return false;
  auto input = std::make_unique<Input>();
  input->path = files_[next_file_];
  input->expected_records = expected_records_[next_file_];
  ++next_file_;
  input->lines = std::make_unique<LineReader>(open_byte_source(input->path, input->compression));
  input_ = std::move(input);
  return true;
}

void DocReader::finish_file() {
  if (input_->expected_records >= 0 && input_->records != static_cast<uint64_t>(input_->expected_records))
    throw Error(Where{input_->path}, cat("expected ", input_->expected_records, " documents (manifest), found ",
                                         input_->records));
}

// The current file, once it has given the documents its manifest counts: read to its end (only
// blank lines may remain) and closed, so that the files after it can be skipped. False when the
// current file is not such a file.
bool DocReader::finish_counted_file() {
  Input& in = *input_;
  if (in.expected_records < 0 || in.records != static_cast<uint64_t>(in.expected_records)) return false;
  for (std::string_view line; in.lines->next(line);)
    if (!is_blank(line))
      throw Error(Where::at_line(in.path, in.lines->line_number()),
                  cat("expected ", in.expected_records, " documents (manifest), found more"));
  done_bytes_ += in.lines->file_bytes_read();
  input_.reset();
  return true;
}

uint64_t DocReader::skip_files_before(uint64_t needed) {
  if (input_ && !finish_counted_file()) return 0;
  uint64_t skipped = 0;
  while (next_file_ < files_.size() && expected_records_[next_file_] > 0 &&
         documents_read_ + static_cast<uint64_t>(expected_records_[next_file_]) <= needed) {
    const auto n = static_cast<uint64_t>(expected_records_[next_file_]);
    documents_read_ += n, skipped += n;
    done_bytes_ += file_size(files_[next_file_++]);
    ++files_skipped_;
  }
  return skipped;
}

uint64_t DocReader::bytes_read() const {
  return done_bytes_ + (input_ ? input_->lines->file_bytes_read() : 0);
}

bool DocReader::next(Document& doc) {
  for (;;) {
    if (!input_ && !open_next_file()) return false;
    Input& in = *input_;
    std::string_view line;
    bool got = in.lines->next(line);
    if (!got) {
      finish_file();
      done_bytes_ += in.lines->file_bytes_read();
      input_.reset();
      continue;
    }
    if (in.lines->line_number() == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // BOM
    if (is_blank(line)) continue;
    in.record_line = in.lines->line_number();
    Where where = Where::at_line(in.path, in.record_line);
    if (in.format == Input::Format::unknown) {
      size_t first = line.find_first_not_of(" \t\r");
      if (line[first] == '{') in.format = Input::Format::json;
      else if (line[first] == '<') in.format = Input::Format::doc;
      else throw Error(where, "expected a JSON object ('{') or a wikiextractor <doc> block ('<')");
    }
    size_t replaced = 0;
    if (in.format == Input::Format::json) {
      replaced = in.json.read(line, doc, where);
    } else {
      // <doc id="…" url="…" title="…">, the title again, a blank line, the text, </doc>.
      size_t first = line.find_first_not_of(" \t");
      std::string_view header = line.substr(first);
      while (!header.empty() && (header.back() == '\r' || header.back() == ' ')) header.remove_suffix(1);
      if (header.substr(0, 5) != "<doc " || header.back() != '>')
        throw Error(where, "expected a <doc id=\"…\" url=\"…\" title=\"…\"> line");
      doc.id.clear(), doc.url.clear(), doc.title.clear(), doc.text.clear();
      replaced += append_repaired_utf8(doc_attribute(header, "id"), doc.id);
      replaced += append_repaired_utf8(doc_attribute(header, "url"), doc.url);
      replaced += append_repaired_utf8(doc_attribute(header, "title"), doc.title);
      bool first_line = true;
      for (;;) {
        if (!in.lines->next(line))
          throw Error(where, "expected </doc> closing this document, found the end of the file");
        if (line == "</doc>" || line == "</doc>\r") break;
        if (!first_line) doc.text.push_back('\n');
        first_line = false;
        replaced += append_repaired_utf8(line, doc.text);
      }
      std::string_view text = doc.text;
      if (text == doc.title) doc.text.clear();
      else if (text.starts_with(doc.title + "\n\n")) doc.text.erase(0, doc.title.size() + 2);
      else if (text.starts_with(doc.title + "\n")) doc.text.erase(0, doc.title.size() + 1);
    }
    invalid_utf8_replaced_ += replaced;
    ++in.records;
    ++documents_read_;
    return true;
  }
}

uint64_t count_doc_records(const std::string& path) {
  DocReader reader(path);
  Document doc;
  while (reader.next(doc)) {
  }
  return reader.documents_read();
}

namespace {

// The first `max_bytes` of text, cut at a character boundary, newlines shown as "\n".
std::string text_preview(const std::string& text, size_t max_bytes) {
  size_t n = std::min(text.size(), max_bytes);
  while (n > 0 && n < text.size() && (static_cast<uint8_t>(text[n]) & 0xC0) == 0x80) --n;
  std::string out;
  for (char c : std::string_view(text).substr(0, n)) {
    if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  if (n < text.size()) out += "…";
  return out;
}

}  // namespace

void inspect_docs(const std::string& path, std::ostream& out, int max_records) {
  DocReader reader(path);
  Document doc;
  std::vector<Document> first;
  std::string kind;
  uint64_t text_bytes = 0;
  while (reader.next(doc)) {
    if (kind.empty()) kind = reader.current_kind();
    text_bytes += doc.text.size();
    if (static_cast<int>(first.size()) < max_records) first.push_back(doc);
  }
  uint64_t disk_bytes = 0;
  for (const std::string& f : reader.files()) disk_bytes += file_size(f);
  out << path << "\n"
      << "  kind: documents (" << (kind.empty() ? "empty" : kind) << ")\n"
      << "  files: " << reader.files().size() << "\n"
      << "  documents: " << reader.documents_read() << "\n"
      << "  bytes: " << disk_bytes << " on disk, " << text_bytes << " of text\n";
  if (reader.invalid_utf8_replaced())
    out << "  invalid UTF-8 replaced: " << reader.invalid_utf8_replaced() << "\n";
  for (const Document& d : first)
    out << "  [" << d.id << "] " << d.title << " <" << d.url << ">\n    " << text_preview(d.text, 160) << "\n";
}

}  // namespace pretrain
