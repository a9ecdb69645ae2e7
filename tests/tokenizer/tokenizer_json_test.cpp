// The tokenizer.json reader: what it hands WordPiece and BPE from a file, and errors that name the
// file (and the entry: merges[i], added_tokens[i]) for malformed JSON, missing or mistyped fields,
// bad ids and added-token flags a model does not take.
#include "tokenizer/tokenizer_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gpt2_pretokenize.h"
#include "tokenizer/wordpiece.h"

namespace pretrain::tokenizer_json_test {
namespace {

using testing::TempDir;
using testing::error_message;

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A WordPiece tokenizer.json as tokenizers writes BERT's, small.
nlohmann::json wordpiece_json() {
  return nlohmann::json::parse(R"({
    "added_tokens": [{"id": 0, "content": "[UNK]", "special": true, "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false},
                     {"id": 5, "content": "<new>", "special": false, "single_word": true, "lstrip": true,
                      "rstrip": false, "normalized": false}],
    "normalizer": {"type": "BertNormalizer", "clean_text": false, "handle_chinese_chars": true,
                   "strip_accents": null, "lowercase": false},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing"},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "@@",
              "max_input_chars_per_word": 5, "vocab": {"[UNK]": 0, "Ab": 1, "@@c": 2, "ab": 3, "é": 4}}})");
}

// A byte-level BPE tokenizer.json as tokenizers writes GPT-2's: all 256 byte tokens, two merges.
nlohmann::json bpe_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2::byte_token(static_cast<uint8_t>(b))] = b;
  vocab["he"] = 256;
  vocab["hel"] = 257;
  vocab["<|endoftext|>"] = 258;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"},         {"dropout", nullptr},           {"unk_token", nullptr},
                {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"vocab", vocab}};
  j["model"]["merges"] = nlohmann::json::array({"h e", nlohmann::json::array({"he", "l"})});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", nlohmann::json::array({{{"type", "ByteLevel"}, {"add_prefix_space", true},
                                                                  {"trim_offsets", true}, {"use_regex", true}}})}};
  j["added_tokens"] = nlohmann::json::array({{{"id", 258}, {"content", "<|endoftext|>"}, {"special", true},
                                              {"single_word", false}, {"lstrip", false}, {"rstrip", false}}});
  return j;
}

// ---- What the reader hands over ------------------------------------------------------------

TEST(TokenizerJson, ReadsWordPieceParts) {
  TempDir dir;
  std::string path = write(dir, "tokenizer.json", wordpiece_json().dump(2));
  TokenizerJson j = read_tokenizer_json(path);
  EXPECT_EQ(j.source, path);
  EXPECT_EQ(j.model_type, "WordPiece");
  EXPECT_EQ(j.vocab, (std::vector<std::pair<std::string, TokenId>>{
                         {"@@c", 2}, {"Ab", 1}, {"[UNK]", 0}, {"ab", 3}, {"é", 4}}));  // key order
  EXPECT_TRUE(j.merges.empty());
  EXPECT_EQ(j.unk_token, "[UNK]");
  EXPECT_EQ(j.continuing_subword_prefix, "@@");
  EXPECT_EQ(j.max_input_chars_per_word, 5);
  ASSERT_TRUE(j.normalizer);
  EXPECT_EQ(j.normalizer->type, "BertNormalizer");
  EXPECT_FALSE(j.normalizer->clean_text);
  EXPECT_TRUE(j.normalizer->handle_chinese_chars);
  EXPECT_FALSE(j.normalizer->lowercase);
  EXPECT_FALSE(j.normalizer->strip_accents.has_value());  // null: follow lowercase
  ASSERT_TRUE(j.pre_tokenizer);
  EXPECT_EQ(j.pre_tokenizer->type, "BertPreTokenizer");
  ASSERT_EQ(j.added_tokens.size(), 2u);
  EXPECT_EQ(j.added_tokens[1].content, "<new>");
  EXPECT_EQ(j.added_tokens[1].id, 5);
  EXPECT_TRUE(j.added_tokens[1].single_word);
  EXPECT_TRUE(j.added_tokens[1].lstrip);
  // WordPiece takes single_word and ignores lstrip: the file loads, and "<new>" is kept whole
  // only where no word character touches it.
  auto tok = make_wordpiece_tokenizer_from_hf(j, {});
  EXPECT_EQ(tok->encode("ab <new> ab<new>"), (std::vector<TokenId>{3, 5, 3, 0, 0, 0}));  // ab < new >
}

