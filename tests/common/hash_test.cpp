// common/hash.h: xxh3-64 of bytes, streams and files (every manifest's checksum), and its hex form.
#include "common/hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"

namespace pretrain::hash_test {
namespace {

using testing::TempDir;

TEST(Hash, Xxh3MatchesKnownValuesAndStreams) {
  // XXH3_64bits("") with seed 0 is the published 0x2D06800538D394C2.
  EXPECT_EQ(xxh3_bytes("", 0), 0x2D06800538D394C2ull);
  std::string s(10000, 'q');
  Xxh3Stream st;
  st.update(s.data(), 1234);
  st.update(s.data() + 1234, s.size() - 1234);
  EXPECT_EQ(st.digest(), xxh3_bytes(s.data(), s.size()));
  EXPECT_EQ(parse_hex64(hex64(0x0123456789abcdefull)), 0x0123456789abcdefull);
  EXPECT_THROW(parse_hex64("xyz"), Error);
  TempDir dir;
  write_file_atomic(dir.file("f"), s);
  EXPECT_EQ(xxh3_file(dir.file("f")), xxh3_bytes(s.data(), s.size()));
}

// A file larger than xxh3_file's 64 MiB pieces: the same hash as one pass over the bytes, and its
// pages do not stay mapped (hashing a multi-GB shard used to add its size to the peak RSS).
TEST(Hash, Xxh3FileStreamsLargeFilesWithoutKeepingThemMapped) {
  TempDir dir;
  std::string big(size_t{150} << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = char(i / 4096);
  write_file_atomic(dir.file("big"), big);
  auto rss_file = [] {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("RssFile:", 0) == 0) return std::stoull(line.substr(8)) << 10;
    return 0ull;
  };
  const unsigned long long before = rss_file();
  std::atomic<bool> done{false};
  std::atomic<unsigned long long> peak{before};
  std::thread watch([&] {  // the peak while the file is hashed
    while (!done) {
      peak = std::max(peak.load(), rss_file());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  const uint64_t hash = xxh3_file(dir.file("big"));
  done = true;
  watch.join();
  EXPECT_EQ(hash, xxh3_bytes(big.data(), big.size()));
  EXPECT_LT(peak.load(), before + (uint64_t{100} << 20)) << "mapped " << ((peak.load() - before) >> 20) << " MiB";
}

TEST(Hash, Hex64IsSixteenLowercaseDigitsAndParsesOnlyThat) {
  EXPECT_EQ(hex64(0), "0000000000000000");
  EXPECT_EQ(hex64(0xABCull), "0000000000000abc");
  EXPECT_EQ(hex64(~0ull), "ffffffffffffffff");
  for (const char* bad : {"", "abc", "00000000000000000", "000000000000000G", "0000000000000ABC"})
    EXPECT_THROW(parse_hex64(bad), Error) << bad;
}

TEST(Hash, SeedsAndEmptyFiles) {
  const std::string s = "manifest";
  EXPECT_NE(xxh3_bytes(s.data(), s.size(), 1), xxh3_bytes(s.data(), s.size()));
  EXPECT_NE(xxh3_bytes("a", 1), xxh3_bytes("b", 1));
  TempDir dir;
  write_file_atomic(dir.file("empty"), "");
  EXPECT_EQ(xxh3_file(dir.file("empty")), xxh3_bytes("", 0));
  EXPECT_THROW(xxh3_file(dir.file("missing")), Error);
  Xxh3Stream nothing;
  EXPECT_EQ(nothing.digest(), xxh3_bytes("", 0));
}

}  // namespace
}  // namespace pretrain::hash_test
