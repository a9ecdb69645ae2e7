// tokenizer/tokenizer.{h,cpp}: the parts of the Tokenizer interface every model shares (tokens,
// post-processing, special ids, batches, the casing probe, the manifest's record, the options as
// JSON), on a tokenizer made here; and load_tokenizer: which file means which tokenizer, partners
// found beside each other, directories, the manifest's TokenizerInfo, and errors that name the file.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "test_util.h"

namespace pretrain::tokenizer_test {
namespace {

namespace fs = std::filesystem;

// A tokenizer with only what a model must give: [PAD] [CLS] [SEP], then one token per lowercase
// letter and "é". It folds uppercase letters, and "é" to "e", when told to; other bytes are dropped.
class Letters final : public Tokenizer {
 public:
  Letters(bool lowercase, bool strip_accents, bool with_letters = true)
      : lowercase_(lowercase), strip_accents_(strip_accents) {
    vocab_ = {"[PAD]", "[CLS]", "[SEP]", "\xc3\xa9"};
    if (with_letters)
      for (char c = 'a'; c <= 'z'; ++c) vocab_.push_back(std::string(1, c));
  }
  std::string_view kind() const override { return "letters"; }
  void encode_into(std::string_view text, std::vector<TokenId>& ids) const override {
    for (size_t i = 0; i < text.size(); ++i) {
      std::string one(1, text[i]);
      if (text.substr(i, 2) == "\xc3\xa9") one = strip_accents_ ? "e" : "\xc3\xa9", ++i;
      if (lowercase_ && one[0] >= 'A' && one[0] <= 'Z') one[0] = char(one[0] - 'A' + 'a');
      if (auto id = token_to_id(one)) ids.push_back(*id);
    }
  }
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::string out;
    for (TokenId id : ids)
      if (!skip_special_tokens || !is_special(id)) out += id_to_token(id);
    return out;
  }
  std::optional<TokenId> token_to_id(std::string_view token) const override {
    for (size_t i = 0; i < vocab_.size(); ++i)
      if (vocab_[i] == token) return TokenId(i);
    return std::nullopt;
  }
  std::string id_to_token(TokenId id) const override { return vocab_.at(size_t(id)); }
  int64_t vocab_size() const override { return int64_t(vocab_.size()); }
  const std::map<std::string, TokenId>& special_ids() const override { return special_; }

 private:
  bool lowercase_, strip_accents_;
  std::vector<std::string> vocab_;
  std::map<std::string, TokenId> special_ = {{"pad", 0}, {"cls", 1}, {"sep", 2}};
};

TEST(Tokenizer, SharedPartsBuildOnTheModelsOwn) {
  const Letters tok(true, true);
  const std::vector<TokenId> abc = tok.encode("abc");
  EXPECT_EQ(abc, (std::vector<TokenId>{4, 5, 6}));
  EXPECT_EQ(tok.tokenize("cab"), (std::vector<std::string>{"c", "a", "b"}));  // id_to_token of each id
  // The default post-processor adds nothing; a pair is joined.
  EXPECT_EQ(tok.encode("abc", true), abc);
  const std::vector<TokenId> d{7};
  const std::span<const TokenId> second(d);
  EXPECT_EQ(tok.post_process(abc, &second), (std::vector<TokenId>{4, 5, 6, 7}));
  EXPECT_EQ(tok.post_process(std::span<const TokenId>()), std::vector<TokenId>{});
  for (TokenId id : {0, 1, 2}) EXPECT_TRUE(tok.is_special(id)) << id;
  for (TokenId id : {3, 4, 29}) EXPECT_FALSE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.decode(tok.encode("Zoe"), true), "zoe");
  // Batches: result i is text i's, for both spellings of the texts.
  std::vector<std::string> texts;
  for (int i = 0; i < 500; ++i) texts.push_back(std::string(size_t(i % 13), char('a' + i % 26)) + "Q");
  const auto batch = tok.encode_batch(texts);
  std::vector<std::string_view> views(texts.begin(), texts.end());
  const auto from_views = tok.encode_batch(std::span<const std::string_view>(views), true);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_EQ(batch[i], tok.encode(texts[i])) << i;
    ASSERT_EQ(from_views[i], tok.encode(texts[i], true)) << i;
  }
  EXPECT_TRUE(tok.encode_batch(std::vector<std::string>{}).empty());
  EXPECT_EQ(tok.source(), "") << "no files until set_source";
}

