// llm.c token shards: header layout, round trips in both layouts, corrupt files, and conversion
// to and from Megatron indexed datasets.
#include "formats/llmc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::llmc_test {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<int32_t> header_of(const std::string& path) {
  std::string bytes = read_file(path);
  std::vector<int32_t> h(kLlmcHeaderInts);
  std::memcpy(h.data(), bytes.data(), kLlmcHeaderBytes);
  return h;
}

// An llm.c stream as fineweb.py makes it: EOT, then the document's tokens, per document.
std::vector<uint16_t> fineweb_stream(uint32_t seed, int docs) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> out;
  for (int d = 0; d < docs; ++d) {
    out.push_back(uint16_t(kGpt2EotId));
    for (uint32_t n = rng() % 500; n; --n) out.push_back(uint16_t(rng() % 50256));
  }
  return out;
}

void write_llmc(const std::string& path, std::span<const uint16_t> tokens) {
  LlmcWriter w(path);
  w.add(tokens);
  w.commit();
}

TEST(Llmc, HeaderLayout) {
  TempDir dir;
  std::vector<int32_t> t = {1, 2, 3, 65535};
  LlmcWriter w(dir.file("a.bin"));
  w.add(t);
  w.add(int64_t(7));
  EXPECT_EQ(w.tokens_written(), 5u);
  w.commit();
  auto h = header_of(dir.file("a.bin"));
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 1);
  EXPECT_EQ(h[2], 5);
  for (size_t i = 3; i < h.size(); ++i) EXPECT_EQ(h[i], 0);
  EXPECT_EQ(file_size(dir.file("a.bin")), 1024u + 10u);
  std::string bytes = read_file(dir.file("a.bin"));
  EXPECT_EQ(bytes.substr(1024), std::string("\x01\0\x02\0\x03\0\xff\xff\x07\0", 10));
}

TEST(Llmc, RoundTripGpt2) {
  TempDir dir;
  auto tokens = fineweb_stream(1, 300);
  write_llmc(dir.file("g.bin"), tokens);
  LlmcReader r(dir.file("g.bin"));
  EXPECT_EQ(r.format(), LlmcFormat::gpt2);
  ASSERT_EQ(r.size(), tokens.size());
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), r.tokens16().begin()));
  EXPECT_EQ(r[5], tokens[5]);
  EXPECT_THROW(r.tokens32(), Error);
  EXPECT_EQ(count_llmc_tokens(dir.file("g.bin")), tokens.size());
  std::ostringstream out;
  inspect_llmc(dir.file("g.bin"), out, 2);
  EXPECT_THAT(out.str(), HasSubstr("gpt-2"));
  EXPECT_THAT(out.str(), HasSubstr("EOT (50256) tokens  300"));
}

TEST(Llmc, RoundTripLlama3) {
  TempDir dir;
  std::vector<int64_t> tokens = {128000, 0, 4294967295LL, 70000};
  LlmcWriter w(dir.file("l.bin"), LlmcFormat::llama3);
  w.add(tokens);
  w.commit();
  auto h = header_of(dir.file("l.bin"));
  EXPECT_EQ(h[0], 20240801);
  EXPECT_EQ(h[1], 7);
  EXPECT_EQ(h[2], 4);
  LlmcReader r(dir.file("l.bin"));
  EXPECT_EQ(r.format(), LlmcFormat::llama3);
  EXPECT_EQ(std::vector<uint32_t>(r.tokens32().begin(), r.tokens32().end()),
            (std::vector<uint32_t>{128000, 0, 4294967295u, 70000}));
  EXPECT_THROW(r.tokens16(), Error);
}

TEST(Llmc, EmptyFile) {
  TempDir dir;
  LlmcWriter w(dir.file("e.bin"));
  w.commit();
  EXPECT_EQ(file_size(dir.file("e.bin")), 1024u);
  EXPECT_EQ(LlmcReader(dir.file("e.bin")).size(), 0u);
}

