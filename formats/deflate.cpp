// One zlib stream per call, in and out of whole buffers, through zlib (the reference), libdeflate or
// ISA-L. Compressor state is per thread and per level, allocated on first use: zlib's and ISA-L's
// are a few hundred KiB, too much to set up for every 256 KiB chunk.
#include "formats/deflate.h"

#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <zlib.h>

#include <array>
#include <limits>
#include <memory>

namespace pretrain::deflate {

namespace {

constexpr size_t kMax32 = std::numeric_limits<uint32_t>::max();

// zlib: deflateReset between chunks instead of a new stream.
size_t compress_zlib(const uint8_t* src, size_t n, int level, std::vector<uint8_t>& out) {
  struct Stream {
    z_stream zs{};
    int level = -1;
    ~Stream() {
      if (level >= 0) deflateEnd(&zs);
    }
  };
  thread_local Stream s;
  if (s.level != level) {
    if (s.level >= 0) deflateEnd(&s.zs);
    s.zs = z_stream{};
    s.level = -1;
    if (deflateInit(&s.zs, level) != Z_OK) throw Error(cat("zlib deflateInit failed at level ", level));
    s.level = level;
  } else {
    deflateReset(&s.zs);
  }
  s.zs.next_in = const_cast<uint8_t*>(src);
  s.zs.avail_in = static_cast<uInt>(n);
  s.zs.next_out = out.data();
  s.zs.avail_out = static_cast<uInt>(out.size());
  int rc = ::deflate(&s.zs, Z_FINISH);
  if (rc != Z_STREAM_END) throw Error(cat("zlib deflate failed (", rc, ")"));
  return static_cast<size_t>(s.zs.total_out);
}

size_t compress_libdeflate(const uint8_t* src, size_t n, int level, std::vector<uint8_t>& out) {
  struct Compressors {
    std::array<libdeflate_compressor*, 10> at{};  // by level, allocated when first asked for
    ~Compressors() {
      for (auto* c : at) libdeflate_free_compressor(c);
    }
  };
  thread_local Compressors cs;
  auto*& c = cs.at[static_cast<size_t>(level)];
  if (!c && !(c = libdeflate_alloc_compressor(level))) throw Error(cat("libdeflate: cannot make a level ", level, " compressor"));
  size_t size = libdeflate_zlib_compress(c, src, n, out.data(), out.size());
  if (size == 0) throw Error(cat("libdeflate: ", n, " bytes did not fit ", out.size(), " bytes of output"));
  return size;
}

// ISA-L's one-shot deflate with the zlib wrapper; its levels above 0 need a work buffer.
size_t compress_isal(const uint8_t* src, size_t n, int level, std::vector<uint8_t>& out) {
  static constexpr std::array<uint32_t, 4> kLevelBuf = {ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT,
                                                        ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT};
  thread_local std::unique_ptr<isal_zstream> stream = std::make_unique<isal_zstream>();
  thread_local std::vector<uint8_t> level_buf(ISAL_DEF_LVL3_DEFAULT);
  isal_zstream& s = *stream;
  isal_deflate_stateless_init(&s);
  s.level = static_cast<uint32_t>(level);
  s.level_buf = level_buf.data();
  s.level_buf_size = kLevelBuf[static_cast<size_t>(level)];
  s.gzip_flag = IGZIP_ZLIB;
  s.end_of_stream = 1;
  s.flush = NO_FLUSH;
  s.next_in = const_cast<uint8_t*>(src);
  s.avail_in = static_cast<uint32_t>(n);
  s.next_out = out.data();
  s.avail_out = static_cast<uint32_t>(out.size());
  int rc = isal_deflate_stateless(&s);
  if (rc != COMP_OK) throw Error(cat("ISA-L deflate failed (", rc, ") at level ", level));
  return s.total_out;
}

void inflate_zlib(const uint8_t* src, size_t n, uint8_t* out, size_t out_size, const Where& where,
                  const std::string& what) {
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) throw Error(where, what + ": zlib inflateInit failed");
  zs.next_in = const_cast<uint8_t*>(src);
  zs.avail_in = static_cast<uInt>(n);
  zs.next_out = out;
  zs.avail_out = static_cast<uInt>(out_size);
  int rc = ::inflate(&zs, Z_FINISH);
  const size_t decoded = zs.total_out;
  const std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (rc == Z_STREAM_END && decoded == out_size) return;
  if (rc == Z_STREAM_END)
    throw Error(where, cat(what, ": zlib stream decodes to ", decoded, " bytes, expected ", out_size));
  if (rc == Z_BUF_ERROR && decoded == out_size)
    throw Error(where, cat(what, ": zlib stream decodes to more than the expected ", out_size, " bytes"));
  if (rc == Z_BUF_ERROR)
    throw Error(where, cat(what, ": truncated zlib stream: it ends after ", decoded, " of ", out_size, " bytes"));
  throw Error(where, cat(what, ": corrupt zlib stream (zlib ", rc, msg.empty() ? "" : ": " + msg, ") after ", decoded,
                         " of ", out_size, " bytes"));
}

void inflate_libdeflate(const uint8_t* src, size_t n, uint8_t* out, size_t out_size, const Where& where,
                        const std::string& what) {
  struct Decompressor {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    ~Decompressor() { libdeflate_free_decompressor(d); }
  };
  thread_local Decompressor d;
  if (!d.d) throw Error(where, what + ": libdeflate: cannot make a decompressor");
  switch (libdeflate_zlib_decompress(d.d, src, n, out, out_size, nullptr)) {
    case LIBDEFLATE_SUCCESS: return;
    case LIBDEFLATE_SHORT_OUTPUT:
      throw Error(where, cat(what, ": zlib stream decodes to fewer than the expected ", out_size, " bytes"));
    case LIBDEFLATE_INSUFFICIENT_SPACE:
      throw Error(where, cat(what, ": zlib stream decodes to more than the expected ", out_size, " bytes"));
    default:  // libdeflate does not tell a cut stream from a corrupt one
      throw Error(where, cat(what, ": corrupt or truncated zlib stream (libdeflate: bad data or checksum)"));
  }
}

void inflate_isal(const uint8_t* src, size_t n, uint8_t* out, size_t out_size, const Where& where,
                  const std::string& what) {
  thread_local std::unique_ptr<inflate_state> state = std::make_unique<inflate_state>();
  inflate_state& s = *state;
  isal_inflate_init(&s);
  s.crc_flag = ISAL_ZLIB;
  s.next_in = const_cast<uint8_t*>(src);
  s.avail_in = static_cast<uint32_t>(n);
  s.next_out = out;
  s.avail_out = static_cast<uint32_t>(out_size);
  int rc = isal_inflate_stateless(&s);
  if (rc == ISAL_DECOMP_OK && s.avail_out == 0) return;
  if (rc == ISAL_DECOMP_OK)
    throw Error(where, cat(what, ": zlib stream decodes to ", s.total_out, " bytes, expected ", out_size));
  if (rc == ISAL_OUT_OVERFLOW)
    throw Error(where, cat(what, ": zlib stream decodes to more than the expected ", out_size, " bytes"));
  if (rc == ISAL_END_INPUT)
    throw Error(where, cat(what, ": truncated zlib stream: it ends after ", s.total_out, " of ", out_size, " bytes"));
  throw Error(where, cat(what, ": corrupt zlib stream (ISA-L ", rc, ")"));
}

}  // namespace