// The default casing() encodes a word of the vocabulary uppercased, and with an 'e' accented: it
// lowercases (strips accents) when they encode as the word itself.
TEST(Tokenizer, CasingIsFoundByEncodingWordsOfTheVocabulary) {
  for (bool lower : {false, true})
    for (bool strip : {false, true}) {
      const TokenizerCasing casing = Letters(lower, strip).casing();
      EXPECT_EQ(casing.lowercase, lower) << lower << strip;
      EXPECT_EQ(casing.strip_accents, std::optional<bool>(strip)) << lower << strip;
    }
  // No word of plain letters: the alphabet is the probe, and accents stay unknown.
  const TokenizerCasing none = Letters(true, true, false).casing();
  EXPECT_FALSE(none.strip_accents.has_value());
}

// set_source: the files' joined names, one file's xxh3 or the xxh3 of several files' xxh3s, the
// options and casing, and the special tokens by role in info().
TEST(Tokenizer, TheRecordIsWhatSetSourceWasGiven) {
  Letters tok(true, false);
  TokenizerOptions options;
  options.lowercase = true;
  options.max_input_chars_per_word = 50;
  const TokenizerFile vocab{"vocab", "v.json", 10, "0123456789abcdef"}, merges{"merges", "m.txt", 20, "fedcba9876543210"};
  tok.set_source({vocab}, options);
  EXPECT_EQ(tok.source(), "v.json");
  TokenizerInfo info = tok.info();
  EXPECT_TRUE(info.has_record());
  EXPECT_EQ(info.kind, "letters");
  EXPECT_EQ(info.vocab_size, 30);
  EXPECT_EQ(info.vocab_hash, "0123456789abcdef");
  EXPECT_EQ(info.options, tokenizer_options_to_json(options));
  EXPECT_TRUE(info.casing.lowercase);
  EXPECT_EQ(info.casing.strip_accents, std::optional<bool>(false));
  EXPECT_EQ(info.special_ids, (std::map<std::string, int64_t>{{"cls", 1}, {"pad", 0}, {"sep", 2}}));
  EXPECT_EQ(info.special_tokens.at("sep").token, "[SEP]");
  EXPECT_EQ(info.special_tokens.at("sep").id, 2);
  tok.set_source({vocab, merges}, {});
  EXPECT_EQ(tok.source(), "v.json + m.txt");
  const std::string joined = vocab.xxh3 + merges.xxh3;
  EXPECT_EQ(tok.info().vocab_hash, hex64(xxh3_bytes(joined.data(), joined.size())));
  ASSERT_EQ(tok.info().files.size(), 2u);
  EXPECT_EQ(tok.info().files[1].path, "m.txt");
  // Without a record, info() names no special tokens.
  EXPECT_TRUE(Letters(true, true).info().special_tokens.empty());
}

// The options that change ids, as the record keeps them, and back; a field of the wrong type is
// an Error naming the source and the field.
TEST(Tokenizer, OptionsRoundTripThroughJson) {
  TokenizerOptions o;
  o.lowercase = false;
  o.split_cjk = false;
  o.max_input_chars_per_word = 200;
  o.python_compat = true;
  o.bpe_cache_words = 7;  // not recorded: it changes no ids
  const nlohmann::json j = tokenizer_options_to_json(o);
  EXPECT_EQ(j, (nlohmann::json{{"lowercase", false}, {"strip_accents", nullptr}, {"split_cjk", false},
                               {"max_input_chars_per_word", 200}, {"python_compat", true}}));
  const TokenizerOptions back = tokenizer_options_from_json(j, "m.json");
  EXPECT_EQ(back.lowercase, std::optional<bool>(false));
  EXPECT_FALSE(back.strip_accents.has_value());
  EXPECT_FALSE(back.split_cjk);
  EXPECT_EQ(back.max_input_chars_per_word, 200);
  EXPECT_TRUE(back.python_compat);
  EXPECT_EQ(tokenizer_options_to_json(back), j);
  // Absent fields take the defaults; a key this version does not know is left alone.
  const TokenizerOptions defaults = tokenizer_options_from_json(nlohmann::json{{"future", 1}}, "m.json");
  EXPECT_EQ(tokenizer_options_to_json(defaults), tokenizer_options_to_json(TokenizerOptions{}));
  auto error = [](const nlohmann::json& bad) {
    return testing::error_message([&] { tokenizer_options_from_json(bad, "runs/m.json"); });
  };
  for (const auto& [bad, part] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"split_cjk", "yes"}}, "tokenizer option 'split_cjk'"},
           {{{"lowercase", 1}}, "tokenizer option 'lowercase'"},
           {{{"max_input_chars_per_word", 1.5}}, "tokenizer option 'max_input_chars_per_word'"},
           {{{"max_input_chars_per_word", int64_t{1} << 40}}, "tokenizer option 'max_input_chars_per_word'"},
           {nlohmann::json::array(), "expected the tokenizer's options to be an object, found array"}}) {
    const std::string message = error(bad);
    EXPECT_NE(message.find("runs/m.json"), std::string::npos) << message;
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

std::string error_of(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LoadTokenizer, RecognisesEachKindByItsFiles) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  PRETRAIN_REQUIRE_SHARED(merges, "vocab/gpt2-vocab.bpe");
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  EXPECT_EQ(load_tokenizer(vocab)->kind(), "wordpiece");
  EXPECT_EQ(load_tokenizer(model)->kind(), "sentencepiece");
  // Either GPT-2 file finds the other (shared prefix "gpt2-"), and both give the same tokenizer.
  auto from_encoder = load_tokenizer(encoder), from_merges = load_tokenizer(merges);
  EXPECT_EQ(from_encoder->kind(), "bpe");
  EXPECT_EQ(from_encoder->info().vocab_hash, from_merges->info().vocab_hash);
  EXPECT_EQ(from_encoder->encode("Hello world"), from_merges->encode("Hello world"));
  EXPECT_EQ(from_encoder->vocab_size(), 50257);
  EXPECT_EQ(from_encoder->special_ids().at("eod"), 50256);
}

