#include "formats/bz2_scan.h"

#include <bzlib.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace pretrain::bz2 {
namespace {

// libbz2's decoder allocates its state and a level × 400 KB array per stream, and
// decode_block_reference opens a stream per block: each thread keeps the arrays of its last
// stream for the next one instead of mapping and unmapping megabytes per block. bzfree is not
// told the size, so each array carries it in a 16-byte header (which keeps malloc's alignment).
constexpr size_t kBz2Header = 16;

struct Bz2ArrayCache {
  std::array<void*, 4> arrays{};  // headers of free arrays
  ~Bz2ArrayCache() {
    for (void* p : arrays) std::free(p);
  }
};
thread_local Bz2ArrayCache bz2_array_cache;

void* bz2_alloc(void*, int n, int m) {
  const size_t size = static_cast<size_t>(n) * static_cast<size_t>(m);
  for (void*& p : bz2_array_cache.arrays)
    if (p && *static_cast<size_t*>(p) == size) return static_cast<char*>(std::exchange(p, nullptr)) + kBz2Header;
  void* p = std::malloc(kBz2Header + size);
  if (!p) return nullptr;
  *static_cast<size_t*>(p) = size;
  return static_cast<char*>(p) + kBz2Header;
}

void bz2_free(void*, void* array) {
  if (!array) return;
  void* p = static_cast<char*>(array) - kBz2Header;
  for (void*& slot : bz2_array_cache.arrays)
    if (!slot) {
      slot = p;
      return;
    }
  std::free(p);
}

// Big-endian load of 8 bytes at `pos`; bytes past the end read as zero.
uint64_t load_be64(std::span<const uint8_t> bytes, size_t pos) {
  uint64_t v = 0;
  if (pos + 8 <= bytes.size()) {
    std::memcpy(&v, bytes.data() + pos, 8);
    return __builtin_bswap64(v);
  }
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | (pos + i < bytes.size() ? bytes[pos + i] : 0);
  return v;
}

// The scan's filter. A magic that starts at bit s (0-7) of byte b fully determines bytes
// b+1 … b+5, so exactly one 4-aligned position q in [b+1, b+4] sees a known 16-bit value at
// (q, q+1). The table marks the 2 magics × 8 shifts × 4 offsets = 64 such values; testing one
// 16-bit value per 4 input bytes passes about 1 in 1000 windows on to the exact check.
struct MagicFilter {
  std::array<uint64_t, 1024> bits{};
  MagicFilter() {
    for (uint64_t magic : {kBlockMagic, kStreamEndMagic})
      for (unsigned shift = 0; shift < 8; ++shift) {
        uint64_t word = magic << (16 - shift);  // bytes 0-7 with the magic at bit `shift`
        auto byte = [&](unsigned j) { return (word >> (56 - 8 * j)) & 0xFF; };
        for (unsigned j = 1; j <= 4; ++j) {
          uint64_t v = byte(j) << 8 | byte(j + 1);
          bits[v >> 6] |= uint64_t{1} << (v & 63);
        }
      }
  }
  bool maybe(uint32_t v) const { return (bits[v >> 6] >> (v & 63)) & 1; }
};

const MagicFilter& magic_filter() {
  static const MagicFilter filter;
  return filter;
}

// Exact check of every start bit in [first, last] (inclusive).
Magic check_bits(std::span<const uint8_t> bytes, uint64_t first, uint64_t last) {
  for (uint64_t bit = first; bit <= last; ++bit) {
    uint64_t v = (load_be64(bytes, bit / 8) << (bit % 8)) >> 16;
    if (v == kBlockMagic) return {MagicKind::block, bit};
    if (v == kStreamEndMagic) return {MagicKind::stream_end, bit};
  }
  return {};
}

// Appends bits MSB-first to a byte vector.
class BitWriter {
 public:
  explicit BitWriter(std::vector<uint8_t>& out) : out_(out) {}

  void put(uint64_t value, unsigned count) {  // count ≤ 32
    acc_ = (acc_ << count) | (value & ((uint64_t{1} << count) - 1));
    pending_ += count;
    while (pending_ >= 8) {
      pending_ -= 8;
      out_.push_back(static_cast<uint8_t>(acc_ >> pending_));
    }
  }

  void append(const BitRange& r) {
    uint64_t bit = r.begin_bit, end = r.end_bit;
    if (pending_ == 0 && end - bit >= 8) {  // byte-aligned output: whole bytes in one tight loop
      size_t n = (end - bit) / 8, j = bit / 8, at = out_.size();
      unsigned shift = bit % 8;
      out_.resize(at + n);
      uint8_t* dst = out_.data() + at;
      const uint8_t* src = r.bytes.data() + j;
      if (shift == 0) {
        std::memcpy(dst, src, n);
      } else {
        for (size_t k = 0; k < n; ++k)
          dst[k] = static_cast<uint8_t>(src[k] << shift | src[k + 1] >> (8 - shift));
      }
      bit += 8 * n;
    }
    for (; end - bit >= 32; bit += 32) put(read_bits(r.bytes, bit, 32), 32);
    if (end > bit) put(read_bits(r.bytes, bit, static_cast<unsigned>(end - bit)), static_cast<unsigned>(end - bit));
  }

