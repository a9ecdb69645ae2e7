// Our own decoder of one bz2 block (decode_block in bz2_scan.h), written from the format (as Joe
// Tsai's "bzip2 format specification" describes it) with libbz2 1.0.8's checks; libbz2 stays
// beside it as decode_block_reference, which the tests and the bz2_scan fuzz target compare it
// with.
//
// Stages, each a tight loop over flat arrays:
//  1. header, symbol map, Huffman groups and selectors, read straight from the BitRange (a block
//     cut into several parts by chance magics is first joined into one buffer; that is rare);
//  2. symbols: a 10-bit lookup table per Huffman group (codes up to 20 bits take a slow path that
//     is libbz2's own canonical walk, so odd but legal tables decode the same), RUNA/RUNB runs
//     and the inverse MTF, into the BWT's last column `ll`;
//  3. inverse BWT: T built with the byte packed in, then followed as up to 512 segments, 16 at
//     a time (follow_chains). Following T is a pointer chase bound by memory latency; libbz2
//     follows one chain, these overlap 16 chains' misses, which is most of the gain;
//  4. the initial run-length stage undone (4 equal bytes + a count byte), then the block CRC
//     (bzip2's MSB-first CRC-32, slicing by 8) compared with the stored one.
// Every check libbz2 makes is made here too (selector and group counts, code lengths 1-20,
// origPtr, symbols past the block size, RUNA/RUNB overflow, a run of four without its count, the
// CRC), so a block one refuses the other refuses; indices into the arrays come from checked
// counts, so no input reads or writes out of bounds. Randomised blocks (bzip2 0.9.0, long
// obsolete) go to the reference decoder.
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <vector>

#include "formats/bz2_scan.h"

namespace pretrain::bz2 {
namespace {

constexpr int kMaxGroups = 6;
constexpr int kMaxAlpha = 258;
constexpr int kMaxCodeLen = 20;
constexpr int kGroupSize = 50;
constexpr int kMaxSelectors = 18002;  // libbz2's BZ_MAX_SELECTORS: 2 + 900000 / 50
constexpr int kTableBits = 10;
constexpr uint32_t kMaxRunSymbols = 21;  // libbz2: N < 2 Mi, so at most 21 RUNA/RUNB in a row

// ---- CRC: bzip2's CRC-32, polynomial 0x04C11DB7, most significant bit first. ----
struct CrcTables {
  uint32_t t[8][256];
  CrcTables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b << 24;
      for (int k = 0; k < 8; ++k) c = (c & 0x80000000u) ? (c << 1) ^ 0x04C11DB7u : c << 1;
      t[0][b] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] << 8) ^ t[0][t[k - 1][b] >> 24];
  }
};
const CrcTables kCrc;

uint32_t load_be32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}

uint32_t block_crc(const uint8_t* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  const auto& t = kCrc.t;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t one = crc ^ load_be32(p), two = load_be32(p + 4);
    crc = t[7][one >> 24] ^ t[6][(one >> 16) & 0xFF] ^ t[5][(one >> 8) & 0xFF] ^ t[4][one & 0xFF] ^
          t[3][two >> 24] ^ t[2][(two >> 16) & 0xFF] ^ t[1][(two >> 8) & 0xFF] ^ t[0][two & 0xFF];
  }
  for (; n > 0; --n, ++p) crc = (crc << 8) ^ t[0][(crc >> 24) ^ *p];
  return ~crc;
}

