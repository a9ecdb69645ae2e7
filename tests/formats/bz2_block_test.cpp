// Our bz2 block decoder (bz2::decode_block) against libbz2 (bz2::decode_block_reference), block by
// block: every block of the real dump samples; random, repetitive and tiny inputs compressed by
// libbz2 at levels 1 and 9; a block split into parts; damaged blocks (bit flips, truncation,
// extension, header fields out of range), where both must fail or both give the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/file.h"
#include "compress_util.h"
#include "formats/bz2_scan.h"
#include "test_util.h"

namespace pretrain::bz2_block_test {
namespace {

using testing::bz2_stream;

struct Block {
  uint64_t begin_bit = 0, end_bit = 0;  // block magic to the next magic
  int level = 9;
};

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The spans from each block magic to the next magic, with their stream's level (candidates: a
// chance magic makes two spans of one block, which both decoders must then refuse alike).
std::vector<Block> blocks_of(const std::string& file) {
  std::vector<Block> blocks;
  auto bytes = as_bytes(file);
  int level = file.size() >= 4 && file[3] >= '1' && file[3] <= '9' ? file[3] - '0' : 9;
  bz2::Magic m = bz2::find_magic(bytes, 0);
  while (m.kind != bz2::MagicKind::none) {
    bz2::Magic next = bz2::find_magic(bytes, m.bit + 48);
    if (m.kind == bz2::MagicKind::block) {
      uint64_t end = next.kind == bz2::MagicKind::none ? file.size() * 8 : next.bit;
      blocks.push_back({m.bit, end, level});
    } else {  // the next stream's header, if any, names its level
      size_t header = (m.bit + 80 + 7) / 8;
      if (header + 4 <= file.size() && file.compare(header, 3, "BZh") == 0) level = file[header + 3] - '0';
    }
    m = next;
  }
  return blocks;
}

struct Outcome {
  bz2::BlockResult ours, reference;
};

Outcome decode_both(std::span<const bz2::BitRange> parts, int level) {
  return {bz2::decode_block(parts, level), bz2::decode_block_reference(parts, level)};
}

Outcome decode_both(const std::string& file, const Block& b) {
  bz2::BitRange r{as_bytes(file), b.begin_bit, b.end_bit};
  return decode_both({&r, 1}, b.level);
}

// Both fail, or both succeed with the same bytes.
void expect_agree(const Outcome& o, const std::string& what) {
  ASSERT_EQ(o.ours.ok, o.reference.ok) << what << ": ours " << (o.ours.ok ? "ok" : o.ours.error) << ", libbz2 "
                                       << (o.reference.ok ? "ok" : o.reference.error);
  if (o.ours.ok) {
    ASSERT_EQ(o.ours.decoded.size(), o.reference.decoded.size()) << what;
    ASSERT_TRUE(o.ours.decoded == o.reference.decoded) << what;
  }
}

// Every block of a libbz2 stream of `text` decodes, both ways alike, to the text.
void expect_round_trip(const std::string& text, int level, const std::string& what) {
  std::string file = bz2_stream(text, level);
  std::string joined;
  auto blocks = blocks_of(file);
  for (size_t i = 0; i < blocks.size(); ++i) {
    Outcome o = decode_both(file, blocks[i]);
    ASSERT_TRUE(o.reference.ok) << what << " block " << i << ": " << o.reference.error;
    ASSERT_TRUE(o.ours.ok) << what << " level " << level << " block " << i << ": " << o.ours.error;
    expect_agree(o, what);
    joined += o.ours.decoded;
  }
  EXPECT_EQ(joined.size(), text.size()) << what << " level " << level;
  EXPECT_TRUE(joined == text) << what << " level " << level;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Runs of every length class the initial RLE stage treats apart: 1-3, exactly 4, 5-258 (one count
// byte), 259+ (several), and 255/256 around the count's limit; all 256 byte values.
std::string runs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  const size_t lengths[] = {1, 2, 3, 4, 5, 254, 255, 256, 258, 259, 260, 263, 1000, 5000};
  while (s.size() < n) {
    size_t len = rng() % 3 == 0 ? lengths[rng() % std::size(lengths)] : 1 + rng() % 8;
    s.append(len, static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 'a' + rng() % 3));
  }
  s.resize(n);
  return s;
}

std::string text_like(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> words;
  for (int i = 0; i < 300; ++i) {
    std::string w;
    for (unsigned k = 2 + rng() % 9; k > 0; --k) w += static_cast<char>('a' + rng() % 26);
    words.push_back(w);
  }
  words.push_back("Κατηγορία");
  words.push_back("日本語");
  words.push_back("{{cite web|url=}}");
  std::string s;
  while (s.size() < n) {
    s += words[rng() % words.size()];
    s += rng() % 15 == 0 ? "\n" : " ";
  }
  s.resize(n);
  return s;
}

TEST(Bz2Block, SharedDumpsEveryBlockAsLibbz2) {
  std::string dir = testing::shared_data_dir();
  if (dir.empty()) GTEST_SKIP() << "no shared data (set PRETRAIN_SHARED_DATA)";
  auto files = expand_inputs({dir + "/wikipedia/*.bz2"});
  if (files.empty()) GTEST_SKIP() << "no .bz2 under " << dir << "/wikipedia";
  size_t decoded = 0;
  for (const auto& path : files) {
    std::string file = read_file(path);
    auto blocks = blocks_of(file);
    for (size_t i = 0; i < blocks.size(); ++i) {
      Outcome o = decode_both(file, blocks[i]);
      expect_agree(o, path + " block " + std::to_string(i));
      decoded += o.ours.ok;
    }
  }
  EXPECT_GT(decoded, 10u);
}

TEST(Bz2Block, LibbzStreamsAtLevels1And9) {
  for (int level : {1, 9}) {
    expect_round_trip(random_bytes(250000, 1), level, "random");
    expect_round_trip(runs(400000, 2), level, "runs");
    expect_round_trip(text_like(1100000, 3), level, "text");
    expect_round_trip(std::string(1, 'x'), level, "one byte");
    expect_round_trip(std::string(4, 'x'), level, "four equal bytes");
    expect_round_trip(std::string(5, 'x'), level, "five equal bytes");
    expect_round_trip("ab", level, "two bytes");
    expect_round_trip(std::string(2000000, '\0'), level, "2 MB of zeros");
    expect_round_trip(std::string(255 + 4, 'y') + "z", level, "a run of 259");
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    expect_round_trip(all, level, "all byte values");
    std::string all_runs;
    for (int i = 0; i < 256; ++i) all_runs.append(static_cast<size_t>(1 + i % 300), static_cast<char>(255 - i));
    expect_round_trip(all_runs, level, "runs of all byte values");
  }
}

// The inverse BWT follows several chains from 8192 symbols on (starts evenly spaced in T, plus
// origPtr): sizes around that threshold and the largest level-9 block, random bytes (no runs, so
// the block holds exactly this many symbols).
TEST(Bz2Block, BlockSizesAroundTheChainThreshold) {
  for (size_t n : {8191, 8192, 8193, 10000, 16383, 16384, 65536, 899981})
    expect_round_trip(random_bytes(n, static_cast<uint32_t>(n)), 9, "random " + std::to_string(n));
}

// origPtr on one of the evenly spaced chain starts (8192 symbols: starts at 2048, 4096, 6144),
// where origPtr's own start is the only one there. Found by trying seeds: 2509 is the first
// (libbz2's output is deterministic), so the search starts just before it.
TEST(Bz2Block, OrigPtrOnAChainStart) {
  int found = 0;
  for (uint32_t seed = 2500; seed < 40000 && found < 1; ++seed) {
    std::string text = random_bytes(8192, seed);
    std::string file = bz2_stream(text, 9);
    auto blocks = blocks_of(file);
    ASSERT_EQ(blocks.size(), 1u);
    uint64_t orig_ptr = bz2::read_bits(as_bytes(file), blocks[0].begin_bit + 81, 24);
    if (orig_ptr % 2048 != 0 || orig_ptr == 0) continue;
    ++found;
    Outcome o = decode_both(file, blocks[0]);
    ASSERT_TRUE(o.ours.ok) << "seed " << seed << ": " << o.ours.error;
    expect_agree(o, "seed " + std::to_string(seed));
    EXPECT_TRUE(o.ours.decoded == text);
  }
  EXPECT_GT(found, 0);
}

TEST(Bz2Block, BlockInSeveralPartsAsInOne) {
  std::string file = bz2_stream(text_like(300000, 4), 9);
  auto blocks = blocks_of(file);
  ASSERT_EQ(blocks.size(), 1u);
  std::mt19937 rng(5);
  const Block& b = blocks[0];
  std::string whole = decode_both(file, b).ours.decoded;
  ASSERT_FALSE(whole.empty());
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<uint64_t> cuts = {b.begin_bit, b.end_bit};
    for (int k = 0; k < 1 + trial % 3; ++k) cuts.push_back(b.begin_bit + rng() % (b.end_bit - b.begin_bit));
    std::sort(cuts.begin(), cuts.end());
    std::vector<bz2::BitRange> parts;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) parts.push_back({as_bytes(file), cuts[k], cuts[k + 1]});
    Outcome o = decode_both(parts, b.level);
    ASSERT_TRUE(o.ours.ok) << o.ours.error;
    expect_agree(o, "parts");
    EXPECT_TRUE(o.ours.decoded == whole);
  }
}

