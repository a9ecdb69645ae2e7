// The ModelProto reader against libsentencepiece's own view of the same models (pieces, scores,
// types, special ids), the fields it reads that the library does not report (model type,
// normalizer spec), malformed bytes as errors naming the file and byte, and the tokenizer.json
// conversion's shape and refusals. That the converted tokenizer.json encodes as spm_encode is
// checked with HF tokenizers in tests/e2e/test_hf_export.py.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/train_sentencepiece.h"

namespace pretrain::sentencepiece_model_test {
namespace {

using ::pretrain::testing::TempDir;
using Proto = SentencePieceModelProto;

// Every piece as the library reports it: the reader must agree id by id.
void expect_matches_library(const Proto& m, const std::string& bytes) {
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.LoadFromSerializedProto(bytes).ok());
  ASSERT_EQ(int(m.pieces.size()), sp.GetPieceSize());
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    const auto& p = m.pieces[size_t(id)];
    ASSERT_EQ(p.piece, sp.IdToPiece(id)) << "id " << id;
    ASSERT_EQ(p.score, sp.GetScore(id)) << "id " << id;
    ASSERT_EQ(p.type == Proto::PieceType::control, sp.IsControl(id)) << "id " << id;
    ASSERT_EQ(p.type == Proto::PieceType::unknown, sp.IsUnknown(id)) << "id " << id;
    ASSERT_EQ(p.type == Proto::PieceType::unused, sp.IsUnused(id)) << "id " << id;
    ASSERT_EQ(p.type == Proto::PieceType::byte, sp.IsByte(id)) << "id " << id;
  }
  EXPECT_EQ(m.unk_id, sp.unk_id());
  EXPECT_EQ(m.bos_id, sp.bos_id());
  EXPECT_EQ(m.eos_id, sp.eos_id());
  EXPECT_EQ(m.pad_id, sp.pad_id());
}

TEST(SentencePieceModel, TestModelFieldsAreTheLibrarys) {
  PRETRAIN_REQUIRE_SHARED(path, "vocab/spm-test_model.model");
  const Proto m = read_sentencepiece_model(path);
  expect_matches_library(m, read_file(path));
  // Per the shared data's README: 1000 pieces, unigram, nfkc.
  EXPECT_EQ(m.pieces.size(), 1000u);
  EXPECT_EQ(m.vocab_size, 1000);
  EXPECT_EQ(m.model_type, Proto::ModelType::unigram);
  EXPECT_EQ(m.pieces[0].piece, "<unk>");
  EXPECT_EQ(m.pieces[0].type, Proto::PieceType::unknown);
  EXPECT_EQ(m.pieces[1].type, Proto::PieceType::control);  // <s>
  EXPECT_EQ(m.pieces[459].piece, "\u2581saw");              // sentencepiece_test.cpp's spm_encode ids
  EXPECT_EQ(m.unk_id, 0);
  EXPECT_EQ(m.pad_id, -1);
  EXPECT_EQ(m.normalizer_name, "nfkc");
  EXPECT_FALSE(m.precompiled_charsmap.empty());
  EXPECT_TRUE(m.add_dummy_prefix);
  EXPECT_TRUE(m.remove_extra_whitespaces);
  EXPECT_TRUE(m.escape_whitespaces);
  EXPECT_FALSE(m.byte_fallback);
}

TEST(SentencePieceModel, JapaneseModelFieldsAreTheLibrarys) {
  PRETRAIN_REQUIRE_SHARED(path, "vocab/spm-test_ja_model.model");
  const Proto m = read_sentencepiece_model(path);
  expect_matches_library(m, read_file(path));
  EXPECT_EQ(m.pieces.size(), 8000u);
  EXPECT_EQ(m.model_type, Proto::ModelType::unigram);
  EXPECT_EQ(m.normalizer_name, "nfkc");
  EXPECT_FALSE(m.precompiled_charsmap.empty());
}

// Models trained here (no shared data): BPE and byte fallback are read as set.
TEST(SentencePieceModel, TrainedBpeModelWithByteFallback) {
  std::vector<std::string> lines;
  for (int i = 0; i < 200; ++i)
    lines.push_back(cat("the lighthouse ", i, " stands on the rock and guides the ships home at night"));
  SentencePieceTrainerOptions options;
  options.vocab_size = 300;  // 256 byte pieces + a few merges
  options.model_type = "bpe";
  options.byte_fallback = true;
  const SentencePieceModel trained = train_sentencepiece(
      [&](const TextSink& sink) {
        for (const auto& l : lines) sink(l);
      },
      options);
  const Proto m = parse_sentencepiece_model(trained.model, "trained.model");
  expect_matches_library(m, trained.model);
  EXPECT_EQ(m.model_type, Proto::ModelType::bpe);
  EXPECT_TRUE(m.byte_fallback);
  EXPECT_EQ(m.normalizer_name, "nmt_nfkc");  // spm_train's default
  EXPECT_FALSE(m.precompiled_charsmap.empty());
  EXPECT_EQ(m.pieces[3].piece, "<0x00>");  // after <unk>, <s>, </s>
  EXPECT_EQ(m.pieces[3].type, Proto::PieceType::byte);

  TempDir tmp;
  write_file_atomic(tmp.file("bpe.model"), trained.model);
  const auto j = nlohmann::json::parse(sentencepiece_to_hf_json(tmp.file("bpe.model")));
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["model"]["vocab"].size(), m.pieces.size());
  EXPECT_TRUE(j["model"]["byte_fallback"]);
  EXPECT_FALSE(j["model"]["merges"].empty());
}

