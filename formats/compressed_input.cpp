#include "formats/compressed_input.h"

#include <bzlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/error.h"

namespace pretrain {

namespace {

constexpr size_t kRawReadBytes = size_t{256} << 10;  // compressed bytes per read

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

// A source over one file: reads it in compressed chunks (raw_) for the decoders.
class FileByteSource : public ByteSource {
 public:
  explicit FileByteSource(const std::string& path) : path_(path), file_(path) {}
  uint64_t file_bytes_read() const override { return file_.consumed(); }

 protected:
  // Next compressed chunk into raw_; false at the end of the file.
  bool refill() {
    raw_.resize(kRawReadBytes);
    size_t got = file_.read(raw_.data(), raw_.size());
    raw_offset_ += raw_len_;
    raw_len_ = got;
    return got > 0;
  }
  std::string path_;
  FileDescriptor file_;
  std::vector<char> raw_;
  size_t raw_len_ = 0;
  uint64_t raw_offset_ = 0;  // file offset of raw_[0]
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
    for (;;) {
      if (in_.pos == in_.size && !eof_) {
        eof_ = !refill();
        in_ = ZSTD_inBuffer{raw_.data(), raw_len_, 0};
      }
      size_t in_before = in_.pos;
      size_t rc = ZSTD_decompressStream(dctx_, &out, &in_);
      if (ZSTD_isError(rc))
        throw Error(Where::at_offset(path_, static_cast<int64_t>(raw_offset_ + in_.pos)),
                    cat("corrupt zstd stream: ", ZSTD_getErrorName(rc)));
      // rc == 0: a frame is complete and flushed. With no progress, rc is only a size hint.
      if (in_.pos != in_before || out.pos != 0) frame_open_ = rc != 0;
      if (out.pos > 0) return out.pos;
      if (in_.pos == in_.size && eof_) {
        if (frame_open_)
          throw Error(Where::at_offset(path_, static_cast<int64_t>(raw_offset_ + in_.pos)),
                      "truncated zstd stream: the file ends inside a frame");
        return 0;
      }
    }
  }

 private:
  ZSTD_DCtx* dctx_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool eof_ = false, frame_open_ = false;
};

// bz2, single or multi-stream (pbzip2, wikiextractor --compress): streams are decoded one after
// another, as bzip2 -d does.
class Bz2Source : public FileByteSource {
 public:
  explicit Bz2Source(const std::string& path) : FileByteSource(path) { init(); }
  ~Bz2Source() override { BZ2_bzDecompressEnd(&strm_); }

  size_t read(char* buf, size_t n) override {
    n = std::min<size_t>(n, 1u << 30);  // avail_out is 32-bit
    strm_.next_out = buf;
    strm_.avail_out = static_cast<unsigned>(n);
    while (strm_.avail_out > 0) {
      if (strm_.avail_in == 0 && !eof_) {
        eof_ = !refill();
        strm_.next_in = raw_.data();
        strm_.avail_in = static_cast<unsigned>(raw_len_);
      }
      if (stream_ended_) {
        if (strm_.avail_in == 0) break;  // the end of the file
        BZ2_bzDecompressEnd(&strm_);
        init();  // another stream follows
      }
      unsigned in_before = strm_.avail_in, out_before = strm_.avail_out;
      int rc = BZ2_bzDecompress(&strm_);
      if (rc == BZ_STREAM_END) {
        stream_ended_ = true;
        continue;
      }
      if (rc != BZ_OK)
        throw Error(Where::at_offset(path_, offset()),
                    cat("corrupt bz2 stream (libbz2 error ", rc, rc == BZ_DATA_ERROR_MAGIC ? ": not bz2 data" : "", ")"));
      if (strm_.avail_in == 0 && eof_ && strm_.avail_out > 0)
        throw Error(Where::at_offset(path_, offset()), "truncated bz2 stream: the file ends inside a stream");
      if (strm_.avail_in == in_before && strm_.avail_out == out_before && strm_.avail_in > 0)
        throw Error(Where::at_offset(path_, offset()), "corrupt bz2 stream: the decoder makes no progress");
    }
    return n - strm_.avail_out;
  }

 private:
  // A fresh decoder that carries on with the same input and output buffers.
  void init() {
    bz_stream fresh{};
    fresh.next_in = strm_.next_in, fresh.avail_in = strm_.avail_in;
    fresh.next_out = strm_.next_out, fresh.avail_out = strm_.avail_out;
    strm_ = fresh;
    if (BZ2_bzDecompressInit(&strm_, 0, 0) != BZ_OK) throw Error(Where{path_}, "cannot start a bz2 decoder");
    stream_ended_ = false;
  }
  int64_t offset() const { return static_cast<int64_t>(raw_offset_ + raw_len_ - strm_.avail_in); }

  bz_stream strm_{};
  bool eof_ = false, stream_ended_ = false;
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
  compression = "";
  return std::make_unique<PlainSource>(path);
}

}  // namespace pretrain