TEST(TokenizerJson, ReadsBpeParts) {
  TokenizerJson j = parse_tokenizer_json(bpe_json(), "gpt.json");
  EXPECT_EQ(j.source, "gpt.json");
  EXPECT_EQ(j.model_type, "BPE");
  EXPECT_EQ(j.vocab.size(), 259u);
  EXPECT_EQ(j.merges, (std::vector<std::pair<std::string, std::string>>{{"h", "e"}, {"he", "l"}}));
  EXPECT_FALSE(j.unk_token.has_value());
  EXPECT_EQ(j.continuing_subword_prefix, "");
  EXPECT_EQ(j.dropout, 0);
  EXPECT_FALSE(j.ignore_merges);
  EXPECT_FALSE(j.normalizer);
  ASSERT_TRUE(j.pre_tokenizer);
  EXPECT_EQ(j.pre_tokenizer->type, "ByteLevel");  // out of its one-step Sequence
  EXPECT_TRUE(j.pre_tokenizer->add_prefix_space);
  EXPECT_TRUE(j.pre_tokenizer->use_regex);
  ASSERT_EQ(j.added_tokens.size(), 1u);
  EXPECT_TRUE(j.added_tokens[0].special);
  auto tok = make_bpe_tokenizer_from_hf(j, {});
  // add_prefix_space: " hel" → "Ġ" (byte 32's token, id 32 here) "hel"; then the added token.
  EXPECT_EQ(tok->encode("hel<|endoftext|>"), (std::vector<TokenId>{32, 257, 258}));
}

// ---- Errors name the file and the entry ----------------------------------------------------

