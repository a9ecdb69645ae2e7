// open_byte_source against the libraries that wrote the input: plain, gzip, zstd and bz2 files,
// single and multi-member/frame/stream, made here with zlib, libzstd and libbz2, decode to the
// bytes they were made from whatever the file is called; truncated and corrupt files are an Error
// naming the file and an offset; the serial bz2 source and Bz2Reader give the same bytes.
#include "formats/compressed_input.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "compress_util.h"
#include "formats/bz2_parallel.h"
#include "test_util.h"

namespace pretrain::compressed_input_test {
namespace {

using testing::bz2_stream;
using testing::gzip_member;
using testing::TempDir;
using testing::zstd_frame;

// Text-like bytes (words, newlines) that compress well, deterministic per seed.
std::string make_text(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < size) {
    for (unsigned n = 1 + rng() % 9; n > 0; --n) text += static_cast<char>('a' + rng() % 26);
    text += rng() % 10 == 0 ? "\n" : rng() % 17 == 0 ? "αβγ 日本語 " : " ";
  }
  text.resize(size);
  return text;
}

// Bytes that do not compress: the compressed file is about as long as the text.
std::string make_noise(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

struct Kind {
  const char* name;  // the compression open_byte_source reports
  std::string (*compress)(std::string_view);
};
const Kind kKinds[] = {
    {"gz", gzip_member},
    {"zst", zstd_frame},
    {"bz2", [](std::string_view t) { return bz2_stream(t); }},
};

// Every decoded byte of `path`, read `chunk` bytes at a time.
std::string read_all(const std::string& path, size_t chunk = 4096, std::string* compression = nullptr) {
  std::string kind;
  auto source = open_byte_source(path, kind);
  if (compression) *compression = kind;
  std::string out, buf(chunk, '\0');
  while (size_t n = source->read(buf.data(), buf.size())) out.append(buf.data(), n);
  EXPECT_EQ(source->read(buf.data(), buf.size()), 0u) << "the end stays the end";
  return out;
}

// `file` written to `path` reads back, `chunk` bytes at a time, as `text`, and open_byte_source
// reports `kind` ("" for plain bytes).
void expect_reads_as(const std::string& path, const std::string& file, const std::string& text, const std::string& kind,
                     size_t chunk = 4096) {
  write_file_atomic(path, file);
  std::string reported = "?";
  EXPECT_EQ(read_all(path, chunk, &reported), text) << path;
  EXPECT_EQ(reported, kind) << path;
}

// The Error reading `path` ends with; fails the test when there is none.
Error read_error(const std::string& path) {
  try {
    read_all(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << path << ": read without an error";
  return Error("none");
}

void expect_error_at_offset(const std::string& path, uint64_t file_size) {
  Error e = read_error(path);
  EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  EXPECT_GE(e.where().offset, 0) << e.what();
  EXPECT_LE(e.where().offset, static_cast<int64_t>(file_size)) << e.what();
}

TEST(CompressedInput, PlainFilesReadAsTheyAre) {
  TempDir dir;
  std::string text = make_text(300000, 1);
  expect_reads_as(dir.file("plain.txt"), text, text, "");
}

TEST(CompressedInput, EachKindDecodesToTheOriginalBytes) {
  TempDir dir;
  std::string text = make_text(700000, 2);
  for (const Kind& k : kKinds) expect_reads_as(dir.file(std::string("one.") + k.name), k.compress(text), text, k.name, 65536);
}

TEST(CompressedInput, MultiMemberFramesAndStreamsDecodeOneAfterAnother) {
  // As pigz / bgzip, zstd of concatenated files, pbzip2 / wikiextractor --compress write them;
  // one part is empty, which a concatenation of an empty file gives.
  TempDir dir;
  std::vector<std::string> parts = {make_text(150000, 3), "", make_text(90001, 4), "x"};
  std::string text;
  for (const auto& p : parts) text += p;
  for (const Kind& k : kKinds) {
    std::string file;
    for (const auto& p : parts) file += k.compress(p);
    expect_reads_as(dir.file(std::string("multi.") + k.name), file, text, k.name, 10000);
  }
}

TEST(CompressedInput, Bz2StreamsOfSeveralBlocksAndLevels) {
  TempDir dir;
  std::string a = make_text(350000, 5), b = make_text(120000, 6);  // level 1: 100 kB blocks
  std::string path = dir.file("blocks.bz2");
  write_file_atomic(path, bz2_stream(a, 1) + bz2_stream(b, 9));
  EXPECT_EQ(read_all(path), a + b);
}

TEST(CompressedInput, TinyAndHugeReads) {
  TempDir dir;
  std::string text = make_text(20000, 7);
  for (const Kind& k : kKinds) {
    std::string path = dir.file(std::string("t.") + k.name);
    write_file_atomic(path, k.compress(text) + k.compress(text));
    EXPECT_EQ(read_all(path, 1), text + text) << k.name;

    // More than a 32-bit count can hold: the decoders' counts must not wrap. The buffer is
    // reserved, not touched, beyond the bytes written.
    const size_t huge = (size_t{1} << 32) + 7;
    void* mem = ::mmap(nullptr, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    std::string kind, got;
    auto source = open_byte_source(path, kind);
    while (size_t n = source->read(static_cast<char*>(mem), huge)) got.append(static_cast<char*>(mem), n);
    ::munmap(mem, huge);
    EXPECT_EQ(got, text + text) << k.name;

    char byte = 0;
    EXPECT_EQ(open_byte_source(path, kind)->read(&byte, 0), 0u) << "n = 0 reads nothing";
  }
}

TEST(CompressedInput, EmptyFilesAndEmptyStreams) {
  TempDir dir;
  expect_reads_as(dir.file("empty"), "", "", "", 16);
  for (const Kind& k : kKinds) expect_reads_as(dir.file(std::string("empty.") + k.name), k.compress(""), "", k.name, 16);
}

TEST(CompressedInput, TheMagicBytesDecideNotTheName) {
  TempDir dir;
  std::string text = make_text(5000, 8);
  // Each kind under the other kinds' names.
  const char* names[] = {"a.bz2", "a.zst", "a.txt", "a.gz"};
  for (const Kind& k : kKinds)
    for (const char* name : names) expect_reads_as(dir.file(std::string(k.name) + "-as-" + name), k.compress(text), text, k.name);
  // Text that starts like a magic but is not one stays text.
  for (std::string plain : {std::string("BZh0 not bz2"), std::string("\x1F not gzip"), std::string("BZ")})
    expect_reads_as(dir.file("looks.gz"), plain, plain, "");
}

TEST(CompressedInput, TruncatedFilesAreErrorsNamingTheFileAndAnOffset) {
  TempDir dir;
  std::string text = make_text(250000, 9);
  for (const Kind& k : kKinds) {
    std::string whole = k.compress(text);
    for (size_t keep : {size_t{4}, size_t{10}, whole.size() / 2, whole.size() - 4, whole.size() - 1}) {
      std::string path = dir.file(cat("cut-", keep, ".", k.name));
      write_file_atomic(path, whole.substr(0, keep));
      SCOPED_TRACE(path);
      expect_error_at_offset(path, keep);
    }
  }
}

TEST(CompressedInput, CorruptFilesAreErrorsNamingTheFileAndAnOffset) {
  TempDir dir;
  std::string text = make_text(250000, 10);
  for (const Kind& k : kKinds) {
    std::string whole = k.compress(text);
    for (size_t at : {whole.size() / 3, whole.size() / 2, whole.size() - 2}) {
      std::string bad = whole;
      bad[at] = static_cast<char>(bad[at] ^ 0x5A);
      std::string path = dir.file(cat("flip-", at, ".", k.name));
      write_file_atomic(path, bad);
      SCOPED_TRACE(path);
      expect_error_at_offset(path, bad.size());
    }
  }
  // A gzip file that ends inside the next member's magic is cut off, not garbage.
  std::string path = dir.file("half-magic.gz");
  write_file_atomic(path, gzip_member(text) + "\x1F");
  expect_error_at_offset(path, file_size(path));
}

TEST(CompressedInput, TrailingGarbageAfterTheLastStreamIsIgnored) {
  // bzip2 -d and gzip -d warn and keep the output; zstd -d fails.
  TempDir dir;
  std::string text = make_text(30000, 11);
  for (const Kind& k : {kKinds[0], kKinds[2]}) {
    std::string path = dir.file(std::string("tail.") + k.name);
    write_file_atomic(path, k.compress(text) + std::string(40, '\0') + "garbage");
    EXPECT_EQ(read_all(path), text) << k.name;
  }
  std::string path = dir.file("tail.zst");
  write_file_atomic(path, zstd_frame(text) + "garbage!");
  expect_error_at_offset(path, file_size(path));
}

TEST(CompressedInput, FileBytesReadProgressesToTheFileSize) {
  TempDir dir;
  std::string noise = make_noise(1u << 20, 12);
  std::vector<std::pair<const char*, std::string>> files = {{"plain", noise}};
  for (const Kind& k : kKinds) files.emplace_back(k.name, k.compress(noise));
  for (const auto& [name, bytes] : files) {
    std::string path = dir.file(std::string("progress.") + name), kind;
    write_file_atomic(path, bytes);
    auto source = open_byte_source(path, kind);
    EXPECT_EQ(source->file_bytes_read(), 0u) << name;
    std::string buf(100000, '\0');
    uint64_t last = 0, decoded = 0;
    bool in_between = false;
    while (size_t n = source->read(buf.data(), buf.size())) {
      decoded += n;
      uint64_t now = source->file_bytes_read();
      EXPECT_GE(now, last) << name;
      in_between |= now > 0 && now < bytes.size();
      last = now;
    }
    EXPECT_EQ(decoded, noise.size()) << name;
    EXPECT_TRUE(in_between) << name << ": progress only at the start and the end";
    EXPECT_EQ(source->file_bytes_read(), bytes.size()) << name << ": all of it once read() says the end";
  }
}

TEST(CompressedInput, MissingFileIsAnErrorNamingIt) {
  std::string kind;
  try {
    open_byte_source("/nonexistent/docs.jsonl.gz", kind);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/docs.jsonl.gz"), std::string::npos);
  }
}

// What a reader gave before it ended, and the offset of the Error it ended with (-1: none).
struct Outcome {
  std::string bytes;
  int64_t error_offset = -1;
};

Outcome read_parallel(const std::string& path) {
  Outcome o;
  try {
    Bz2Reader reader(path, {.threads = 2, .read_size = 65536});
    reader.for_each_piece([&](std::string_view b) { o.bytes.append(b); });
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    o.error_offset = e.where().offset;
    EXPECT_GE(o.error_offset, 0) << e.what();
  }
  return o;
}

Outcome read_serial(const std::string& path) {
  Outcome o;
  std::string kind;
  try {
    auto source = open_byte_source(path, kind);
    std::string buf(3000, '\0');
    while (size_t n = source->read(buf.data(), buf.size())) o.bytes.append(buf.data(), n);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    o.error_offset = e.where().offset;
    EXPECT_GE(o.error_offset, 0) << e.what();
  }
  EXPECT_EQ(kind, "bz2");
  return o;
}

TEST(CompressedInput, SerialBz2AndBz2ReaderGiveTheSameBytesAndErrors) {
  TempDir dir;
  std::string a = make_text(260000, 13), b = make_text(70000, 14), c = make_text(180000, 15);
  std::string multistream = bz2_stream(a, 1) + bz2_stream(b, 5) + bz2_stream("", 9) + bz2_stream(c, 2);
  std::string flipped = multistream;
  flipped[flipped.size() / 2] ^= 0x21;
  struct Case {
    const char* name;
    std::string file;
    bool damaged;
  };
  const Case cases[] = {
      {"multistream", multistream, false},
      {"garbage", multistream + "trailing garbage", false},
      {"one-byte-garbage", multistream + "X", false},
      {"truncated", multistream.substr(0, multistream.size() * 2 / 3), true},
      {"flipped", flipped, true},
      {"cut-header", multistream + "BZh", true},
      {"header-alone", multistream + "BZh9", true},
  };
  for (const Case& k : cases) {
    std::string path = dir.file(std::string(k.name) + ".bz2");
    write_file_atomic(path, k.file);
    Outcome parallel = read_parallel(path), serial = read_serial(path);
    EXPECT_EQ(serial.bytes, parallel.bytes) << k.name;
    EXPECT_EQ(serial.error_offset, parallel.error_offset) << k.name;
    if (k.damaged) {
      EXPECT_GE(serial.error_offset, 0) << k.name;
      EXPECT_EQ(serial.bytes, (a + b + c).substr(0, serial.bytes.size())) << k.name << ": only bytes of whole blocks";
    } else {
      EXPECT_EQ(serial.bytes, a + b + c) << k.name;
    }
  }
}

}  // namespace
}  // namespace pretrain::compressed_input_test
