#include "formats/compressed_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "formats/bz2_parallel.h"

namespace pretrain {

namespace {

constexpr size_t kRawReadBytes = size_t{64} << 10;  // compressed bytes per read (see kReadBytes in doc_shards.cpp)
constexpr size_t kMaxOutBytes = size_t{1} << 30;     // zlib's avail_in and avail_out are 32-bit

class FileDescriptor {
 public:
  explicit FileDescriptor(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_errno("cannot open", path);
  }
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  size_t read(char* buf, size_t n) {
    for (;;) {
      ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) {
        consumed_ += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
      }
      if (errno != EINTR) throw_errno("read failed", path_);
    }
  }
  uint64_t consumed() const { return consumed_; }  // bytes read from the file so far
  // The first bytes of the file, without moving the read position.
  std::string peek(size_t n) const {
    std::string head(n, '\0');
    ssize_t got = ::pread(fd_, head.data(), n, 0);
    head.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return head;
  }

 private:
  std::string path_;
  int fd_;
  uint64_t consumed_ = 0;
};

// The compressed bytes not yet taken by a decoder: a window of the file that fill() moves on.
// Decoders take bytes with consume(), so offset() is always the file offset of the next byte a
// decoder has not used, which is what errors name.
class CompressedWindow {
 public:
  explicit CompressedWindow(FileDescriptor& file) : file_(file) {}

  const char* data() const { return buf_.bytes.get() + pos_; }
  size_t size() const { return buf_.size - pos_; }
  void consume(size_t n) { pos_ += n; }
  uint64_t offset() const { return base_ + pos_; }
  bool at_end() const { return size() == 0 && eof_; }  // known only once fill() met the end

  // Reads until at least `want` bytes are unused, or the file ends; returns how many are.
  size_t fill(size_t want = 1) {
    if (size() >= want || eof_) return size();
    if (pos_ > 0) {  // keep the unused bytes, drop the rest
      std::memmove(buf_.bytes.get(), data(), size());
      base_ += pos_;
      buf_.size -= pos_;
      pos_ = 0;
    }
    buf_.reserve(std::max(kRawReadBytes, want));
    while (buf_.size < want) {
      size_t got = file_.read(buf_.bytes.get() + buf_.size, buf_.capacity - buf_.size);
      if (got == 0) {
        eof_ = true;
        break;
      }
      buf_.size += got;
    }
    return size();
  }

 private:
  FileDescriptor& file_;
  ReadBuffer buf_;
  size_t pos_ = 0;
  uint64_t base_ = 0;  // file offset of buf_.bytes[0]
  bool eof_ = false;
};

// A source over one file, with the window its decoder reads from.
class FileByteSource : public ByteSource {
 public:
  explicit FileByteSource(const std::string& path) : path_(path), file_(path), in_(file_) {}
  uint64_t file_bytes_read() const override { return file_.consumed(); }

 protected:
  Where here() const { return Where::at_offset(path_, static_cast<int64_t>(in_.offset())); }

  std::string path_;
  FileDescriptor file_;
  CompressedWindow in_;
};

class PlainSource : public FileByteSource {
 public:
  using FileByteSource::FileByteSource;
  size_t read(char* buf, size_t n) override { return file_.read(buf, n); }
};

class ZstdSource : public FileByteSource {
 public:
  explicit ZstdSource(const std::string& path) : FileByteSource(path), dctx_(ZSTD_createDCtx()) {
    if (!dctx_) throw Error(Where{path}, "cannot create a zstd decompression context");
  }
  ~ZstdSource() override { ZSTD_freeDCtx(dctx_); }

  size_t read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (n > 0) {
      if (in_.size() == 0) in_.fill();
      ZSTD_inBuffer zin{in_.data(), in_.size(), 0};
      size_t rc = ZSTD_decompressStream(dctx_, &out, &zin);
      in_.consume(zin.pos);
      if (ZSTD_isError(rc)) throw Error(here(), cat("corrupt zstd stream: ", ZSTD_getErrorName(rc)));
      // rc == 0: a frame is complete and flushed. With no progress, rc is only a size hint.
      if (zin.pos > 0 || out.pos > 0) frame_open_ = rc != 0;
      if (out.pos > 0) return out.pos;
      if (in_.at_end()) {
        if (frame_open_) throw Error(here(), "truncated zstd stream: the file ends inside a frame");
        return 0;
      }
    }
    return 0;
  }

 private:
  ZSTD_DCtx* dctx_;
  bool frame_open_ = false;
};

