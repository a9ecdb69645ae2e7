// Compressed test fixtures made with the libraries themselves (zlib, libzstd, libbz2), so tests
// need no command-line tools: one gzip member / zstd frame / bz2 stream of `text` each, which
// concatenate into multi-member / multi-frame / multistream files. Tests that include this link
// ZLIB, ZSTD and BZip2 (tests/CMakeLists.txt does for formats/ and datagen/).
#pragma once
#include <bzlib.h>
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <string>
#include <string_view>

namespace pretrain::testing {

inline std::string gzip_member(std::string_view text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);  // 16: gzip
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// With a content checksum, as the zstd tool writes by default: a corrupt frame cannot decode to
// other bytes unnoticed.
inline std::string zstd_frame(std::string_view text) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(text.size()), '\0');
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), text.data(), text.size());
  ZSTD_freeCCtx(cctx);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

// `level` is bzip2's -1 … -9: blocks of level × 100 kB.
inline std::string bz2_stream(std::string_view text, int level = 9) {
  unsigned size = static_cast<unsigned>(text.size() + text.size() / 100 + 600);
  std::string out(size, '\0');
  int rc = BZ2_bzBuffToBuffCompress(out.data(), &size, const_cast<char*>(text.data()),
                                    static_cast<unsigned>(text.size()), level, 0, 0);
  EXPECT_EQ(rc, BZ_OK);
  out.resize(size);
  return out;
}

}  // namespace pretrain::testing
