// formats/deflate.h: every codec's streams inflate with zlib (the reference, what HDF5's filter and
// h5py use) to the input, zlib's streams inflate with every codec, and damaged streams throw
// Error naming the chunk and file instead of crashing or decoding to other bytes.
#include "formats/deflate.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pretrain::deflate_test {
namespace {

using deflate::Codec;
constexpr Codec kCodecs[] = {Codec::zlib, Codec::libdeflate, Codec::isal};

// Bytes shaped like a BERT chunk's: int32 token ids with a zero-padded tail per row, then a run
// of int8 masks; some of it random enough that no codec finds much to match.
std::vector<uint8_t> chunk_like(size_t rows, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> out;
  for (size_t r = 0; r < rows; ++r) {
    size_t used = 20 + gen() % 100;
    for (size_t j = 0; j < 128; ++j) {
      uint32_t id = j < used ? (j == 0 ? 101 : gen() % 30522) : 0;
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(id >> (8 * b)));
    }
  }
  for (size_t r = 0; r < rows * 128; ++r) out.push_back(r % 128 < 70 ? 1 : 0);
  return out;
}

std::vector<uint8_t> zlib_reference(const std::vector<uint8_t>& in, int level) {
  std::vector<uint8_t> out(compressBound(static_cast<uLong>(in.size())));
  uLongf size = out.size();
  EXPECT_EQ(compress2(out.data(), &size, in.data(), static_cast<uLong>(in.size()), level), Z_OK);
  out.resize(size);
  return out;
}

std::vector<uint8_t> zlib_inflate(const std::vector<uint8_t>& stream, size_t size) {
  std::vector<uint8_t> out(size + 1);
  uLongf n = out.size();
  EXPECT_EQ(uncompress(out.data(), &n, stream.data(), static_cast<uLong>(stream.size())), Z_OK);
  out.resize(n);
  return out;
}

TEST(Deflate, EveryCodecAndLevelInflatesWithZlibAndEveryCodec) {
  for (const auto& input : {chunk_like(512, 1), chunk_like(3, 2), std::vector<uint8_t>{}, std::vector<uint8_t>(1, 7)}) {
    for (Codec codec : kCodecs)
      for (int level = 0; level <= 9; ++level) {
        SCOPED_TRACE(cat(deflate::codec_name(codec), " level ", level, ", ", input.size(), " bytes"));
        std::vector<uint8_t> stream;
        size_t n = deflate::compress(codec, input.data(), input.size(), level, stream);
        stream.resize(n);
        ASSERT_LE(n, compressBound(static_cast<uLong>(input.size()))) << "the reader refuses a chunk over zlib's bound";
        EXPECT_EQ(zlib_inflate(stream, input.size()), input);
        for (Codec in : kCodecs) {
          std::vector<uint8_t> out(input.size() + 1, 0xee);  // one byte more: must stay untouched
          deflate::inflate(in, stream.data(), n, out.data(), input.size(), Where{"f.hdf5"}, "chunk");
          EXPECT_EQ(out.back(), 0xee);
          out.pop_back();
          EXPECT_EQ(out, input) << deflate::codec_name(in);
        }
      }
  }
}

TEST(Deflate, ZlibStreamsInflateWithEveryCodec) {
  const std::vector<uint8_t> input = chunk_like(700, 3);
  for (int level : {1, 4, 9}) {
    std::vector<uint8_t> stream = zlib_reference(input, level);
    for (Codec codec : kCodecs) {
      std::vector<uint8_t> out(input.size());
      deflate::inflate(codec, stream.data(), stream.size(), out.data(), out.size(), Where{"f.hdf5"}, "chunk");
      EXPECT_EQ(out, input) << deflate::codec_name(codec) << " level " << level;
    }
  }
}

TEST(Deflate, SameBytesEveryTimeAndOnEveryThread) {
  const std::vector<uint8_t> input = chunk_like(512, 4);
  std::vector<uint8_t> first, again;
  first.resize(deflate::compress(input.data(), input.size(), 4, first));
  deflate::compress(input.data(), input.size(), 9, again);  // another level in between
  again.resize(deflate::compress(input.data(), input.size(), 4, again));
  EXPECT_EQ(first, again);
  std::vector<uint8_t> other;
  std::thread([&] { other.resize(deflate::compress(input.data(), input.size(), 4, other)); }).join();
  EXPECT_EQ(first, other);
}

TEST(Deflate, LevelsMapOntoIsal) {
  const int expected[] = {0, 0, 1, 1, 2, 2, 2, 3, 3, 3};
  for (int level = 0; level <= 9; ++level) {
    EXPECT_EQ(deflate::library_level(Codec::isal, level), expected[level]);
    EXPECT_EQ(deflate::library_level(Codec::libdeflate, level), level);
  }
  std::vector<uint8_t> out;
  EXPECT_THROW(deflate::compress(nullptr, 0, 10, out), Error);
  EXPECT_THROW(deflate::compress(nullptr, 0, -1, out), Error);
}

// Every damaged stream: an Error whose message names the file and the chunk, or the right bytes (a
// flipped bit in the padding after the last block, which no decoder reads; Adler-32 covers the rest).
void expect_refused(Codec codec, const std::vector<uint8_t>& stream, const std::vector<uint8_t>& input, size_t size,
                    const std::string& why) {
  std::vector<uint8_t> out(size);
  try {
    deflate::inflate(codec, stream.data(), stream.size(), out.data(), out.size(), Where{"damaged.hdf5"},
                     "chunk of dataset 'input_ids' at record 512");
    EXPECT_EQ(out, input) << deflate::codec_name(codec) << " accepted " << why;
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("damaged.hdf5"), std::string::npos) << what;
    EXPECT_NE(what.find("'input_ids' at record 512"), std::string::npos) << what;
  }
}

TEST(Deflate, TruncatedCorruptAndMissizedStreamsThrow) {
  const std::vector<uint8_t> input = chunk_like(64, 5);
  for (Codec writer : kCodecs) {
    std::vector<uint8_t> stream;
    stream.resize(deflate::compress(writer, input.data(), input.size(), 4, stream));
    for (Codec codec : kCodecs) {
      for (size_t len = 0; len < stream.size(); len += 1 + len / 3)
        expect_refused(codec, std::vector<uint8_t>(stream.begin(), stream.begin() + static_cast<long>(len)),
                       input, input.size(), cat("a stream cut at ", len));
      for (size_t at = 0; at < stream.size(); at += 7) {
        std::vector<uint8_t> bad = stream;
        bad[at] ^= 0x20;
        expect_refused(codec, bad, input, input.size(), cat("a bit flipped at ", at));
      }
      expect_refused(codec, stream, {}, input.size() - 1, "one byte more than expected");
      expect_refused(codec, stream, {}, input.size() + 1, "one byte fewer than expected");
    }
  }
}

TEST(Deflate, MessagesSayWhatFailed) {
  const std::vector<uint8_t> input = chunk_like(8, 6);
  std::vector<uint8_t> stream = zlib_reference(input, 4);
  std::vector<uint8_t> out(input.size() + 10);
  for (Codec codec : kCodecs) {
    try {
      deflate::inflate(codec, stream.data(), stream.size(), out.data(), input.size() + 10, Where{"f.hdf5"}, "chunk 3");
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("decodes to"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pretrain::deflate_test