// ---- Bits, most significant first, from one contiguous byte buffer. ----
class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size, uint64_t begin_bit, uint64_t end_bit)
      : data_(data), size_(size), pos_(begin_bit), end_(end_bit), fast_end_(size >= 8 ? (size - 7) * 8 : 0) {}

  // 64 bits from the current position, of which the top 57 are valid; bytes past the buffer read
  // as zero (the position may run past end_ on bad input: checked where it matters).
  uint64_t peek() const {
    size_t byte = pos_ >> 3;
    uint64_t v;
    if (pos_ < fast_end_) [[likely]] {
      std::memcpy(&v, data_ + byte, 8);
      v = __builtin_bswap64(v);
    } else {
      v = 0;
      for (size_t i = 0; i < 8; ++i) v = (v << 8) | (byte + i < size_ ? data_[byte + i] : 0);
    }
    return v << (pos_ & 7);
  }
  // Unchecked peek for a stretch known to lie inside the buffer (fast_for()).
  uint64_t peek_fast() const {
    uint64_t v;
    std::memcpy(&v, data_ + (pos_ >> 3), 8);
    return __builtin_bswap64(v) << (pos_ & 7);
  }
  // Whether the next `bits` bits can be read with peek_fast().
  bool fast_for(uint64_t bits) const { return pos_ + bits < fast_end_; }

  uint32_t get(unsigned n) {  // n ≤ 32
    uint32_t v = static_cast<uint32_t>(peek() >> (64 - n));
    pos_ += n;
    return v;
  }
  uint32_t bit() { return get(1); }
  void skip(unsigned n) { pos_ += n; }
  uint64_t pos() const { return pos_; }
  uint64_t end() const { return end_; }
  bool overrun() const { return pos_ > end_; }

 private:
  const uint8_t* data_;
  size_t size_;
  uint64_t pos_, end_, fast_end_;
};

// One Huffman group: a kTableBits lookup table (entry: symbol << 4 | length; length 0 sends the
// code to the slow path) and libbz2's canonical tables for the slow path.
struct Group {
  uint16_t fast[1 << kTableBits];
  int64_t limit[kMaxCodeLen + 2];  // largest code of each length (first - 1 when none)
  int64_t first[kMaxCodeLen + 2];  // smallest code of each length
  int32_t offset[kMaxCodeLen + 2];  // symbols with a shorter code
  uint16_t perm[kMaxAlpha];         // symbols by (length, value)
  int count = 0;                    // symbols in perm
  int min_len = 0, max_len = 0;

  // libbz2's hbCreateDecodeTables, which accepts incomplete and over-subscribed codes alike.
  void build(const uint8_t* len, int alpha) {
    min_len = 32, max_len = 0;
    for (int i = 0; i < alpha; ++i) {
      min_len = std::min<int>(min_len, len[i]);
      max_len = std::max<int>(max_len, len[i]);
    }
    count = 0;
    int per_len[kMaxCodeLen + 2] = {};
    for (int l = min_len; l <= max_len; ++l)
      for (int i = 0; i < alpha; ++i)
        if (len[i] == l) perm[count++] = static_cast<uint16_t>(i);
    for (int i = 0; i < alpha; ++i) ++per_len[len[i]];
    int64_t code = 0;
    int shorter = 0;
    for (int l = 0; l <= kMaxCodeLen + 1; ++l) {
      first[l] = 1, limit[l] = 0, offset[l] = 0;  // lengths outside [min, max]: nothing matches
    }
    for (int l = min_len; l <= max_len; ++l) {
      first[l] = code;
      limit[l] = code + per_len[l] - 1;
      offset[l] = shorter;
      shorter += per_len[l];
      code = (limit[l] + 1) << 1;
    }
    std::memset(fast, 0, sizeof fast);
    // Longest first, so that a shorter code wins where (on a broken table) both would claim an
    // entry, as libbz2's walk from the shortest length stops at the first match.
    for (int l = std::min(max_len, kTableBits); l >= min_len; --l) {
      for (int64_t c = first[l]; c <= limit[l] && c < (int64_t{1} << l); ++c) {
        uint16_t entry = static_cast<uint16_t>(perm[offset[l] + (c - first[l])] << 4 | l);
        size_t lo = static_cast<size_t>(c) << (kTableBits - l), hi = static_cast<size_t>(c + 1) << (kTableBits - l);
        for (size_t e = lo; e < hi; ++e) fast[e] = entry;
      }
    }
  }

