// Bz2Reader against `bzip2 -dc`: files from bzip2 -1/-9, pbzip2 (multistream), lbzip2, concatenated
// streams, the real dump samples; chance magics; truncated, corrupt and trailing data; plain input
// and pipes; the same bytes for every thread count and read size.
//
// Chance magics: a real file whose compressed bits contain the 48-bit magic at a non-boundary
// position cannot be made on purpose (the Huffman-coded data is not steerable and a chance hit is
// ~2^-48 per bit). So the test goes two ways: (1) the reader's test hook adds fake candidates (block
// and end-of-stream) in the middle of real blocks, exactly what a chance occurrence looks like to
// the scanner, and the output must still be exact; (2) the magic is written into a block's payload,
// which the scan then finds for real; that corrupts the block, so a clean Error naming an offset is
// expected, with every block before it delivered.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "common/error.h"
#include "common/file.h"
#include "common/progress.h"
#include "formats/bz2_parallel.h"
#include "formats/bz2_scan.h"
#include "test_util.h"

namespace pretrain::bz2_parallel_test {
namespace {

using testing::TempDir;

bool have_tool(const std::string& tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

void sh(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

// Varied, deterministic text: words, numbers, markup-like runs (RLE stage), Greek and CJK.
std::string make_text(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> words;
  const char* extra[] = {"αβγ", "Κατηγορία", "日本語", "维基", "&amp;", "[[link]]", "{{cite}}", "=====", "    "};
  for (const char* e : extra) words.push_back(e);
  for (int i = 0; i < 400; ++i) {
    std::string w;
    for (unsigned n = 2 + rng() % 9; n > 0; --n) w += static_cast<char>('a' + rng() % 26);
    words.push_back(w);
  }
  std::string text;
  while (text.size() < size) {
    unsigned r = rng() % 100;
    if (r < 80) text += words[rng() % words.size()];
    else if (r < 90) text += std::to_string(rng() % 100000);
    else if (r < 95) text += std::string(1 + rng() % 300, "x-= \n"[rng() % 5]);
    else text += "\n";
    text += rng() % 12 == 0 ? ".\n" : " ";
  }
  text.resize(size);
  return text;
}

struct Decoded {
  std::string bytes;
  std::vector<size_t> pieces;
  bool failed = false;
  std::string error;
  int64_t error_offset = -1;
};

Decoded decode(const std::string& path, int threads, Bz2ReaderOptions options = {}) {
  options.threads = threads;
  Decoded d;
  try {
    Bz2Reader reader(path, options);
    reader.for_each_piece([&](std::string_view b) {
      d.bytes.append(b);
      d.pieces.push_back(b.size());
    });
  } catch (const Error& e) {
    d.failed = true;
    d.error = e.what();
    d.error_offset = e.where().offset;
  }
  return d;
}

std::string bzip2_dc(const TempDir& dir, const std::string& path) {
  std::string out = dir.file("reference.out");
  EXPECT_EQ(std::system(("bzip2 -dc '" + path + "' > " + out).c_str()), 0);
  return read_file(out);
}

// Every candidate magic in a file, in order.
std::vector<bz2::Magic> magics(const std::string& data) {
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  std::vector<bz2::Magic> all;
  for (bz2::Magic m = bz2::find_magic(bytes, 0); m.kind != bz2::MagicKind::none; m = bz2::find_magic(bytes, m.bit + 1))
    all.push_back(m);
  return all;
}

void expect_same_as_bzip2(const TempDir& dir, const std::string& path, std::vector<int> thread_counts = {1, 2, 4}) {
  std::string reference = bzip2_dc(dir, path);
  for (int threads : thread_counts) {
    Decoded d = decode(path, threads);
    EXPECT_FALSE(d.failed) << d.error;
    EXPECT_EQ(d.bytes.size(), reference.size()) << path << " threads " << threads;
    EXPECT_TRUE(d.bytes == reference) << path << " threads " << threads;
  }
}

class Bz2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    Progress::set_enabled(false);
    if (!have_tool("bzip2")) GTEST_SKIP() << "bzip2 not installed";
    text_path_ = dir_.file("text.xml");
    write_file_atomic(text_path_, make_text(3 << 19, 42));
  }
  // Compresses the text with `command` (reading stdin, writing stdout) into `name`.
  std::string compress(const std::string& command, const std::string& name, const std::string& input = "") {
    std::string out = dir_.file(name);
    sh(command + " < '" + (input.empty() ? text_path_ : input) + "' > '" + out + "'");
    return out;
  }
  TempDir dir_;
  std::string text_path_;
};

TEST_F(Bz2Test, Bzip2LevelsMatchBzip2) {
  expect_same_as_bzip2(dir_, compress("bzip2 -1", "l1.bz2"));
  expect_same_as_bzip2(dir_, compress("bzip2 -9", "l9.bz2"));
  expect_same_as_bzip2(dir_, compress("bzip2 -5", "l5.bz2"));
}

TEST_F(Bz2Test, Pbzip2MultistreamMatchesBzip2) {
  if (!have_tool("pbzip2")) GTEST_SKIP() << "pbzip2 not installed";
  std::string path = compress("pbzip2 -c -p2 -b3", "p.bz2");
  expect_same_as_bzip2(dir_, path);
  Bz2Reader reader(path, {.threads = 2});
  reader.for_each_piece([](std::string_view) {});
  EXPECT_GT(reader.streams(), 1u);
}

TEST_F(Bz2Test, Lbzip2MatchesBzip2) {
  if (!have_tool("lbzip2")) GTEST_SKIP() << "lbzip2 not installed";
  expect_same_as_bzip2(dir_, compress("lbzip2 -c -n2 -9", "lb9.bz2"));
  expect_same_as_bzip2(dir_, compress("lbzip2 -c -n2 -1", "lb1.bz2"));
}

TEST_F(Bz2Test, ConcatenatedStreamsWithEmptyOnes) {
  std::string small = dir_.file("small.txt"), empty = dir_.file("empty.txt");
  write_file_atomic(small, make_text(250000, 7));
  write_file_atomic(empty, "");
  std::string a = compress("bzip2 -2", "a.bz2"), b = compress("bzip2 -9", "b.bz2", small),
              e = compress("bzip2", "e.bz2", empty);
  EXPECT_EQ(file_size(e), 14u);
  std::string all = dir_.file("all.bz2");
  sh("cat " + e + " " + a + " " + e + " " + b + " " + e + " > " + all);
  expect_same_as_bzip2(dir_, all);
  Bz2Reader reader(all, {.threads = 2});
  reader.for_each_piece([](std::string_view) {});
  EXPECT_EQ(reader.streams(), 5u);
  EXPECT_TRUE(reader.is_bz2());
  EXPECT_EQ(reader.compressed_consumed(), file_size(all));
}

TEST(Bz2Real, SamplesMatchBzip2) {
  std::string dir = testing::shared_data_dir();
  if (dir.empty() || !have_tool("bzip2")) GTEST_SKIP() << "no shared data or bzip2";
  TempDir tmp;
  auto files = expand_inputs({dir + "/wikipedia/*.bz2"});
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) expect_same_as_bzip2(tmp, f, {3});
}

TEST(Bz2Real, MultistreamSampleHasSevenStreams) {
  PRETRAIN_REQUIRE_SHARED(path, "wikipedia/elwikivoyage-pages-articles-multistream-p2566p2583.xml.bz2");
  PRETRAIN_REQUIRE_SHARED(twin, "wikipedia/elwikivoyage-pages-articles-p2566p2583.xml.bz2");
  Bz2Reader reader(path, {.threads = 2});
  std::string out;
  reader.for_each_piece([&](std::string_view b) { out.append(b); });
  EXPECT_EQ(reader.streams(), 7u);
  EXPECT_EQ(out.size(), 71809u);
  EXPECT_EQ(decode(twin, 2).bytes, out);
}

TEST_F(Bz2Test, FakeCandidatesInsideBlocksAreRejected) {
  std::string path = compress("bzip2 -1", "fake.bz2");
  std::string data = read_file(path);
  auto found = magics(data);
  ASSERT_GE(found.size(), 4u);
  std::string reference = decode(path, 1).bytes;
  // One fake block magic in block 0, two in block 1, a fake end of stream in block 2.
  Bz2ReaderOptions options;
  auto mid = [&](size_t i, double f) { return found[i].bit + static_cast<uint64_t>((found[i + 1].bit - found[i].bit) * f); };
  options.fake_block_magics = {mid(0, 0.5), mid(1, 0.3), mid(1, 0.7)};
  options.fake_stream_ends = {mid(2, 0.5) + 3};
  for (int threads : {1, 3}) {
    Decoded d = decode(path, threads, options);
    EXPECT_FALSE(d.failed) << d.error;
    EXPECT_TRUE(d.bytes == reference);
  }
}

TEST_F(Bz2Test, MagicWrittenIntoPayloadIsACleanError) {
  std::string path = compress("bzip2 -1", "payload.bz2");
  std::string data = read_file(path);
  auto found = magics(data);
  ASSERT_GE(found.size(), 4u);
  Decoded good = decode(path, 1);
  for (uint64_t offset : {uint64_t{1000}, uint64_t{7777}, uint64_t{30001}}) {
    uint64_t at = found[1].bit + offset;  // inside block 1's payload
    ASSERT_LT(at + 48, found[2].bit);
    std::string bad = data;
    for (unsigned i = 0; i < 48; ++i) {
      auto& byte = reinterpret_cast<uint8_t&>(bad[(at + i) / 8]);
      uint8_t mask = static_cast<uint8_t>(0x80 >> ((at + i) % 8));
      byte = ((bz2::kBlockMagic >> (47 - i)) & 1) ? byte | mask : byte & ~mask;
    }
    std::string bad_path = dir_.file("bad.bz2");
    write_file_atomic(bad_path, bad);
    for (int threads : {1, 2}) {
      Decoded d = decode(bad_path, threads);
      ASSERT_TRUE(d.failed);
      EXPECT_EQ(d.error_offset, static_cast<int64_t>(found[1].bit / 8)) << d.error;
      EXPECT_EQ(d.bytes, good.bytes.substr(0, good.pieces[0]));
    }
  }
}

TEST_F(Bz2Test, TruncatedFilesDeliverEveryCompleteBlock) {
  std::string small = dir_.file("small.txt");
  write_file_atomic(small, make_text(450000, 3));
  std::string path = compress("bzip2 -1", "trunc.bz2", small);
  std::string data = read_file(path);
  Decoded good = decode(path, 1);
  auto found = magics(data);  // block starts, then the end of stream
  ASSERT_EQ(found.size(), good.pieces.size() + 1);
  std::vector<uint64_t> cuts;
  for (uint64_t cut = 1; cut < data.size(); cut += data.size() / 37) cuts.push_back(cut);
  for (const auto& m : found)
    for (int64_t d : {-1, 0, 1, 3, 6, 7, 10}) cuts.push_back(m.bit / 8 + d);
  cuts.push_back(data.size() - 1);
  for (uint64_t cut : cuts) {
    if (cut < 4 || cut >= data.size()) continue;  // "B", "BZ", "BZh" are not bz2 yet: plain
    std::string cut_path = dir_.file("cut.bz2");
    write_file_atomic(cut_path, data.substr(0, cut));
    Decoded d = decode(cut_path, 2);
    ASSERT_TRUE(d.failed) << "cut at " << cut;
    EXPECT_GE(d.error_offset, 0);
    EXPECT_LE(static_cast<uint64_t>(d.error_offset), cut);
    size_t expected = 0;  // blocks whose bits end (where the next magic starts) before the cut
    for (size_t i = 0; i < good.pieces.size(); ++i)
      if (found[i + 1].bit <= cut * 8) expected += good.pieces[i];
    EXPECT_EQ(d.bytes.size(), expected) << "cut at " << cut << ": " << d.error;
    EXPECT_EQ(d.bytes, good.bytes.substr(0, d.bytes.size())) << "cut at " << cut;
  }
}

TEST_F(Bz2Test, CorruptByteNamesTheBlock) {
  std::string path = compress("bzip2 -1", "corrupt.bz2");
  std::string data = read_file(path);
  Decoded good = decode(path, 1);
  auto found = magics(data);
  for (size_t block : {size_t{0}, size_t{3}, size_t{7}}) {
    ASSERT_LT(block + 1, found.size());
    std::string bad = data;
    uint64_t byte = (found[block].bit + found[block + 1].bit) / 16;
    bad[byte] = static_cast<char>(bad[byte] ^ 0x5A);
    std::string bad_path = dir_.file("bad.bz2");
    write_file_atomic(bad_path, bad);
    Decoded d = decode(bad_path, 2);
    ASSERT_TRUE(d.failed);
    EXPECT_EQ(d.error_offset, static_cast<int64_t>(found[block].bit / 8)) << d.error;
    size_t before = 0;
    for (size_t i = 0; i < block; ++i) before += good.pieces[i];
    EXPECT_EQ(d.bytes, good.bytes.substr(0, before));
  }
  // A wrong stream CRC: every block is fine, then the end-of-stream marker fails.
  std::string bad = data;
  uint64_t crc_bit = found.back().bit + 48 + 5;
  bad[crc_bit / 8] = static_cast<char>(bad[crc_bit / 8] ^ (0x80 >> (crc_bit % 8)));
  write_file_atomic(dir_.file("crc.bz2"), bad);
  Decoded d = decode(dir_.file("crc.bz2"), 2);
  ASSERT_TRUE(d.failed);
  EXPECT_NE(d.error.find("stream CRC"), std::string::npos) << d.error;
  EXPECT_TRUE(d.bytes == good.bytes);
}

TEST_F(Bz2Test, TrailingDataAfterTheLastStream) {
  std::string small = dir_.file("small.txt");
  write_file_atomic(small, make_text(120000, 5));
  std::string path = compress("bzip2 -9", "t.bz2", small);
  std::string data = read_file(path), text = read_file(small);
  write_file_atomic(dir_.file("garbage.bz2"), data + "this is not bz2\n");
  Decoded d = decode(dir_.file("garbage.bz2"), 2);  // bzip2 -d ignores it with a warning
  EXPECT_FALSE(d.failed) << d.error;
  EXPECT_TRUE(d.bytes == text);
  for (std::string tail : {"B", "BZ", "BZh", "BZh9", "BZh9xxxxxxxxxxxx"}) {
    write_file_atomic(dir_.file("tail.bz2"), data + tail);
    Decoded t = decode(dir_.file("tail.bz2"), 2);
    EXPECT_TRUE(t.failed) << tail;
    EXPECT_TRUE(t.bytes == text) << tail;
  }
  write_file_atomic(dir_.file("header.bz2"), "BZh9");
  EXPECT_TRUE(decode(dir_.file("header.bz2"), 1).failed);
  write_file_atomic(dir_.file("notblock.bz2"), "BZh91AY&SX0000000000000000000000000");
  Decoded n = decode(dir_.file("notblock.bz2"), 1);
  EXPECT_TRUE(n.failed);
  EXPECT_EQ(n.error_offset, 4);
}

TEST_F(Bz2Test, PlainInputPassesThrough) {
  std::string text = read_file(text_path_);
  Decoded d = decode(text_path_, 2, {.read_size = 100000});
  EXPECT_FALSE(d.failed);
  EXPECT_TRUE(d.bytes == text);
  write_file_atomic(dir_.file("empty.xml"), "");
  Decoded e = decode(dir_.file("empty.xml"), 1);
  EXPECT_FALSE(e.failed);
  EXPECT_TRUE(e.bytes.empty());
  write_file_atomic(dir_.file("bz.xml"), "BZh");  // not a bz2 header
  EXPECT_EQ(decode(dir_.file("bz.xml"), 1).bytes, "BZh");
}

TEST_F(Bz2Test, ReadsPipesAndStdin) {
  std::string path = compress("bzip2 -3", "pipe.bz2");
  std::string data = read_file(path), reference = bzip2_dc(dir_, path);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    for (size_t at = 0; at < data.size();) {
      ssize_t n = ::write(fds[1], data.data() + at, std::min<size_t>(data.size() - at, 65536));
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  std::string out;
  {
    Bz2Reader reader(fds[0], "pipe", {.threads = 2, .read_size = 200000});
    EXPECT_EQ(reader.compressed_size(), 0u);
    reader.for_each_piece([&](std::string_view b) { out.append(b); });
  }
  writer.join();
  ::close(fds[0]);
  EXPECT_TRUE(out == reference);

  int saved = ::dup(STDIN_FILENO);
  FILE* in = std::fopen(path.c_str(), "rb");
  ASSERT_NE(in, nullptr);
  ::dup2(::fileno(in), STDIN_FILENO);
  Decoded d = decode("-", 2);
  ::dup2(saved, STDIN_FILENO);
  ::close(saved);
  std::fclose(in);
  EXPECT_TRUE(d.bytes == reference) << d.error;
}

TEST_F(Bz2Test, SameBytesForEveryThreadCountAndReadSize) {
  std::string path = compress("bzip2 -1", "det.bz2");
  std::string reference = bzip2_dc(dir_, path);
  for (size_t read_size : {size_t{4096}, size_t{150001}, size_t{8} << 20})
    for (int threads : {1, 2, 4, 8}) {
      Decoded d = decode(path, threads, {.max_in_flight = static_cast<size_t>(threads), .read_size = read_size});
      EXPECT_FALSE(d.failed) << d.error;
      EXPECT_TRUE(d.bytes == reference) << "threads " << threads << " read size " << read_size;
    }
}

// Range mode, as mpirun wikiprep uses it: rank r reads from byte cuts[r] and keeps the pieces
// before the first non-empty piece that starts at or after cuts[r + 1] (plain input: the bytes
// before that byte). The ranges joined must be the whole output, whatever the cuts.
std::string decode_range(const std::string& path, uint64_t begin, uint64_t end, bool plain,
                         Bz2ReaderOptions options = {}) {
  options.start_byte = begin;
  options.threads = 2;
  Bz2Reader reader(path, options);
  std::string out;
  bool done = false;
  for (auto piece = reader.next_piece(); piece && !done; piece = reader.next_piece()) {
    std::string_view bytes = piece->bytes();
    uint64_t piece_begin = piece->compressed_begin_bit() / 8;
    if (plain && piece_begin + bytes.size() > end) {
      bytes = bytes.substr(0, end > piece_begin ? end - piece_begin : 0);
      done = true;
    } else if (!plain && !bytes.empty() && piece->compressed_begin_bit() >= end * 8) {
      break;
    }
    out.append(bytes);
    piece->check();
  }
  return out;
}

void expect_ranges_join(const std::string& path, const std::string& reference, bool plain, uint32_t seed,
                        const Bz2ReaderOptions& options = {}) {
  uint64_t size = file_size(path);
  std::mt19937_64 rng(seed);
  for (int ranks : {2, 3, 5, 16}) {
    std::vector<uint64_t> cuts = {0};
    for (int r = 1; r < ranks; ++r) cuts.push_back(rng() % size);
    std::sort(cuts.begin(), cuts.end());
    cuts.push_back(size);
    std::string joined;
    for (int r = 0; r < ranks; ++r) joined += decode_range(path, cuts[size_t(r)], cuts[size_t(r) + 1], plain, options);
    EXPECT_EQ(joined.size(), reference.size()) << path << " ranks " << ranks;
    EXPECT_TRUE(joined == reference) << path << " ranks " << ranks;
  }
}

TEST_F(Bz2Test, RangesJoinToTheWholeOutput) {
  std::string single = compress("bzip2 -1", "range1.bz2");
  expect_ranges_join(single, bzip2_dc(dir_, single), false, 1);
  // Several streams (of several blocks each): ranges start inside streams whose CRC they cannot
  // check, and in stream headers.
  std::string multi = dir_.file("range-multi.bz2");
  sh("head -c 300000 '" + text_path_ + "' | bzip2 -1 > '" + multi + "'");
  sh("tail -c +300001 '" + text_path_ + "' | head -c 500000 | bzip2 -2 >> '" + multi + "'");
  sh("tail -c +800001 '" + text_path_ + "' | bzip2 -1 >> '" + multi + "'");
  expect_ranges_join(multi, bzip2_dc(dir_, multi), false, 2);
  expect_ranges_join(text_path_, read_file(text_path_), true, 3);
}

TEST_F(Bz2Test, RangesStartRightAtBlocksAndNearChanceMagics) {
  std::string path = compress("bzip2 -1", "range-fake.bz2");
  std::string data = read_file(path);
  std::string reference = bzip2_dc(dir_, path);
  auto found = magics(data);
  ASSERT_GE(found.size(), 4u);
  // Fake candidates in every block, some just after a range's start, in the middle, and just
  // before the next real block: a range must start at the next real block, and that block's
  // range (which a fake cuts) must still come out whole.
  Bz2ReaderOptions options;
  for (size_t i = 0; i + 1 < found.size(); ++i) {
    uint64_t a = found[i].bit, b = found[i + 1].bit;
    options.fake_block_magics.push_back(a + 1000);
    options.fake_block_magics.push_back(a + (b - a) / 2);
  }
  std::sort(options.fake_block_magics.begin(), options.fake_block_magics.end());
  for (size_t i = 1; i + 1 < found.size(); ++i) {
    uint64_t block_byte = found[i].bit / 8;
    for (uint64_t cut : {block_byte - 1, block_byte, block_byte + 1, (found[i].bit + 1000) / 8 - 2}) {
      std::string joined = decode_range(path, 0, cut, false, options) +
                           decode_range(path, cut, file_size(path), false, options);
      EXPECT_TRUE(joined == reference) << "cut at byte " << cut;
    }
  }
}

TEST_F(Bz2Test, RangeOfAPipeIsAUsageError) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_THROW(Bz2Reader(fds[0], "pipe", {.start_byte = 10}), UsageError);
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace pretrain::bz2_parallel_test
