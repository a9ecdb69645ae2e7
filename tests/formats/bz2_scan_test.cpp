// The scan of formats/bz2_scan.cpp: read_bits, find_magic (both magics, at any bit offset, from
// any start, at the ends of the buffer), and decode_block_reference, libbz2 framing one block as a
// stream of its own, with its reasons for what it cannot decode. Our own block decoder is held to
// it in bz2_block_test.cpp.
#include "formats/bz2_scan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compress_util.h"

namespace pretrain::bz2_scan_test {
namespace {

std::span<const uint8_t> as_bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// `size` zero bytes with `magic` written at bit `at` (counted from the first byte's top bit).
std::vector<uint8_t> with_magic(size_t size, uint64_t at, uint64_t magic) {
  std::vector<uint8_t> bytes(size, 0);
  for (unsigned i = 0; i < 48; ++i)
    if ((magic >> (47 - i)) & 1) bytes[(at + i) / 8] |= static_cast<uint8_t>(0x80 >> ((at + i) % 8));
  return bytes;
}

TEST(Bz2Scan, FindsMagicAtEveryBitOffset) {
  for (unsigned shift = 0; shift < 64; ++shift) {
    uint64_t at = 8 * 8 + shift;
    std::vector<uint8_t> bytes = with_magic(40, at, bz2::kBlockMagic);
    bz2::Magic m = bz2::find_magic(bytes, 0);
    EXPECT_EQ(m.kind, bz2::MagicKind::block);
    EXPECT_EQ(m.bit, at);
    EXPECT_EQ(bz2::find_magic(bytes, at + 1).kind, bz2::MagicKind::none);
    EXPECT_EQ(bz2::find_magic(bytes, at).bit, at);
  }
}

TEST(Bz2Scan, ReadBitsIsBigEndianAndZeroPastTheEnd) {
  const std::vector<uint8_t> bytes = {0xA5, 0x0F, 0xFF, 0x01};
  EXPECT_EQ(bz2::read_bits(bytes, 0, 0), 0u);
  EXPECT_EQ(bz2::read_bits(bytes, 0, 8), 0xA5u);
  EXPECT_EQ(bz2::read_bits(bytes, 0, 1), 1u);
  EXPECT_EQ(bz2::read_bits(bytes, 1, 3), 0b010u);
  EXPECT_EQ(bz2::read_bits(bytes, 4, 8), 0x50u);     // across a byte boundary
  EXPECT_EQ(bz2::read_bits(bytes, 0, 32), 0xA50FFF01u);
  EXPECT_EQ(bz2::read_bits(bytes, 24, 16), 0x0100u);  // the last byte, then zeros
  EXPECT_EQ(bz2::read_bits(bytes, 64, 8), 0u);        // wholly past the end
  std::vector<uint8_t> ones(10, 0xFF);
  EXPECT_EQ(bz2::read_bits(ones, 3, 57), (uint64_t{1} << 57) - 1);  // the widest read
}

// The end-of-stream magic is told from the block magic; the first at or after from_bit wins; a
// magic ending on the buffer's last bit is found; buffers too short for one find nothing.
TEST(Bz2Scan, BothMagicsFirstFromTheStartBitToTheLastBit) {
  std::vector<uint8_t> end = with_magic(20, 13, bz2::kStreamEndMagic);
  EXPECT_EQ(bz2::find_magic(end, 0).kind, bz2::MagicKind::stream_end);
  EXPECT_EQ(bz2::find_magic(end, 0).bit, 13u);

  std::vector<uint8_t> two = with_magic(40, 3, bz2::kBlockMagic);
  const std::vector<uint8_t> second = with_magic(40, 150, bz2::kStreamEndMagic);
  for (size_t i = 0; i < two.size(); ++i) two[i] |= second[i];
  EXPECT_EQ(bz2::find_magic(two, 0).bit, 3u);
  EXPECT_EQ(bz2::find_magic(two, 4).kind, bz2::MagicKind::stream_end);
  EXPECT_EQ(bz2::find_magic(two, 4).bit, 150u);
  EXPECT_EQ(bz2::find_magic(two, 151).kind, bz2::MagicKind::none);

  for (size_t size : {6, 7, 9, 13}) {  // the magic in the last 48 bits
    const uint64_t last = size * 8 - 48;
    std::vector<uint8_t> tail = with_magic(size, last, bz2::kBlockMagic);
    EXPECT_EQ(bz2::find_magic(tail, 0).bit, last) << size;
    EXPECT_EQ(bz2::find_magic(tail, last).bit, last) << size;
    EXPECT_EQ(bz2::find_magic(tail, last + 1).kind, bz2::MagicKind::none) << size;
    tail.pop_back();  // cut one byte: the magic no longer fits
    EXPECT_EQ(bz2::find_magic(tail, 0).kind, bz2::MagicKind::none) << size;
  }
  EXPECT_EQ(bz2::find_magic({}, 0).kind, bz2::MagicKind::none);
  EXPECT_EQ(bz2::find_magic(std::vector<uint8_t>(100, 0), 0).kind, bz2::MagicKind::none);
}

// A one-block stream: its block (magic to the end-of-stream magic) decodes to the text; cut short,
// shorter than its header or given as parts, it says why or gives the same bytes.
TEST(Bz2Scan, ReferenceDecodesOneBlockAndSaysWhyNot) {
  const std::string text = "the reference decoder frames one block as a stream of its own. " + std::string(300, 'x');
  const std::string file = testing::bz2_stream(text, 3);
  const auto bytes = as_bytes(file);
  const bz2::Magic block = bz2::find_magic(bytes, 0), end = bz2::find_magic(bytes, block.bit + 48);
  ASSERT_EQ(block.kind, bz2::MagicKind::block);
  EXPECT_EQ(block.bit, 32u) << "after \"BZh3\"";
  ASSERT_EQ(end.kind, bz2::MagicKind::stream_end);

  const bz2::BitRange whole{bytes, block.bit, end.bit};
  bz2::BlockResult r = bz2::decode_block_reference({&whole, 1}, 3);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.decoded, text);
  EXPECT_TRUE(r.error.empty());

  const uint64_t middle = block.bit + (end.bit - block.bit) / 2 + 3;  // parts split off a byte boundary
  const bz2::BitRange parts[] = {{bytes, block.bit, middle}, {bytes, middle, end.bit}};
  r = bz2::decode_block_reference(parts, 3);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.decoded, text);

  const bz2::BitRange cut{bytes, block.bit, middle};
  r = bz2::decode_block_reference({&cut, 1}, 3);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(r.decoded.empty()) << "nothing of a failed block is handed out";

  const bz2::BitRange header{bytes, block.bit, block.bit + 79};
  r = bz2::decode_block_reference({&header, 1}, 3);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "block shorter than its 10-byte header");

  std::string damaged = file;  // one bit of the block's stored CRC flipped
  const uint64_t crc_bit = block.bit + 48 + 5;
  damaged[crc_bit / 8] = static_cast<char>(damaged[crc_bit / 8] ^ (0x80 >> (crc_bit % 8)));
  const bz2::BitRange flipped{as_bytes(damaged), block.bit, end.bit};
  r = bz2::decode_block_reference({&flipped, 1}, 3);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("corrupt data"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace pretrain::bz2_scan_test