  // libbz2's walk: from the shortest length, one bit more while the code exceeds the length's
  // largest. `bits`: the next 64 bits (top 57 valid). Returns the symbol and sets `used`, or -1.
  int slow(uint64_t bits, unsigned& used) const {
    int zn = min_len;
    for (;;) {
      if (zn > kMaxCodeLen) return -1;
      int64_t zvec = static_cast<int64_t>(bits >> (64 - zn));
      if (zn <= max_len && zvec <= limit[zn]) {
        int64_t idx = offset[zn] + (zvec - first[zn]);
        if (idx < 0 || idx >= count) return -1;
        used = static_cast<unsigned>(zn);
        return perm[idx];
      }
      ++zn;
    }
  }
};

// The inverse BWT follows T from origPtr, one byte per step, each step a read at a random place
// in 3.6 MB: bound by memory latency. So the cycle is cut at more starting points (origPtr and
// evenly spaced positions, each marked in T) into segments, and kSlots segments are followed at
// once, overlapping their cache misses. A segment ends where its chain reaches another's
// start, which also gives their order; each slot writes into pages of a pool, and the segments
// are then copied out in cycle order.
constexpr int kSlots = 16;
constexpr uint32_t kPage = 4096;
constexpr uint32_t kMark = 1u << 31;  // in T: a segment starts here (positions fit 20 bits)
constexpr uint32_t kChainsFrom = 1u << 13;  // smaller blocks: one chain

struct Segment {
  uint32_t page = 0, offset = 0;  // where its bytes start in the pool
  uint32_t length = 0;
  uint32_t next = 0;  // the segment that follows it in the text
};

// Per-thread work arrays, reused from block to block (5.5 MB at level 9; allocating them per block
// cost page faults and zero-filling). They sit on transparent huge pages where the kernel offers
// them: the inverse BWT reads them at random, and with 4 KiB pages most of those reads also
// missed the TLB.
struct Scratch {
  uint32_t* tt = nullptr;  // T, the byte packed into the low 8 bits
  uint8_t* ll = nullptr;   // the BWT's last column, then the inverse BWT's output
  uint8_t* pool = nullptr;  // pages the chains write into
  void* memory = nullptr;
  size_t capacity = 0;
  std::vector<uint8_t> joined;  // a block in several parts, joined
  std::array<Group, kMaxGroups> groups;
  std::array<uint8_t, kMaxSelectors> selectors;
  std::vector<uint32_t> page_next;
  std::vector<Segment> segments;
  std::vector<std::pair<uint32_t, uint32_t>> starts;  // (position, segment), sorted

  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(memory); }

  static size_t pages_for(size_t n) { return n / kPage + kSlots + 2; }

  void reserve(size_t n) {
    if (n <= capacity) return;
    std::free(memory);
    constexpr size_t kHuge = 2u << 20;
    size_t pool_bytes = pages_for(n) * kPage;
    size_t bytes = (4 * n + (n + 64) + pool_bytes + kHuge - 1) / kHuge * kHuge;
    memory = std::aligned_alloc(kHuge, bytes);
    if (!memory) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(memory, bytes, MADV_HUGEPAGE);
#endif
    tt = static_cast<uint32_t*>(memory);
    ll = reinterpret_cast<uint8_t*>(tt + n);
    pool = ll + n + 64;
    page_next.resize(pages_for(n));
    capacity = n;
  }
};

Scratch& scratch() {
  thread_local std::unique_ptr<Scratch> s;
  if (!s) s = std::make_unique<Scratch>();
  return *s;
}

// The bits of `parts` joined into `out` from bit 0, most significant first; returns their count.
uint64_t join_parts(std::span<const BitRange> parts, std::vector<uint8_t>& out) {
  uint64_t total = 0;
  for (const BitRange& r : parts) total += r.size();
  out.clear();
  out.reserve(total / 8 + 9);
  uint64_t acc = 0;
  unsigned pending = 0;
  for (const BitRange& r : parts) {
    for (uint64_t bit = r.begin_bit; bit < r.end_bit;) {
      unsigned n = static_cast<unsigned>(std::min<uint64_t>(32, r.end_bit - bit));
      acc = (acc << n) | read_bits(r.bytes, bit, n);
      pending += n;
      bit += n;
      while (pending >= 8) {
        pending -= 8;
        out.push_back(static_cast<uint8_t>(acc >> pending));
      }
    }
  }
  if (pending > 0) out.push_back(static_cast<uint8_t>(acc << (8 - pending)));
  return total;
}