TEST(TokenizerJson, MalformedJsonNamesTheFileAndOffset) {
  TempDir dir;
  std::string path = write(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\",}");
  std::string e = error_message([&] { read_tokenizer_json(path); });
  EXPECT_NE(e.find(path + ": byte "), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  e = error_message([&] { read_tokenizer_json(dir.file("missing.json")); });
  EXPECT_NE(e.find("missing.json"), std::string::npos) << e;
}

TEST(TokenizerJson, MissingAndMistypedFieldsNameTheFile) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string expect;
  } cases[] = {
      {[](nlohmann::json& j) { j = nlohmann::json::array(); }, "an object with a \"model\" object"},
      {[](nlohmann::json& j) { j.erase("model"); }, "an object with a \"model\" object"},
      {[](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }, "found \"Unigram\""},
      {[](nlohmann::json& j) { j["model"]["type"] = 3; }, "model.type"},
      {[](nlohmann::json& j) { j["model"].erase("vocab"); }, "model.vocab must be an object"},
      {[](nlohmann::json& j) { j["model"]["vocab"] = nlohmann::json::array(); }, "model.vocab must be an object"},
      {[](nlohmann::json& j) { j["model"]["vocab"]["x"] = "one"; }, "\"x\" is not an integer"},
      {[](nlohmann::json& j) { j["model"]["vocab"]["x"] = 1.5; }, "\"x\" is not an integer"},
      {[](nlohmann::json& j) { j["model"]["vocab"]["x"] = -1; }, "\"x\" is out of range"},
      {[](nlohmann::json& j) { j["model"]["vocab"]["x"] = int64_t{1} << 40; }, "\"x\" is out of range"},
      {[](nlohmann::json& j) { j["model"].erase("merges"); }, "model.merges must be an array"},
      {[](nlohmann::json& j) { j["model"]["unk_token"] = 5; }, "model.unk_token: expected a string"},
      {[](nlohmann::json& j) { j["model"]["dropout"] = "none"; }, "model.dropout: expected a number"},
      {[](nlohmann::json& j) { j["model"]["ignore_merges"] = 1; }, "model.ignore_merges: expected true or false"},
      {[](nlohmann::json& j) { j["normalizer"] = "NFC"; }, "normalizer: expected an object or null"},
      {[](nlohmann::json& j) { j["pre_tokenizer"] = 7; }, "pre_tokenizer: expected an object or null"},
      {[](nlohmann::json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", "yes"}}; },
       "pre_tokenizer.use_regex"},
      {[](nlohmann::json& j) { j["added_tokens"] = {{"id", 1}}; }, "added_tokens: expected an array"},
  };
  TempDir dir;
  for (const Case& c : cases) {
    nlohmann::json j = bpe_json();
    c.edit(j);
    std::string path = write(dir, "tokenizer.json", j.dump());
    std::string e = error_message([&] { read_tokenizer_json(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected \"" << c.expect << "\" in: " << e;
  }
}

TEST(TokenizerJson, BadEntriesNameTheEntry) {
  TempDir dir;
  auto error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = bpe_json();
    edit(j);
    std::string path = write(dir, "tok.json", j.dump());
    return std::make_pair(path, error_message([&] { read_tokenizer_json(path); }));
  };
  auto [path, e] = error([](nlohmann::json& j) { j["model"]["merges"].push_back("a b c"); });
  EXPECT_NE(e.find(path + ": record 2"), std::string::npos) << e;
  EXPECT_NE(e.find("merges[2]"), std::string::npos) << e;
  std::tie(path, e) = error([](nlohmann::json& j) { j["model"]["merges"][0] = {{"left", "h"}}; });
  EXPECT_NE(e.find("merges[0]"), std::string::npos) << e;
  std::tie(path, e) = error([](nlohmann::json& j) { j["added_tokens"].push_back({{"content", "<x>"}}); });
  EXPECT_NE(e.find(path + ": record 1"), std::string::npos) << e;
  EXPECT_NE(e.find("added_tokens[1]"), std::string::npos) << e;
  std::tie(path, e) = error([](nlohmann::json& j) { j["added_tokens"][0]["id"] = -4; });
  EXPECT_NE(e.find("added_tokens[0]: id -4 out of range"), std::string::npos) << e;
}

// ---- Each model refuses what it does not implement, naming the file and entry ---------------

TEST(TokenizerJson, BpeRefusesStripAndSingleWord) {
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    nlohmann::json j = bpe_json();
    j["added_tokens"].push_back({{"id", 259}, {"content", "<x>"}, {flag, true}});
    std::string e = error_message([&] { make_bpe_tokenizer_from_hf(j, "gpt.json", {}); });
    EXPECT_NE(e.find("gpt.json: record 1"), std::string::npos) << e;
    EXPECT_NE(e.find("added_tokens[1]"), std::string::npos) << e;
    EXPECT_NE(e.find(flag == std::string("single_word") ? "single_word" : "lstrip and rstrip"), std::string::npos) << e;
  }
}

TEST(TokenizerJson, ModelsRefuseOtherPipelines) {
  nlohmann::json wp = wordpiece_json();
  wp["pre_tokenizer"] = {{"type", "Whitespace"}};
  std::string e = error_message([&] { make_wordpiece_tokenizer_from_hf(wp, "wp.json", {}); });
  EXPECT_NE(e.find("wp.json"), std::string::npos) << e;
  EXPECT_NE(e.find("BertPreTokenizer"), std::string::npos) << e;
  nlohmann::json bpe = bpe_json();
  bpe["normalizer"] = {{"type", "NFC"}};
  e = error_message([&] { make_bpe_tokenizer_from_hf(bpe, "gpt.json", {}); });
  EXPECT_NE(e.find("gpt.json"), std::string::npos) << e;
  EXPECT_NE(e.find("normalizer"), std::string::npos) << e;
  // Each model refuses the other's file.
  e = error_message([&] { make_bpe_tokenizer_from_hf(wordpiece_json(), "wp.json", {}); });
  EXPECT_NE(e.find("expected a BPE model"), std::string::npos) << e;
  e = error_message([&] { make_wordpiece_tokenizer_from_hf(bpe_json(), "gpt.json", {}); });
  EXPECT_NE(e.find("expected a WordPiece model"), std::string::npos) << e;
}

// read_flat_vocab_json (the encoder.json fast path) gives read_vocab_object's entries, in file
// order, and declines every text whose document would say something else or raise an error.
std::vector<std::pair<std::string, TokenId>> sorted(std::vector<std::pair<std::string, TokenId>> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(TokenizerJson, FlatVocabFastPathMatchesTheDocument) {
  const std::string text = R"({"b": 1, "a": 0, "\u0120the": 2, "caf\u00e9": 16777215, "x\"y": 3})";
  auto fast = read_flat_vocab_json(text);
  ASSERT_TRUE(fast);
  EXPECT_EQ((*fast)[0], (std::pair<std::string, TokenId>{"b", 1}));  // file order
  EXPECT_EQ(sorted(*fast), read_vocab_object(nlohmann::json::parse(text), Where{"v.json"}));
  EXPECT_EQ(sorted(*fast)[0].first, "a");
  EXPECT_TRUE(read_flat_vocab_json("{}") && read_flat_vocab_json("{}")->empty());
  for (const char* declined : {
           R"({"a": 0, "a": 1})",        // a key twice: the document keeps the last
           R"({"a": 0, "b": 0})",        // an id twice: an error naming both
           R"({"a": -1})", R"({"a": 16777216})", R"({"a": 1.0})", R"({"a": "1"})", R"({"a": null})",
           R"({"a": true})", R"({"a": [1]})", R"({"a": {"b": 1}})", R"([1, 2])", "7", R"({"a": 1)",
           R"({"a": 1} x)", ""}) {
    EXPECT_FALSE(read_flat_vocab_json(declined)) << declined;
  }
}

TEST(TokenizerJson, Gpt2EncoderFastPathMatchesTheDocument) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  const std::string text = read_file(encoder);
  auto fast = read_flat_vocab_json(text);
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->size(), 50257u);
  EXPECT_EQ(sorted(*fast), read_vocab_object(nlohmann::json::parse(text), Where{encoder}));
}

}  // namespace
}  // namespace pretrain::tokenizer_json_test
