// Megatron indexed dataset: round trips, byte equality with files Megatron-LM itself wrote
// (golden/megatron-botchan-*), and a corrupt file of every kind failing with a message that names it.
#include "formats/megatron.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/file.h"
#include "common/hash.h"
#include "test_util.h"

namespace pretrain::megatron_test {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

using Doc = std::vector<std::vector<int64_t>>;

// Random documents of random sequences (some empty) with ids in [lo, hi].
std::vector<Doc> random_docs(uint32_t seed, int docs, int64_t lo, int64_t hi) {
  std::mt19937_64 rng(seed);
  std::vector<Doc> out(docs);
  for (auto& doc : out) {
    doc.resize(rng() % 5);
    for (auto& seq : doc) {
      seq.resize(rng() % 4 == 0 ? 0 : rng() % 300);
      for (auto& t : seq) t = lo + int64_t(rng() % uint64_t(hi - lo + 1));
    }
  }
  return out;
}

void write_docs(const std::string& prefix, MegatronDType dtype, const std::vector<Doc>& docs) {
  MegatronWriter w(prefix, dtype);
  for (const auto& doc : docs) {
    for (const auto& seq : doc) w.add_sequence(std::span<const int64_t>(seq));
    w.end_document();
  }
  w.finalize();
}

void expect_reads_back(const std::string& prefix, MegatronDType dtype, const std::vector<Doc>& docs) {
  MegatronReader r(prefix);
  EXPECT_EQ(r.dtype(), dtype);
  EXPECT_EQ(r.num_documents(), docs.size());
  size_t seq = 0, tokens = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    auto [first, last] = r.document_range(d);
    ASSERT_EQ(first, seq);
    ASSERT_EQ(last - first, docs[d].size());
    for (const auto& want : docs[d]) {
      TokenSpan s = r.sequence(seq);
      ASSERT_EQ(s.size, want.size()) << "sequence " << seq;
      for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(s[k], want[k]) << "sequence " << seq << " token " << k;
      EXPECT_EQ(r.sequence_lengths()[seq], int32_t(want.size()));
      EXPECT_EQ(r.sequence_pointers()[seq], int64_t(tokens * r.itemsize()));
      tokens += want.size();
      ++seq;
    }
  }
  EXPECT_EQ(r.num_sequences(), seq);
  EXPECT_EQ(r.num_tokens(), tokens);
  EXPECT_EQ(file_size(prefix + ".bin"), tokens * megatron_itemsize(dtype));
  EXPECT_EQ(file_size(prefix + ".idx"), kMegatronHeaderBytes + 12 * seq + 8 * (docs.size() + 1));
}

TEST(Megatron, RoundTripUint16) {
  TempDir dir;
  auto docs = random_docs(1, 200, 0, 65535);
  write_docs(dir.file("u16"), MegatronDType::u16, docs);
  expect_reads_back(dir.file("u16"), MegatronDType::u16, docs);
  MegatronReader r(dir.file("u16"));
  for (size_t i = 0; i < r.num_sequences(); ++i) {
    auto span = r.sequence(i).as<uint16_t>();
    EXPECT_EQ(span.size(), size_t(r.sequence_lengths()[i]));
  }
}

TEST(Megatron, RoundTripInt32) {
  TempDir dir;
  auto docs = random_docs(2, 200, -2147483648LL, 2147483647LL);
  write_docs(dir.file("i32"), MegatronDType::i32, docs);
  expect_reads_back(dir.file("i32"), MegatronDType::i32, docs);
  MegatronReader r(dir.file("i32"));
  for (size_t i = 0; i < r.num_sequences(); ++i) EXPECT_EQ(r[i].to_int32(), std::vector<int32_t>(r[i].as<int32_t>().begin(), r[i].as<int32_t>().end()));
}