BlockResult fail(const char* why) {
  BlockResult r;
  r.error = why;
  return r;
}

// The MTF list's element `nn` moved to the front; returns it.
inline uint8_t mtf_take(uint8_t* mtf, uint32_t nn) {
  if (nn < 8) {
    uint64_t w;
    std::memcpy(&w, mtf, 8);
    uint8_t uc = static_cast<uint8_t>(w >> (8 * nn));
    // Bytes 0..nn move up one (little-endian: towards the higher bits); those above stay.
    uint64_t keep = nn == 7 ? 0 : ~uint64_t{0} << (8 * (nn + 1));
    w = ((w << 8) & ~keep) | (w & keep) | uc;
    std::memcpy(mtf, &w, 8);
    return uc;
  }
  uint8_t uc = mtf[nn];
  std::memmove(mtf + 1, mtf, nn);
  mtf[0] = uc;
  return uc;
}

// The inverse BWT of T (n entries) from orig_ptr into out[0, n), kSlots chains at a time (see
// kSlots). False when T is not one cycle through all the starts (a corrupt block).
bool follow_chains(Scratch& s, uint32_t n, uint32_t orig_ptr, uint8_t* out) {
  uint32_t* tt = s.tt;
  const uint32_t wanted = std::min<uint32_t>(512, n / 2048);
  s.starts.clear();
  s.starts.push_back({orig_ptr, 0});
  for (uint32_t k = 1; k < wanted; ++k) {
    uint32_t p = static_cast<uint32_t>(uint64_t{k} * n / wanted);
    if (p != orig_ptr) s.starts.push_back({p, static_cast<uint32_t>(s.starts.size())});
  }
  const auto count = static_cast<uint32_t>(s.starts.size());
  s.segments.assign(count, Segment{});
  for (auto [p, seg] : s.starts) tt[p] |= kMark;
  std::vector<uint32_t> begin(count);  // segment -> its start position
  for (auto [p, seg] : s.starts) begin[seg] = p;
  std::sort(s.starts.begin(), s.starts.end());

  struct Slot {
    uint32_t pos;
    uint8_t* w;
    uint8_t* wend;
    uint32_t page, seg;
    uint64_t base, opened;  // bytes of the slot's full pages; its count when the segment began
  };
  Slot slot[kSlots];
  const uint32_t pages = static_cast<uint32_t>(Scratch::pages_for(n));
  uint32_t next_page = 0, next_seg = 0;
  bool ok = true;
  auto new_page = [&](Slot& c) {
    if (next_page == pages) return false;  // more bytes than the block: not one cycle
    if (c.w) s.page_next[c.page] = next_page;
    c.page = next_page++;
    c.w = s.pool + size_t{c.page} * kPage;
    c.wend = c.w + kPage;
    return true;
  };
  // Starts segment `seg` in slot c: its first step reads its own (marked) start.
  auto open = [&](Slot& c, uint32_t seg) {
    Segment& g = s.segments[seg];
    g.page = c.page;
    g.offset = static_cast<uint32_t>(c.w - (s.pool + size_t{c.page} * kPage));
    c.seg = seg;
    c.opened = c.base + (c.w - (s.pool + size_t{c.page} * kPage));
    uint32_t v = tt[begin[seg]] & ~kMark;
    *c.w++ = static_cast<uint8_t>(v);
    c.pos = v >> 8;
    if (c.w == c.wend) {
      c.base += kPage;
      ok = ok && new_page(c);
    }
  };
  int active = 0;
  for (; active < kSlots && next_seg < count; ++active) {
    slot[active] = Slot{0, nullptr, nullptr, 0, 0, 0, 0};
    if (!new_page(slot[active])) return false;
    open(slot[active], next_seg++);
  }
  while (active > 0 && ok) {
    for (int j = 0; j < active;) {
      Slot& c = slot[j];
      uint32_t v = tt[c.pos];
      if (v & kMark) [[unlikely]] {
        auto it = std::lower_bound(s.starts.begin(), s.starts.end(), std::pair<uint32_t, uint32_t>{c.pos, 0});
        Segment& g = s.segments[c.seg];
        g.length = static_cast<uint32_t>(c.base + (c.w - (s.pool + size_t{c.page} * kPage)) - c.opened);
        g.next = it->second;
        if (next_seg < count) {
          open(c, next_seg++);
          ++j;
        } else {
          slot[j] = slot[--active];
        }
        continue;
      }
      *c.w++ = static_cast<uint8_t>(v);
      c.pos = v >> 8;
      if (c.w == c.wend) [[unlikely]] {
        c.base += kPage;
        if (!new_page(c)) return false;
      }
      ++j;
    }
  }
  if (!ok) return false;
  // Out in cycle order, from the segment at origPtr.
  uint64_t at = 0;
  uint32_t seg = 0;
  for (uint32_t visited = 0; visited < count; ++visited) {
    const Segment& g = s.segments[seg];
    if (g.length > n - at) return false;
    uint32_t page = g.page, offset = g.offset, left = g.length;
    while (left > 0) {
      uint32_t take = std::min(left, kPage - offset);
      std::memcpy(out + at, s.pool + size_t{page} * kPage + offset, take);
      at += take, left -= take;
      page = s.page_next[page], offset = 0;
    }
    seg = g.next;
    if (seg == 0) return visited + 1 == count && at == n;
  }
  return false;
}

}  // namespace