// bz2, single or multi-stream (pbzip2, wikiextractor --compress): Bz2Reader's stages run on the
// caller's thread, so the serial and the block-parallel reader are one decoder and agree on every
// byte and every error.
class Bz2Source : public ByteSource {
 public:
  explicit Bz2Source(const std::string& path) : reader_(path, {.threads = 1, .read_size = kRawReadBytes}) {}
  uint64_t file_bytes_read() const override { return reader_.compressed_consumed(); }

  size_t read(char* buf, size_t n) override {
    size_t got = 0;
    while (got < n) {
      if (!piece_ || pos_ == piece_->bytes().size()) {
        if (got > 0) break;  // the bytes before a piece's error go out first
        if (piece_) piece_->check();
        if (done_ || !(piece_ = reader_.next_piece())) {
          done_ = true;
          break;
        }
        pos_ = 0;
        continue;
      }
      std::string_view bytes = piece_->bytes().substr(pos_, n - got);
      std::memcpy(buf + got, bytes.data(), bytes.size());
      got += bytes.size();
      pos_ += bytes.size();
    }
    return got;
  }

 private:
  Bz2Reader reader_;
  std::shared_ptr<Bz2Piece> piece_;  // the piece being read out, from pos_
  size_t pos_ = 0;
  bool done_ = false;
};

// gzip, single or multi-member (concatenated .gz files, pigz, bgzip): members are decoded one
// after another, as gzip -d does.
class GzipSource : public FileByteSource {
 public:
  explicit GzipSource(const std::string& path) : FileByteSource(path) {
    if (inflateInit2(&strm_, 16 + MAX_WBITS) != Z_OK)  // 16: a gzip wrapper, not zlib's
      throw Error(Where{path}, "cannot start a gzip decoder");
  }
  ~GzipSource() override { inflateEnd(&strm_); }

  size_t read(char* buf, size_t n) override {
    n = std::min(n, kMaxOutBytes);
    strm_.next_out = reinterpret_cast<Bytef*>(buf);
    strm_.avail_out = static_cast<uInt>(n);
    while (strm_.avail_out > 0 && !done_) {
      if (member_ended_ && !start_next_member()) break;
      if (in_.size() == 0) in_.fill();
      strm_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in_.data()));
      strm_.avail_in = static_cast<uInt>(std::min(in_.size(), kMaxOutBytes));
      uInt in_before = strm_.avail_in, out_before = strm_.avail_out;
      int rc = inflate(&strm_, Z_NO_FLUSH);
      in_.consume(in_before - strm_.avail_in);
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Error(here(), cat("corrupt gzip stream: ", strm_.msg ? strm_.msg : zError(rc)));
      } else if (strm_.avail_out > 0 && in_.at_end()) {
        throw Error(here(), "truncated gzip stream: the file ends inside a member");
      } else if (strm_.avail_in == in_before && strm_.avail_out == out_before && in_.size() > 0) {
        throw Error(here(), "corrupt gzip stream: the decoder makes no progress");
      }
    }
    return n - strm_.avail_out;
  }

 private:
  // After a member: true when another one follows (the decoder is reset for it); false at the
  // end of the file or before trailing garbage.
  bool start_next_member() {
    size_t have = in_.fill(2);
    if (have == 0) {
      done_ = true;
      return false;
    }
    const auto* b = reinterpret_cast<const uint8_t*>(in_.data());
    if (have >= 2 && b[0] == 0x1F && b[1] == 0x8B) {
      inflateReset(&strm_);
      member_ended_ = false;
      return true;
    }
    if (have == 1 && b[0] == 0x1F) throw Error(here(), "truncated gzip stream: the file ends inside a member header");
    log_warn(path_, ": trailing garbage after the last gzip member at byte ", in_.offset(), " ignored (as gzip -d does)");
    done_ = true;
    return false;
  }

  z_stream strm_{};
  bool member_ended_ = false, done_ = false;
};

}  // namespace

std::unique_ptr<ByteSource> open_byte_source(const std::string& path, std::string& compression) {
  std::string head = FileDescriptor(path).peek(4);
  if (head == std::string("\x28\xB5\x2F\xFD", 4)) {
    compression = "zst";
    return std::make_unique<ZstdSource>(path);
  }
  if (head.size() >= 4 && head.compare(0, 3, "BZh") == 0 && head[3] >= '1' && head[3] <= '9') {
    compression = "bz2";
    return std::make_unique<Bz2Source>(path);
  }
  if (head.size() >= 2 && head.compare(0, 2, "\x1F\x8B") == 0) {
    compression = "gz";
    return std::make_unique<GzipSource>(path);
  }
  compression = "";
  return std::make_unique<PlainSource>(path);
}

}  // namespace pretrain