TEST(Megatron, RoundTripEveryDtype) {
  TempDir dir;
  for (MegatronDType dt : {MegatronDType::u8, MegatronDType::i8, MegatronDType::i16, MegatronDType::i64,
                           MegatronDType::f32, MegatronDType::f64}) {
    auto docs = random_docs(3, 20, 0, 100);
    std::string prefix = dir.file(megatron_dtype_name(dt));
    write_docs(prefix, dt, docs);
    expect_reads_back(prefix, dt, docs);
  }
}

TEST(Megatron, EmptyDataset) {
  TempDir dir;
  write_docs(dir.file("empty"), MegatronDType::u16, {});
  EXPECT_EQ(file_size(dir.file("empty.bin")), 0u);
  EXPECT_EQ(file_size(dir.file("empty.idx")), kMegatronHeaderBytes + 8);
  MegatronReader r(dir.file("empty"));
  EXPECT_EQ(r.num_sequences(), 0u);
  EXPECT_EQ(r.num_documents(), 0u);
  EXPECT_EQ(r.document_indices().to_vector(), std::vector<int64_t>{0});
  EXPECT_THROW(r.sequence(0), Error);
}

TEST(Megatron, EmptySequencesAndDocuments) {
  TempDir dir;
  std::vector<Doc> docs = {{{}, {}}, {}, {{1, 2, 3}, {}}, {{}}};
  write_docs(dir.file("e"), MegatronDType::u16, docs);
  expect_reads_back(dir.file("e"), MegatronDType::u16, docs);
  MegatronReader r(dir.file("e"));
  EXPECT_EQ(r.document_indices().to_vector(), (std::vector<int64_t>{0, 2, 2, 4, 5}));
}

TEST(Megatron, AddDocumentMatchesAddSequence) {
  TempDir dir;
  auto docs = random_docs(4, 50, 0, 30000);
  write_docs(dir.file("a"), MegatronDType::u16, docs);
  MegatronWriter w(dir.file("b"), MegatronDType::u16);
  for (const auto& doc : docs) {
    std::vector<int32_t> flat;
    std::vector<int64_t> lengths;
    for (const auto& seq : doc) flat.insert(flat.end(), seq.begin(), seq.end()), lengths.push_back(int64_t(seq.size()));
    w.add_document(flat, lengths);
  }
  w.finalize();
  EXPECT_EQ(read_file(dir.file("a.bin")), read_file(dir.file("b.bin")));
  EXPECT_EQ(read_file(dir.file("a.idx")), read_file(dir.file("b.idx")));
  std::vector<int32_t> three = {1, 2, 3};
  std::vector<int64_t> bad_lengths = {1, 1};
  MegatronWriter w2(dir.file("c"), MegatronDType::u16);
  EXPECT_THROW(w2.add_document(three, bad_lengths), UsageError);
}

TEST(Megatron, WriterCountsAndHashes) {
  TempDir dir;
  MegatronWriter w(dir.file("h"), MegatronDType::i32);
  std::vector<int32_t> a = {5, 6, 7}, b = {8};
  w.add_sequence(a);
  w.add_sequence(b);
  w.end_document();
  EXPECT_EQ(w.num_sequences(), 2u);
  EXPECT_EQ(w.num_documents(), 1u);
  EXPECT_EQ(w.tokens_written(), 4u);
  EXPECT_EQ(w.bin_bytes(), 16u);
  w.finalize();
  EXPECT_EQ(w.bin_xxh3(), hex64(xxh3_file(dir.file("h.bin"))));
  EXPECT_EQ(w.idx_xxh3(), hex64(xxh3_file(dir.file("h.idx"))));
  EXPECT_EQ(w.idx_bytes(), file_size(dir.file("h.idx")));
  EXPECT_THROW(w.end_document(), UsageError);
}