BlockResult decode_block(std::span<const BitRange> parts, int level) {
  uint64_t total_bits = 0;
  for (const BitRange& r : parts) total_bits += r.size();
  if (total_bits < 80) return fail("block shorter than its 10-byte header");
  if (level < 1 || level > 9) return fail("bad block size level");

  Scratch& s = scratch();
  const uint8_t* data;
  size_t size;
  uint64_t begin, end;
  if (parts.size() == 1) {
    data = parts[0].bytes.data(), size = parts[0].bytes.size();
    begin = parts[0].begin_bit, end = parts[0].end_bit;
  } else {
    end = join_parts(parts, s.joined);
    data = s.joined.data(), size = s.joined.size();
    begin = 0;
  }
  BitReader in(data, size, begin, end);

  // ---- Header: magic, CRC, randomised flag, origPtr. ----
  uint64_t magic = uint64_t{in.get(24)} << 24;
  magic |= in.get(24);
  if (magic != kBlockMagic) return fail("no block magic at the block's start");
  uint32_t stored_crc = in.get(32);
  if (in.bit()) return decode_block_reference(parts, level);  // randomised (bzip2 0.9.0)
  uint32_t orig_ptr = in.get(24);
  const uint32_t max_block = 100000u * static_cast<uint32_t>(level);
  if (orig_ptr > 10 + max_block) return fail("origPtr past the block size");

  // ---- Symbol map. ----
  uint8_t seq_to_byte[256];
  int in_use = 0;
  uint32_t used16 = in.get(16);
  for (int i = 0; i < 16; ++i) {
    if (!((used16 >> (15 - i)) & 1)) continue;
    uint32_t used = in.get(16);
    for (int j = 0; j < 16; ++j)
      if ((used >> (15 - j)) & 1) seq_to_byte[in_use++] = static_cast<uint8_t>(i * 16 + j);
  }
  if (in_use == 0) return fail("the block uses no byte values");
  const int alpha = in_use + 2;

  // ---- Selectors (MTF coded, unary). ----
  int groups = static_cast<int>(in.get(3));
  if (groups < 2 || groups > kMaxGroups) return fail("Huffman group count not in 2..6");
  int selectors = static_cast<int>(in.get(15));
  if (selectors < 1) return fail("no selectors");
  {
    uint8_t pos[kMaxGroups] = {0, 1, 2, 3, 4, 5};
    for (int i = 0; i < selectors; ++i) {
      int j = 0;
      // Unary: up to `groups` bits; any 1 past groups - 1 is an error.
      uint64_t bits = in.peek();
      while (bits >> 63) {
        if (++j >= groups) return fail("selector past the Huffman group count");
        bits <<= 1;
      }
      in.skip(static_cast<unsigned>(j) + 1);
      if (in.overrun()) return fail("the data ends inside the block");
      if (i < kMaxSelectors) {  // libbz2 1.0.8 reads and ignores selectors past its maximum
        uint8_t g = pos[j];
        for (; j > 0; --j) pos[j] = pos[j - 1];
        pos[0] = g;
        s.selectors[i] = g;
      }
    }
    selectors = std::min(selectors, kMaxSelectors);
  }

  // ---- Code lengths (delta coded), then the tables. ----
  for (int t = 0; t < groups; ++t) {
    uint8_t len[kMaxAlpha];
    int curr = static_cast<int>(in.get(5));
    for (int i = 0; i < alpha; ++i) {
      for (;;) {
        if (curr < 1 || curr > kMaxCodeLen) return fail("Huffman code length not in 1..20");
        if (in.overrun()) return fail("the data ends inside the block");
        if (!in.bit()) break;
        curr += in.bit() ? -1 : 1;
      }
      len[i] = static_cast<uint8_t>(curr);
      if (in.overrun()) return fail("the data ends inside the block");
    }
    s.groups[t].build(len, alpha);
  }

  // ---- Symbols: Huffman, RUNA/RUNB, inverse MTF, into ll. ----
  s.reserve(max_block);
  uint8_t* ll = s.ll;
  uint32_t counts[256] = {};
  uint8_t mtf[256];
  for (int i = 0; i < 256; ++i) mtf[i] = static_cast<uint8_t>(i < in_use ? seq_to_byte[i] : 0);
  const uint32_t eob = static_cast<uint32_t>(in_use + 1);
  uint32_t nblock = 0;
  uint32_t run = 0, run_symbols = 0;  // a RUNA/RUNB run in progress: its length so far, its symbols
  bool ended = false;
  const char* error = nullptr;

  // Returns false to stop (error set, or the end-of-block symbol).
  auto symbol = [&](uint32_t sym) -> bool {
    if (sym <= 1) {  // RUNA (1) or RUNB (2) times the current power of two
      if (run_symbols >= kMaxRunSymbols) {
        error = "RUNA/RUNB run too long";
        return false;
      }
      run += (sym + 1) << run_symbols;
      ++run_symbols;
      return true;
    }
    if (run_symbols) {
      uint8_t uc = mtf[0];
      if (run > max_block - nblock) {
        error = "more symbols than the block size allows";
        return false;
      }
      std::memset(ll + nblock, uc, run);
      counts[uc] += run;
      nblock += run;
      run = 0, run_symbols = 0;
    }
    if (sym == eob) {
      ended = true;
      return false;
    }
    if (nblock >= max_block) {
      error = "more symbols than the block size allows";
      return false;
    }
    uint8_t uc = mtf_take(mtf, sym - 1);
    ll[nblock++] = uc;
    ++counts[uc];
    return true;
  };

  // A code through libbz2's canonical walk: the lookup table's misses, and every code near the end.
  auto slow_symbol = [&](const Group& g, uint64_t bits, uint32_t& sym) {
    unsigned used = 0;
    const int v = g.slow(bits, used);
    if (v < 0) {
      error = "invalid Huffman code";
      return false;
    }
    in.skip(used);
    sym = static_cast<uint32_t>(v);
    return true;
  };

  for (int sel = 0; sel < selectors; ++sel) {
    const Group& g = s.groups[s.selectors[sel]];
    bool go = true;
    if (in.fast_for(kGroupSize * kMaxCodeLen)) {
      for (int k = 0; k < kGroupSize && go; ++k) {
        uint64_t bits = in.peek_fast();
        uint16_t e = g.fast[bits >> (64 - kTableBits)];
        uint32_t sym;
        if (e & 0xF) [[likely]] {
          in.skip(e & 0xF);
          sym = e >> 4;
        } else if (!slow_symbol(g, bits, sym)) {
          break;
        }
        go = symbol(sym);
      }
    } else {
      for (int k = 0; k < kGroupSize && go; ++k) {
        uint32_t sym;
        if (!slow_symbol(g, in.peek(), sym)) break;
        go = symbol(sym);
        if (in.pos() > in.end() + 64) {  // far past the end: stop reading zeros
          error = "the data ends inside the block";
          break;
        }
      }
    }
    if (error || ended) break;
  }
  if (in.overrun()) return fail("the data ends inside the block");
  if (error) return fail(error);
  if (!ended) return fail("no end-of-block symbol within the selectors");
  if (in.pos() != in.end()) return fail("the block ends before the next magic");
  if (orig_ptr >= nblock) return fail("origPtr past the block's end");

  // ---- Inverse BWT: T with the byte packed into the low 8 bits, then its chains. ----
  uint32_t cf[256];
  {
    uint32_t sum = 0;
    for (int b = 0; b < 256; ++b) cf[b] = sum, sum += counts[b];
  }
  uint32_t* tt = s.tt;
  for (uint32_t i = 0; i < nblock; ++i) {
    uint32_t b = ll[i];
    tt[cf[b]++] = i << 8 | b;
  }
  uint8_t* pre = ll;  // ll is spent: the text before the initial RLE goes here
  if (nblock < kChainsFrom) {
    for (uint32_t k = 0, pos = orig_ptr; k < nblock; ++k) {
      uint32_t v = tt[pos];
      pre[k] = static_cast<uint8_t>(v);
      pos = v >> 8;
    }
  } else if (!follow_chains(s, nblock, orig_ptr, pre)) {
    return fail("the inverse BWT is not one cycle");
  }

  // ---- Undo the initial RLE: after 4 equal bytes a count byte (0-255) of further copies. ----
  BlockResult result;
  std::string& out = result.decoded;
  out.resize(nblock + nblock / 8 + 64);
  size_t w = 0;
  size_t i = 0;
  const size_t n = nblock;
  // Invariant at a run start: out.size() - w ≥ (n - i) + 16.
  while (i < n) {
    if (i + 8 <= n) {
      uint64_t v;
      std::memcpy(&v, pre + i, 8);
      uint64_t x = v ^ (v >> 8);  // byte k: pre[i+k] ^ pre[i+k+1] (k < 7)
      uint64_t z = ~(((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | x | 0x7F7F7F7F7F7F7F7FULL);
      uint64_t four = z & (z >> 8) & (z >> 16) & 0x0000008080808080ULL;  // 4 equal from k = 0..4
      if (!four) {
        std::memcpy(out.data() + w, &v, 8);
        w += 5, i += 5;
        continue;
      }
    }
    uint8_t b = pre[i];
    size_t j = i + 1;
    while (j < n && j - i < 4 && pre[j] == b) ++j;
    size_t len = j - i;
    std::memset(out.data() + w, b, 4);
    w += len;
    i = j;
    if (len == 4) {
      if (i >= n) return fail("a run of four bytes without its count at the block's end");
      size_t extra = pre[i++];
      if (out.size() - w < (n - i) + 16 + extra) out.resize(std::max(out.size() * 2, w + (n - i) + 16 + extra));
      std::memset(out.data() + w, b, extra);
      w += extra;
    }
  }
  out.resize(w);
  if (block_crc(reinterpret_cast<const uint8_t*>(out.data()), w) != stored_crc) {
    out.clear();
    return fail("block CRC mismatch");
  }
  result.ok = true;
  return result;
}

}  // namespace pretrain::bz2