TEST(LoadTokenizer, InfoIsWhatTheManifestRecords) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  auto tok = load_tokenizer(vocab);
  TokenizerInfo info = tok->info();
  EXPECT_EQ(info.kind, "wordpiece");
  EXPECT_EQ(info.vocab_size, 30522);
  EXPECT_EQ(info.vocab_hash, hex64(xxh3_file(vocab)));
  EXPECT_EQ(info.special_ids.at("cls"), 101);
  EXPECT_EQ(info.special_ids.at("sep"), 102);
  EXPECT_EQ(info.special_ids.at("mask"), 103);
  EXPECT_EQ(info.special_ids.at("pad"), 0);
  EXPECT_TRUE(tok->is_special(101));
  EXPECT_FALSE(tok->is_special(2000));
  // The post-processor wraps a pair as BERT does.
  std::vector<TokenId> a{7592}, b{2088};
  std::span<const TokenId> bs(b);
  EXPECT_EQ(tok->post_process(a, &bs), (std::vector<TokenId>{101, 7592, 102, 2088, 102}));
  EXPECT_EQ(tok->encode("hello", true), (std::vector<TokenId>{101, 7592, 102}));
}

TEST(LoadTokenizer, DirectoriesPickTheDocumentedFile) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  testing::TempDir dir;
  fs::create_directories(dir.file("wp"));
  fs::copy_file(vocab, dir.file("wp/vocab.txt"));
  EXPECT_EQ(load_tokenizer(dir.file("wp"))->kind(), "wordpiece");
  fs::create_directories(dir.file("spm"));
  fs::copy_file(model, dir.file("spm/m.model"));
  EXPECT_EQ(load_tokenizer(dir.file("spm"))->kind(), "sentencepiece");
  fs::create_directories(dir.file("empty"));
  EXPECT_NE(error_of(dir.file("empty")).find("no tokenizer here"), std::string::npos);
}

TEST(LoadTokenizer, ErrorsNameTheFile) {
  testing::TempDir dir;
  EXPECT_NE(error_of(dir.file("nope.txt")).find("nope.txt"), std::string::npos);
  // A BPE file without its partner.
  write_file_atomic(dir.file("lonely-encoder.json"), "{\"a\": 0}");
  std::string e = error_of(dir.file("lonely-encoder.json"));
  EXPECT_NE(e.find("lonely-encoder.json"), std::string::npos) << e;
  EXPECT_NE(e.find("partner"), std::string::npos) << e;
  // tokenizer.json that is not JSON, or has no model.
  write_file_atomic(dir.file("tokenizer.json"), "{\"model\": ");
  e = error_of(dir.file("tokenizer.json"));
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  write_file_atomic(dir.file("tokenizer.json"), "{\"model\": {\"type\": \"Unigram\"}}");
  e = error_of(dir.file("tokenizer.json"));
  EXPECT_NE(e.find("Unigram"), std::string::npos) << e;
  // Not a SentencePiece model.
  write_file_atomic(dir.file("bad.model"), "not a protobuf");
  EXPECT_NE(error_of(dir.file("bad.model")).find("bad.model"), std::string::npos);
}

TEST(LoadTokenizer, EncodeBatchKeepsTheOrder) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-cased-vocab.txt");
  auto tok = load_tokenizer(vocab);
  std::vector<std::string> texts;
  for (int i = 0; i < 3000; ++i) texts.push_back("Sentence number " + std::to_string(i) + (i % 7 ? "" : " with more words in it"));
  auto batch = tok->encode_batch(texts);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(batch[i], tok->encode(texts[i])) << i;
}

}  // namespace
}  // namespace pretrain::tokenizer_test