  void flush() {
    if (pending_ > 0) put(0, 8 - pending_);
  }

 private:
  std::vector<uint8_t>& out_;
  uint64_t acc_ = 0;
  unsigned pending_ = 0;
};

const char* bz_error_name(int code) {
  switch (code) {
    case BZ_DATA_ERROR: return "corrupt data (bad Huffman tables, block CRC or block header)";
    case BZ_DATA_ERROR_MAGIC: return "bad magic";
    case BZ_MEM_ERROR: return "out of memory";
    case BZ_PARAM_ERROR: return "bad parameters";
    default: return "libbz2 failure";
  }
}

}  // namespace

uint64_t read_bits(std::span<const uint8_t> bytes, uint64_t bit, unsigned count) {
  if (count == 0) return 0;
  return (load_be64(bytes, bit / 8) << (bit % 8)) >> (64 - count);
}

Magic find_magic(std::span<const uint8_t> bytes, uint64_t from_bit) {
  size_t n = bytes.size();
  if (n < 6) return {};
  uint64_t last = n * 8 - 48;  // the last start bit with the whole magic inside
  if (from_bit > last) return {};
  const MagicFilter& filter = magic_filter();
  const uint8_t* p = bytes.data();
  size_t q = (from_bit / 8) / 4 * 4 + 4;  // window of q: start bytes [q-4, q)
  for (; q + 1 < n; q += 4) {
    if (!filter.maybe(uint32_t{p[q]} << 8 | p[q + 1])) continue;
    uint64_t first = std::max<uint64_t>(from_bit, (q - 4) * 8);
    uint64_t stop = std::min<uint64_t>(last, q * 8 - 1);
    if (first > stop) continue;
    if (Magic m = check_bits(bytes, first, stop); m.kind != MagicKind::none) return m;
  }
  // A magic that fits needs (q, q+1) inside the bytes, so none is left; the check is cheap.
  uint64_t first = std::max<uint64_t>(from_bit, (q - 4) * 8);
  return first <= last ? check_bits(bytes, first, last) : Magic{};
}

BlockResult decode_block_reference(std::span<const BitRange> parts, int level) {
  BlockResult result;
  uint64_t bits = 0;
  for (const BitRange& r : parts) bits += r.size();
  if (bits < 80) {
    result.error = "block shorter than its 10-byte header";
    return result;
  }

  std::vector<uint8_t> framed;
  framed.reserve(4 + bits / 8 + 16);
  BitWriter writer(framed);
  for (char c : {'B', 'Z', 'h'}) writer.put(static_cast<uint8_t>(c), 8);
  writer.put(static_cast<uint64_t>('0' + level), 8);
  for (const BitRange& r : parts) writer.append(r);
  uint64_t block_crc = read_bits(framed, 32 + 48, 32);
  writer.put(kStreamEndMagic >> 24, 24);
  writer.put(kStreamEndMagic & 0xFFFFFF, 24);
  writer.put(block_crc, 32);  // one block: stream CRC = rotl(0, 1) ^ block CRC = block CRC
  writer.flush();

  bz_stream strm;
  std::memset(&strm, 0, sizeof strm);
  strm.bzalloc = bz2_alloc;
  strm.bzfree = bz2_free;
  if (int rc = BZ2_bzDecompressInit(&strm, 0, 0); rc != BZ_OK) {
    result.error = bz_error_name(rc);
    return result;
  }
  strm.next_in = reinterpret_cast<char*>(framed.data());
  strm.avail_in = static_cast<unsigned>(framed.size());
  // Decoded through a small buffer and appended: the reserve maps the block's likely size without
  // writing it (a zero-filled 1 MB per block was most of the bz2_scan fuzz target's time).
  std::string& out = result.decoded;
  out.reserve(static_cast<size_t>(level) * 105000 + 65536);  // text rarely grows in the RLE stage
  char piece[65536];
  for (;;) {
    strm.next_out = piece;
    strm.avail_out = sizeof piece;
    unsigned in_before = strm.avail_in;
    int rc = BZ2_bzDecompress(&strm);
    size_t made = sizeof piece - strm.avail_out;
    out.append(piece, made);
    if (rc == BZ_STREAM_END) {
      result.ok = true;
      break;
    }
    if (rc != BZ_OK) {
      result.error = bz_error_name(rc);
      break;
    }
    if (strm.avail_out != 0 && (strm.avail_in == 0 || (made == 0 && strm.avail_in == in_before))) {
      result.error = "the data ends inside the block";
      break;
    }
  }
  BZ2_bzDecompressEnd(&strm);
  if (!result.ok) out.clear();
  return result;
}

}  // namespace pretrain::bz2