TEST(Bz2Block, DamagedBlocksFailBothWaysOrAgree) {
  std::mt19937 rng(6);
  for (int level : {1, 9}) {
    std::string original = bz2_stream(text_like(150000, 7) + runs(100000, 8), level);
    auto blocks = blocks_of(original);
    ASSERT_FALSE(blocks.empty());
    int failed = 0, not_a_cycle = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const Block& b = blocks[rng() % blocks.size()];
      std::string file = original;
      Block damaged = b;
      int kind = trial % 4;
      if (kind <= 1) {  // one or a few bit flips anywhere after the magic
        for (int k = 0; k <= kind * 2; ++k) {
          uint64_t bit = b.begin_bit + 48 + rng() % (b.end_bit - b.begin_bit - 48);
          file[bit / 8] = static_cast<char>(file[bit / 8] ^ (0x80 >> (bit % 8)));
        }
      } else if (kind == 2) {  // truncated
        damaged.end_bit = b.begin_bit + rng() % (b.end_bit - b.begin_bit);
      } else {  // a few bits too many or too few at the end
        damaged.end_bit = b.end_bit - 8 + rng() % 17;
        if (damaged.end_bit == b.end_bit) damaged.end_bit += 1;
      }
      Outcome o = decode_both(file, damaged);
      expect_agree(o, "trial " + std::to_string(trial));
      failed += !o.ours.ok;
      if (!o.ours.ok) {
        EXPECT_FALSE(o.ours.error.empty());
      }
      not_a_cycle += o.ours.error.find("not one cycle") != std::string::npos;
    }
    EXPECT_GT(failed, 250);
    EXPECT_GT(not_a_cycle, 0);  // the chains' own check was reached
  }
}

