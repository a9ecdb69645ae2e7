// The bz2 pieces the parallel reader is built from: a fast scan for the bit-aligned 48-bit magics
// (block start 0x314159265359, end of stream 0x177245385090), and the decoding of one block found
// that way: by our own decoder, with libbz2 beside it as the reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace pretrain::bz2 {

inline constexpr uint64_t kBlockMagic = 0x314159265359ULL;
inline constexpr uint64_t kStreamEndMagic = 0x177245385090ULL;

enum class MagicKind { none, block, stream_end };

struct Magic {
  MagicKind kind = MagicKind::none;
  uint64_t bit = 0;  // bit offset in the scanned bytes, counted from the most significant bit
};

// The first magic starting at a bit offset in [from_bit, size*8 - 48] of `bytes`.
// Candidates only: compressed data can contain the pattern by chance.
Magic find_magic(std::span<const uint8_t> bytes, uint64_t from_bit);

// `count` bits (≤ 57) of `bytes` starting at bit `bit`, as an unsigned number; bits past the end
// read as zero.
uint64_t read_bits(std::span<const uint8_t> bytes, uint64_t bit, unsigned count);

// A run of bits inside some bytes: [begin_bit, end_bit) of `bytes`.
struct BitRange {
  std::span<const uint8_t> bytes;
  uint64_t begin_bit = 0;
  uint64_t end_bit = 0;
  uint64_t size() const { return end_bit - begin_bit; }
};

struct BlockResult {
  bool ok = false;
  std::string decoded;  // the block's bytes when ok
  std::string error;    // why not, when !ok ("data error", "ends inside the block", …)
};

// Decodes one bz2 block whose bits (block magic to just before the next magic) are the
// concatenation of `parts`, as a block of a stream with block size `level` (1-9): our own decoder
// (bz2_block.cpp), read straight from the parts. It accepts what libbz2 accepts and gives the
// same bytes; the block CRC is checked, and a block that does not end exactly where `parts` end
// fails. Every malformed block is an error with a reason, never a read or write out of bounds.
// Randomised blocks (bzip2 0.9.0) are handed to decode_block_reference.
BlockResult decode_block(std::span<const BitRange> parts, int level);

// The same by libbz2, the reference the tests hold decode_block to. libbz2 has no call that
// starts at a block, so the block is shifted to a byte boundary and framed as a one-block stream:
// "BZh" + level, the block, the end-of-stream magic and a stream CRC that for one block equals
// the block CRC (the CRC right after the block magic).
BlockResult decode_block_reference(std::span<const BitRange> parts, int level);

}  // namespace pretrain::bz2