TEST(SentencePieceModel, ConvertsToUnigramTokenizerJson) {
  PRETRAIN_REQUIRE_SHARED(path, "vocab/spm-test_model.model");
  const Proto m = read_sentencepiece_model(path);
  const auto j = nlohmann::json::parse(sentencepiece_to_hf_json(path));
  EXPECT_EQ(j["model"]["type"], "Unigram");
  EXPECT_EQ(j["model"]["unk_id"], 0);
  ASSERT_EQ(j["model"]["vocab"].size(), 1000u);
  EXPECT_EQ(j["model"]["vocab"][459][0], "\u2581saw");
  EXPECT_EQ(j["model"]["vocab"][459][1].get<double>(), double(m.pieces[459].score));  // the float, exactly
  const auto& charsmap = j["normalizer"]["normalizers"][0];
  EXPECT_EQ(charsmap["type"], "Precompiled");
  EXPECT_EQ(charsmap["precompiled_charsmap"].get<std::string>().size(), (m.precompiled_charsmap.size() + 2) / 3 * 4);
  EXPECT_EQ(j["pre_tokenizer"]["type"], "Metaspace");
  EXPECT_EQ(j["pre_tokenizer"]["prepend_scheme"], "first");
  // <s> and </s> are special added tokens, <unk> is the model's.
  ASSERT_EQ(j["added_tokens"].size(), 2u);
  EXPECT_EQ(j["added_tokens"][1]["content"], "</s>");
  EXPECT_TRUE(j["added_tokens"][1]["special"]);
}

// --- hand-made protos, for errors and refusals

std::string varint(uint64_t v) {
  std::string out;
  do {
    out += char((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return out;
}
std::string field(uint32_t number, std::string_view bytes) {
  return varint(number << 3 | 2) + varint(bytes.size()) + std::string(bytes);
}
std::string field_varint(uint32_t number, uint64_t v) { return varint(number << 3) + varint(v); }

std::string piece(const std::string& text, int type) { return field(1, field(1, text) + field_varint(3, uint64_t(type))); }

TEST(SentencePieceModel, HandMadeProtoWithDefaultsAndNegativeIds) {
  // pad_id -1 is a 10-byte varint; absent fields keep proto2's defaults; unknown ones are skipped.
  const std::string bytes = piece("<unk>", 2) + piece("a", 1) +
                            field(2, field_varint(3, 2) + field_varint(43, uint64_t(int64_t(-1))) +
                                         field_varint(41, uint64_t(int64_t(-1))) + field_varint(999, 7)) +
                            field(3, field(1, "identity") + field_varint(3, 0));
  const Proto m = parse_sentencepiece_model(bytes, "hand.model");
  ASSERT_EQ(m.pieces.size(), 2u);
  EXPECT_EQ(m.pieces[1].piece, "a");
  EXPECT_EQ(m.pieces[1].score, 0.0f);
  EXPECT_EQ(m.model_type, Proto::ModelType::bpe);
  EXPECT_EQ(m.bos_id, -1);
  EXPECT_EQ(m.pad_id, -1);
  EXPECT_EQ(m.eos_id, 2);  // default
  EXPECT_EQ(m.normalizer_name, "identity");
  EXPECT_FALSE(m.add_dummy_prefix);
  EXPECT_TRUE(m.remove_extra_whitespaces);  // default
  EXPECT_TRUE(m.precompiled_charsmap.empty());
}

TEST(SentencePieceModel, MalformedBytesNameTheFileAndByte) {
  const std::string good = piece("<unk>", 2) + piece("a", 1);
  // Cut inside the second piece: its length says more than is there.
  std::string msg = testing::error_message([&] { parse_sentencepiece_model(good.substr(0, good.size() - 1), "cut.model"); });
  EXPECT_NE(msg.find("cut.model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte " + std::to_string(piece("<unk>", 2).size())), std::string::npos) << msg;
  // A group (wire type 3) where pieces are, and a piece field with the wrong wire type (inside piece 0).
  msg = testing::error_message([&] { parse_sentencepiece_model(std::string("\x0b", 1), "group.model"); });
  EXPECT_NE(msg.find("group.model: byte 0"), std::string::npos) << msg;
  msg = testing::error_message([&] { parse_sentencepiece_model(field(1, field_varint(1, 5)), "type.model"); });
  EXPECT_NE(msg.find("type.model: byte 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("wire type 2"), std::string::npos) << msg;
  // Not a ModelProto at all; no pieces; an unk_id past them.
  EXPECT_THROW(parse_sentencepiece_model("not a model", "text.model"), Error);
  EXPECT_THROW(parse_sentencepiece_model("", "empty.model"), Error);
  EXPECT_THROW(parse_sentencepiece_model(piece("a", 1) + field(2, field_varint(40, 5)), "unk.model"), Error);
  EXPECT_THROW(read_sentencepiece_model("/nonexistent/spm.model"), Error);
}

TEST(SentencePieceModel, ModelsHfCannotExpressAreRefused) {
  TempDir tmp;
  auto refused = [&](const std::string& name, const std::string& bytes, const std::string& why) {
    write_file_atomic(tmp.file(name), bytes);
    const std::string msg = testing::error_message([&] { sentencepiece_to_hf_json(tmp.file(name)); });
    EXPECT_NE(msg.find(tmp.file(name)), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  };
  const std::string pieces = piece("<unk>", 2) + piece("a", 1);
  refused("word.model", pieces + field(2, field_varint(3, 3)), "model type 3");
  refused("suffix.model", pieces + field(2, field_varint(24, 1)), "treat_whitespace_as_suffix");
  refused("unescaped.model", pieces + field(3, field_varint(5, 0)), "escape_whitespaces");
  refused("unused.model", pieces + piece("b", 5), "UNUSED");
  EXPECT_THROW(sentencepiece_to_hf_json(tmp.file("word.model")), UsageError);
}

}  // namespace
}  // namespace pretrain::sentencepiece_model_test