TEST(Megatron, LongSequenceCrossesTheWriteBuffer) {
  TempDir dir;
  std::vector<uint16_t> big(9'000'000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint16_t(i * 7);
  MegatronWriter w(dir.file("big"), MegatronDType::u16);
  w.add_sequence(big);
  w.end_document();
  w.finalize();
  MegatronReader r(dir.file("big"));
  auto s = r.sequence(0).as<uint16_t>();
  ASSERT_EQ(s.size(), big.size());
  EXPECT_TRUE(std::equal(s.begin(), s.end(), big.begin()));
}

TEST(Megatron, TokenThatDoesNotFitNamesTheSequence) {
  TempDir dir;
  MegatronWriter w(dir.file("x"), MegatronDType::u16);
  std::vector<int32_t> ok = {1, 2}, bad = {3, 70000, 4}, negative = {-1};
  w.add_sequence(ok);
  try {
    w.add_sequence(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("x.bin"));
    EXPECT_THAT(e.what(), HasSubstr("record 1"));
    EXPECT_THAT(e.what(), HasSubstr("70000"));
    EXPECT_THAT(e.what(), HasSubstr("uint16"));
  }
  EXPECT_THROW(w.add_sequence(negative), Error);
  // The failed sequences left nothing behind.
  w.end_document();
  w.finalize();
  expect_reads_back(dir.file("x"), MegatronDType::u16, {{{1, 2}}});
  MegatronWriter f(dir.file("f"), MegatronDType::f32);
  std::vector<int32_t> inexact = {16777217};
  EXPECT_THROW(f.add_sequence(inexact), Error);
}

TEST(Megatron, AbandonedWriterLeavesNothing) {
  TempDir dir;
  {
    MegatronWriter w(dir.file("gone"), MegatronDType::u16);
    std::vector<int32_t> t = {1, 2, 3};
    w.add_sequence(t);
    w.end_document();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Megatron, FinalizeRefusesSequencesOutsideADocument) {
  TempDir dir;
  MegatronWriter w(dir.file("open"), MegatronDType::u16);
  std::vector<int32_t> t = {1};
  w.add_sequence(t);
  EXPECT_THROW(w.finalize(), UsageError);
}

TEST(Megatron, AccessorsAndRanges) {
  TempDir dir;
  write_docs(dir.file("r"), MegatronDType::u16, {{{10, 11, 12, 13}, {20}}});
  MegatronReader r(dir.file("r.idx"));  // the .idx path works as the prefix
  EXPECT_EQ(r.get(0, 1, 2).to_int32(), (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(r.get(0, 3).to_int32(), (std::vector<int32_t>{13}));
  EXPECT_THROW(r.get(0, 3, 2), Error);
  EXPECT_THROW(r.get(0, 5), Error);
  EXPECT_THROW(r.sequence(2), Error);
  EXPECT_THROW(r.sequence(0).as<int32_t>(), Error);
  EXPECT_THROW(r.sequence(0).as<int16_t>(), Error);
  EXPECT_THROW(r.document_range(1), Error);
  EXPECT_EQ(count_megatron_records(dir.file("r.bin")), 2u);
  std::ostringstream out;
  inspect_megatron(dir.file("r"), out, 5);
  EXPECT_THAT(out.str(), HasSubstr("uint16"));
  EXPECT_THAT(out.str(), HasSubstr("10 11 12 13"));
  EXPECT_THAT(out.str(), HasSubstr("document 0: sequences [0, 2)"));
  EXPECT_EQ(megatron_optimal_dtype(30522), MegatronDType::u16);
  EXPECT_EQ(megatron_optimal_dtype(65500), MegatronDType::i32);
  EXPECT_EQ(megatron_optimal_dtype(50257), MegatronDType::u16);
}

// ---- golden files written by Megatron-LM's IndexedDatasetBuilder -------------------------------

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

TEST(MegatronGolden, OurWriterMatchesMegatronByteForByte) {
  PRETRAIN_REQUIRE_SHARED(json_path, "golden/megatron-botchan.json");
  PRETRAIN_REQUIRE_SHARED(golden_u16, "golden/megatron-botchan-uint16.idx");
  const auto meta = read_json(json_path);
  const auto sequences = meta.at("sequences").get<std::vector<std::vector<int32_t>>>();
  const auto sizes = meta.at("document_sizes_in_sequences").get<std::vector<size_t>>();
  TempDir dir;
  for (auto [name, dtype] : {std::pair{"uint16", MegatronDType::u16}, std::pair{"int32", MegatronDType::i32}}) {
    // The golden recipe: add_item per sequence, end_document per document, finalize.
    const std::string prefix = dir.file(cat("ours-", name));
    MegatronWriter w(prefix, dtype);
    size_t k = 0;
    for (size_t n : sizes) {
      for (size_t i = 0; i < n; ++i) w.add_sequence(sequences[k++]);
      w.end_document();
    }
    w.finalize();
    const std::string golden = cat(dir_name(golden_u16), "/megatron-botchan-", name);
    EXPECT_EQ(read_file(prefix + ".bin"), read_file(golden + ".bin")) << name;
    EXPECT_EQ(read_file(prefix + ".idx"), read_file(golden + ".idx")) << name;
  }
}

TEST(MegatronGolden, OurReaderReadsMegatronFiles) {
  PRETRAIN_REQUIRE_SHARED(json_path, "golden/megatron-botchan.json");
  const auto meta = read_json(json_path);
  const auto sequences = meta.at("sequences").get<std::vector<std::vector<int32_t>>>();
  const auto document_indices = meta.at("document_indices").get<std::vector<int64_t>>();
  const auto lengths = meta.at("sequence_lengths").get<std::vector<int32_t>>();
  for (auto [name, dtype] : {std::pair{"uint16", MegatronDType::u16}, std::pair{"int32", MegatronDType::i32}}) {
    PRETRAIN_REQUIRE_SHARED(idx, cat("golden/megatron-botchan-", name, ".idx"));
    MegatronReader r(idx);
    EXPECT_EQ(r.dtype(), dtype);
    ASSERT_EQ(r.num_sequences(), sequences.size());
    EXPECT_EQ(r.num_documents(), size_t(meta.at("num_documents")));
    EXPECT_EQ(r.num_tokens(), uint64_t(meta.at("num_tokens")));
    EXPECT_EQ(r.document_indices().to_vector(), document_indices);
    EXPECT_EQ(r.sequence_lengths().to_vector(), lengths);
    EXPECT_EQ(r.sequence_pointers().to_vector(), meta.at("sequence_pointers").at(name).get<std::vector<int64_t>>());
    for (size_t i = 0; i < sequences.size(); ++i) ASSERT_EQ(r[i].to_int32(), sequences[i]) << name << " sequence " << i;
    for (size_t i : {0, 7, 4287})
      EXPECT_EQ(r.get(i, 1, 3).to_int32(), std::vector<int32_t>(sequences[i].begin() + 1, sequences[i].begin() + 4));
  }
}

// ---- corruption: every kind fails with an Error that names the file ----------------------------

class MegatronCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    write_docs(prefix(), MegatronDType::u16, {{{1, 2, 3}, {4}}, {{5, 6}}, {{}, {7, 8, 9, 10}}});
    idx_ = read_file(prefix() + ".idx");
    bin_ = read_file(prefix() + ".bin");
  }
  std::string prefix() const { return dir_.file("c"); }
  void write_idx(const std::string& bytes) { write_file_atomic(prefix() + ".idx", bytes); }
  void write_bin(const std::string& bytes) { write_file_atomic(prefix() + ".bin", bytes); }
  template <typename T>
  std::string patched(size_t offset, T value) const {
    std::string s = idx_;
    std::memcpy(s.data() + offset, &value, sizeof value);
    return s;
  }
  // Opens the dataset and expects an Error whose message names `file` and says `what`.
  void expect_error(const std::string& file, const std::string& what) {
    try {
      MegatronReader r(prefix());
      ADD_FAILURE() << "no error; expected one about " << what;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(file));
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  }

  TempDir dir_;
  std::string idx_, bin_;
  // 5 sequences (10 tokens, 20 bytes) and 4 document indices: 0, 2, 3, 5.
  static constexpr size_t kPointers = kMegatronHeaderBytes + 5 * 4, kDocs = kPointers + 5 * 8;
};

TEST_F(MegatronCorrupt, Intact) { EXPECT_NO_THROW(MegatronReader{prefix()}); }

TEST_F(MegatronCorrupt, WrongMagic) {
  write_idx(patched<char>(3, 'X'));
  expect_error("c.idx", "magic");
}

TEST_F(MegatronCorrupt, WrongVersion) {
  write_idx(patched<uint64_t>(9, 2));
  expect_error("c.idx: byte 9", "version 2");
}

TEST_F(MegatronCorrupt, BadDtypeCode) {
  write_idx(patched<uint8_t>(17, 9));
  expect_error("c.idx: byte 17", "code 9");
  write_idx(patched<uint8_t>(17, 0));
  expect_error("c.idx: byte 17", "code 0");
}

TEST_F(MegatronCorrupt, TruncatedIdxAtEveryLength) {
  for (size_t n = 0; n < idx_.size(); ++n) {
    write_idx(idx_.substr(0, n));
    try {
      MegatronReader r(prefix());
      ADD_FAILURE() << "truncated to " << n << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("c.idx")) << n;
    }
  }
}

TEST_F(MegatronCorrupt, TrailingIdxBytes) {
  write_idx(idx_ + std::string(6, '\0'));
  expect_error("c.idx", "multimodal");
}

TEST_F(MegatronCorrupt, TruncatedBin) {
  write_bin(bin_.substr(0, bin_.size() - 2));
  expect_error("c.bin", "past the end of the .bin");
  write_bin(bin_ + "xx");
  expect_error("c.bin", "found 22");
  std::filesystem::remove(prefix() + ".bin");
  expect_error("c.bin", "No such file");
}

TEST_F(MegatronCorrupt, CountsThatOverflow) {
  write_idx(patched<uint64_t>(18, uint64_t(1) << 62));
  expect_error("c.idx", "impossibly large");
  write_idx(patched<uint64_t>(26, ~uint64_t(0)));
  expect_error("c.idx", "impossibly large");
  write_idx(patched<uint64_t>(18, 1000));
  expect_error("c.idx", "truncated .idx or corrupt counts");
  write_idx(patched<uint64_t>(26, 0));
  expect_error("c.idx: byte 26", "document count");
}

TEST_F(MegatronCorrupt, NegativeLength) {
  write_idx(patched<int32_t>(kMegatronHeaderBytes + 4, -1));
  expect_error("c.idx: byte 38", "non-negative length");
}

TEST_F(MegatronCorrupt, LengthsThatDisagreeWithTheBin) {
  write_idx(patched<int32_t>(kMegatronHeaderBytes + 4 * 4, 5));  // last sequence one token longer
  expect_error("c.bin", "past the end");
  write_idx(patched<int32_t>(kMegatronHeaderBytes + 4 * 4, 3));
  expect_error("c.bin", "expected 18 bytes");
}

TEST_F(MegatronCorrupt, PointersThatDisagree) {
  write_idx(patched<int64_t>(kPointers + 8, 2));
  expect_error(cat("c.idx: byte ", kPointers + 8), "expected byte pointer 6");
  write_idx(patched<int64_t>(kPointers, -8));
  expect_error("c.idx", "expected byte pointer 0");
}

TEST_F(MegatronCorrupt, DocumentIndices) {
  write_idx(patched<int64_t>(kDocs, 1));
  expect_error(cat("c.idx: byte ", kDocs), "document_indices[0] == 0");
  write_idx(patched<int64_t>(kDocs + 16, 1));
  expect_error(cat("c.idx: byte ", kDocs + 16), "document_indices[2]");
  write_idx(patched<int64_t>(kDocs + 8, 7));
  expect_error("c.idx", "document_indices[1]");
  write_idx(patched<int64_t>(kDocs + 24, 4));
  expect_error(cat("c.idx: byte ", kDocs + 24), "sequence count 5");
}

}  // namespace
}  // namespace pretrain::megatron_test