TEST(Llmc, TokenThatDoesNotFitIsRefusedAndNothingIsAppended) {
  TempDir dir;
  LlmcWriter w(dir.file("x.bin"));
  std::vector<int32_t> ok = {1, 2}, bad = {3, 65536}, negative = {-1};
  w.add(ok);
  try {
    w.add(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("x.bin"));
    EXPECT_THAT(e.what(), HasSubstr("65536"));
    EXPECT_THAT(e.what(), HasSubstr("stream index 3"));
    EXPECT_THAT(e.what(), HasSubstr("uint16"));
  }
  EXPECT_THROW(w.add(negative), Error);
  w.commit();
  LlmcReader r(dir.file("x.bin"));
  EXPECT_EQ(r.size(), 2u);
}

TEST(Llmc, AbandonedWriterLeavesNothing) {
  TempDir dir;
  {
    LlmcWriter w(dir.file("gone.bin"));
    w.add(int64_t(5));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

class LlmcCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<uint16_t> t = {50256, 10, 20, 30};
    write_llmc(path(), t);
    good_ = read_file(path());
  }
  std::string path() const { return dir_.file("t.bin"); }
  void write_int(size_t index, int32_t v) {
    std::string s = good_;
    std::memcpy(s.data() + 4 * index, &v, 4);
    write_file_atomic(path(), s);
  }
  void expect_error(const std::string& where, const std::string& what) {
    try {
      LlmcReader r(path());
      ADD_FAILURE() << "no error; expected one about " << what;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(where));
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  }
  TempDir dir_;
  std::string good_;
};

TEST_F(LlmcCorrupt, BadMagic) {
  write_int(0, 20240521);
  expect_error("t.bin: byte 0", "found 20240521");
}

TEST_F(LlmcCorrupt, BadVersion) {
  write_int(1, 2);
  expect_error("t.bin: byte 4", "version 2");
  write_int(0, kLlmcMagicLlama3);  // a llama-3 magic with the gpt-2 version
  expect_error("t.bin: byte 4", "version 7");
}

TEST_F(LlmcCorrupt, NegativeCount) {
  write_int(2, -4);
  expect_error("t.bin: byte 8", "non-negative token count");
}

TEST_F(LlmcCorrupt, SizeDisagreesWithCount) {
  write_int(2, 5);
  expect_error("t.bin", "truncated");
  write_int(2, 3);
  expect_error("t.bin", "trailing bytes");
  write_file_atomic(path(), good_.substr(0, good_.size() - 1));
  expect_error("t.bin", "truncated");
}

TEST_F(LlmcCorrupt, TruncatedHeaderAtEveryLength) {
  for (size_t n = 0; n < kLlmcHeaderBytes; n += 7) {
    write_file_atomic(path(), good_.substr(0, n));
    expect_error("t.bin", "1024-byte llm.c header");
  }
}

// ---- conversion ---------------------------------------------------------------------------------