// Sets `count` bits at `bit` of `file` to `value`.
void set_bits(std::string& file, uint64_t bit, unsigned count, uint64_t value) {
  for (unsigned k = 0; k < count; ++k, ++bit) {
    auto mask = static_cast<char>(0x80 >> (bit % 8));
    if ((value >> (count - 1 - k)) & 1) file[bit / 8] = static_cast<char>(file[bit / 8] | mask);
    else file[bit / 8] = static_cast<char>(file[bit / 8] & ~mask);
  }
}

TEST(Bz2Block, HeaderFieldsOutOfRangeAreErrors) {
  std::string text = "hello, block header";
  std::string original = bz2_stream(text, 9);
  auto blocks = blocks_of(original);
  ASSERT_EQ(blocks.size(), 1u);
  const uint64_t b = blocks[0].begin_bit;
  const uint64_t orig_ptr = b + 48 + 32 + 1, map = orig_ptr + 24;
  // After the 16-bit map of maps, 16 bits per map in use; then nGroups (3) and nSelectors (15).
  uint64_t used16 = bz2::read_bits(as_bytes(original), map, 16);
  uint64_t groups = map + 16 + 16 * static_cast<uint64_t>(__builtin_popcountll(used16));
  uint64_t lengths = groups + 3 + 15;  // past the selectors, each a 0-terminated run of 1s
  for (uint64_t n = bz2::read_bits(as_bytes(original), groups + 3, 15); n > 0; --n)
    while (bz2::read_bits(as_bytes(original), lengths++, 1) == 1) {
    }
  struct Case {
    const char* what;
    uint64_t bit;
    unsigned count;
    uint64_t value;
  };
  const Case cases[] = {
      {"origPtr = 0xFFFFFF", orig_ptr, 24, 0xFFFFFF},
      {"origPtr = block length", orig_ptr, 24, text.size()},
      {"no byte values in use", map, 16, 0},
      {"one Huffman group", groups, 3, 1},
      {"seven Huffman groups", groups, 3, 7},
      {"no selectors", groups + 3, 15, 0},
      {"32767 selectors", groups + 3, 15, 0x7FFF},
      {"stored CRC off by one bit", b + 48 + 31, 1, ~bz2::read_bits(as_bytes(original), b + 48 + 31, 1) & 1},
      {"first code length 0", lengths, 5, 0},
      {"first code length 21", lengths, 5, 21},
      {"first code length 20, then one up", lengths, 7, 20 << 2 | 0b10},
  };
  for (const Case& c : cases) {
    std::string file = original;
    set_bits(file, c.bit, c.count, c.value);
    Outcome o = decode_both(file, blocks[0]);
    expect_agree(o, c.what);
    EXPECT_FALSE(o.ours.ok) << c.what;
    EXPECT_FALSE(o.ours.error.empty()) << c.what;
  }
  // Unchanged, it decodes.
  Outcome o = decode_both(original, blocks[0]);
  ASSERT_TRUE(o.ours.ok) << o.ours.error;
  EXPECT_EQ(o.ours.decoded, text);
}