const char* codec_name(Codec codec) {
  switch (codec) {
    case Codec::zlib: return "zlib";
    case Codec::libdeflate: return "libdeflate";
    case Codec::isal: return "isa-l";
  }
  return "?";
}

int library_level(Codec codec, int gzip_level) {
  if (codec != Codec::isal) return gzip_level;
  return gzip_level <= 1 ? 0 : gzip_level <= 3 ? 1 : gzip_level <= 6 ? 2 : 3;
}

size_t compress_bound(size_t n) {
  // zlib's bound, plus room for ISA-L's worst case (a dynamic header before it falls back to
  // stored blocks) so that no codec runs out.
  return compressBound(static_cast<uLong>(n)) + ISAL_DEF_MAX_HDR_SIZE + 64;
}

size_t compress(Codec codec, const uint8_t* src, size_t n, int gzip_level, std::vector<uint8_t>& out) {
  if (gzip_level < 0 || gzip_level > 9) throw Error(cat("gzip level ", gzip_level, " must be in [0, 9]"));
  if (n > kMax32 / 2) throw Error(cat("deflate: ", n, " bytes is more than one chunk may hold"));
  const size_t bound = compress_bound(n);
  if (out.size() < bound) out.resize(bound);  // grows once; later calls reuse it
  const int level = library_level(codec, gzip_level);
  switch (codec) {
    case Codec::zlib: return compress_zlib(src, n, level, out);
    case Codec::libdeflate: return compress_libdeflate(src, n, level, out);
    case Codec::isal: return compress_isal(src, n, level, out);
  }
  return 0;
}

void inflate(Codec codec, const uint8_t* src, size_t n, uint8_t* out, size_t out_size, const Where& where,
             const std::string& what) {
  if (n > kMax32 || out_size > kMax32)
    throw Error(where, cat(what, ": ", n, " bytes inflating to ", out_size, ", more than one chunk may hold"));
  switch (codec) {
    case Codec::zlib: return inflate_zlib(src, n, out, out_size, where, what);
    case Codec::libdeflate: return inflate_libdeflate(src, n, out, out_size, where, what);
    case Codec::isal: return inflate_isal(src, n, out, out_size, where, what);
  }
}

}  // namespace pretrain::deflate