TEST(LlmcConvert, ToMegatronSplitsDocumentsAtEot) {
  TempDir dir;
  std::vector<uint16_t> t = {50256, 1, 2, 3, 50256, 4, 50256, 50256, 5, 6};
  write_llmc(dir.file("in.bin"), t);
  ConvertStats stats = convert_llmc_to_megatron(dir.file("in.bin"), dir.file("out"));
  EXPECT_EQ(stats.tokens, t.size());
  EXPECT_EQ(stats.documents, 4u);
  EXPECT_EQ(stats.sequences, 4u);
  MegatronReader r(dir.file("out"));
  EXPECT_EQ(r.dtype(), MegatronDType::u16);
  EXPECT_EQ(r.document_indices().to_vector(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(r[0].to_int32(), (std::vector<int32_t>{50256, 1, 2, 3}));
  EXPECT_EQ(r[1].to_int32(), (std::vector<int32_t>{50256, 4}));
  EXPECT_EQ(r[2].to_int32(), (std::vector<int32_t>{50256}));
  EXPECT_EQ(r[3].to_int32(), (std::vector<int32_t>{50256, 5, 6}));
}

TEST(LlmcConvert, ToMegatronWithFixedSequenceLength) {
  TempDir dir;
  std::vector<uint16_t> t = {7, 8, 50256, 1, 2, 3, 4, 5};
  write_llmc(dir.file("in.bin"), t);
  LlmcToMegatronOptions options;
  options.tokens_per_sequence = 3;
  options.dtype = MegatronDType::i32;
  convert_llmc_to_megatron(dir.file("in.bin"), dir.file("out"), options);
  MegatronReader r(dir.file("out"));
  EXPECT_EQ(r.dtype(), MegatronDType::i32);
  EXPECT_EQ(r.document_indices().to_vector(), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(r[0].to_int32(), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(r[1].to_int32(), (std::vector<int32_t>{50256, 1, 2}));
  EXPECT_EQ(r[2].to_int32(), (std::vector<int32_t>{3, 4, 5}));
  // No EOT splitting: one document.
  options.eot_id = -1;
  convert_llmc_to_megatron(dir.file("in.bin"), dir.file("one"), options);
  EXPECT_EQ(MegatronReader(dir.file("one")).num_documents(), 1u);
}

TEST(LlmcConvert, RoundTripIsByteIdentical) {
  TempDir dir;
  auto tokens = fineweb_stream(9, 500);
  write_llmc(dir.file("in.bin"), tokens);
  convert_llmc_to_megatron(dir.file("in.bin"), dir.file("mid"));
  ConvertStats back = convert_megatron_to_llmc(dir.file("mid"), dir.file("back.bin"));
  EXPECT_EQ(back.documents, 500u);
  EXPECT_EQ(back.tokens, tokens.size());
  EXPECT_EQ(read_file(dir.file("in.bin")), read_file(dir.file("back.bin")));
}

TEST(LlmcConvert, MegatronDocumentsGetAnEotInFront) {
  TempDir dir;
  {
    MegatronWriter w(dir.file("m"), MegatronDType::i32);
    std::vector<int32_t> a = {1, 2}, b = {3}, c = {4, 50256}, empty;
    w.add_sequence(a), w.add_sequence(empty), w.add_sequence(b), w.end_document();
    w.add_sequence(c), w.end_document();
    w.finalize();
  }
  convert_megatron_to_llmc(dir.file("m"), dir.file("a.bin"));
  LlmcReader ra(dir.file("a.bin"));
  auto a = ra.tokens16();
  EXPECT_EQ(std::vector<uint16_t>(a.begin(), a.end()), (std::vector<uint16_t>{50256, 1, 2, 3, 50256, 4, 50256}));
  MegatronToLlmcOptions options;
  options.trailing_eod = true;  // preprocess_data.py --append-eod: the EOD moves to the front
  convert_megatron_to_llmc(dir.file("m"), dir.file("b.bin"), options);
  LlmcReader rb(dir.file("b.bin"));
  auto b = rb.tokens16();
  EXPECT_EQ(std::vector<uint16_t>(b.begin(), b.end()), (std::vector<uint16_t>{50256, 1, 2, 3, 50256, 4}));
}

TEST(LlmcConvert, IdsThatDoNotFitUint16AreRefused) {
  TempDir dir;
  {
    MegatronWriter w(dir.file("big"), MegatronDType::i32);
    std::vector<int32_t> a = {1, 2}, b = {3, 100000};
    w.add_sequence(a), w.end_document();
    w.add_sequence(b), w.end_document();
    w.finalize();
  }
  try {
    convert_megatron_to_llmc(dir.file("big"), dir.file("out.bin"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("big.bin"));
    EXPECT_THAT(e.what(), HasSubstr("document 1"));
    EXPECT_THAT(e.what(), HasSubstr("100000"));
    EXPECT_THAT(e.what(), HasSubstr("uint16"));
  }
  EXPECT_FALSE(file_exists(dir.file("out.bin")));
  // The llama-3 layout holds them.
  MegatronToLlmcOptions options;
  options.format = LlmcFormat::llama3;
  convert_megatron_to_llmc(dir.file("big"), dir.file("out.bin"), options);
  LlmcReader out(dir.file("out.bin"));
  auto t = out.tokens32();
  EXPECT_EQ(std::vector<uint32_t>(t.begin(), t.end()), (std::vector<uint32_t>{50256, 1, 2, 50256, 3, 100000}));
  // And back to Megatron as int32.
  convert_llmc_to_megatron(dir.file("out.bin"), dir.file("again"));
  MegatronReader r(dir.file("again"));
  EXPECT_EQ(r.dtype(), MegatronDType::i32);
  EXPECT_EQ(r[1].to_int32(), (std::vector<int32_t>{50256, 3, 100000}));
}

}  // namespace
}  // namespace pretrain::llmc_test