// Randomised blocks (bzip2 0.9.0) go to libbz2: the flag set on a normal block changes bytes
// from position 618 on (libbz2's first random gap), so a short block still decodes, a long one
// fails its CRC, alike.
TEST(Bz2Block, RandomisedBlocksAsLibbz2) {
  for (size_t size : {100, 5000}) {
    std::string file = bz2_stream(text_like(size, 9), 9);
    auto blocks = blocks_of(file);
    ASSERT_EQ(blocks.size(), 1u);
    set_bits(file, blocks[0].begin_bit + 80, 1, 1);
    Outcome o = decode_both(file, blocks[0]);
    expect_agree(o, "randomised, " + std::to_string(size) + " bytes");
    EXPECT_EQ(o.ours.ok, size < 618);
  }
}

TEST(Bz2Block, TooShortOrNotABlock) {
  std::string file = bz2_stream("short", 9);
  bz2::BitRange header_only{as_bytes(file), 32, 32 + 79};
  EXPECT_FALSE(bz2::decode_block({&header_only, 1}, 9).ok);
  bz2::BitRange not_block{as_bytes(file), 0, file.size() * 8};  // starts at "BZh9"
  Outcome o = decode_both({&not_block, 1}, 9);
  expect_agree(o, "stream header instead of a block");
  EXPECT_FALSE(o.ours.ok);
}

}  // namespace
}  // namespace pretrain::bz2_block_test
