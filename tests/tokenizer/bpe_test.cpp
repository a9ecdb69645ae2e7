// GPT-2 byte-level BPE: exact ids on texts with newlines (which the line-based compat test cannot
// pass through the tool), round trips, bad input, huge lines, load errors, batch against serial,
// and the tokenizer.json path. The pre-tokenizer's own tests are gpt2_pretokenize_test.cpp, the
// merge step's bpe_merges_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/utf8.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gpt2_pretokenize.h"

namespace pretrain::bpe_test {
namespace {

using ::pretrain::testing::TempDir;

// ---------------------------------------------------------------------------------------------
// A tiny vocabulary in code: the 256 byte tokens and a few merges, as tokenizer.json.

nlohmann::json tiny_tokenizer_json(bool string_merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2::byte_token(static_cast<uint8_t>(b))] = b;
  std::vector<std::pair<std::string, std::string>> merges = {{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"},
                                                             {"a", "a"}, {"aa", "aa"}, {"aa", "a"}};
  nlohmann::json jm = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    if (string_merges)
      jm.push_back(a + " " + b);
    else
      jm.push_back({a, b});
  }
  vocab["<|endoftext|>"] = id;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", jm}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["normalizer"] = nullptr;
  j["added_tokens"] = nlohmann::json::array(
      {{{"id", id}, {"content", "<|endoftext|>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}}});
  return j;
}

TEST(BpeTiny, MergesByRankLeftmostFirst) {
  for (bool string_merges : {false, true}) {
    auto tok = make_bpe_tokenizer_from_hf(tiny_tokenizer_json(string_merges), "tiny.json", {});
    EXPECT_EQ(tok->tokenize(" the"), (std::vector<std::string>{"\u0120the"}));
    // "aaaaa": "a a" merges left to right (aa aa a), then "aa aa" (aaaa a); "aa a" never gets a turn.
    EXPECT_EQ(tok->tokenize("aaaaa"), (std::vector<std::string>{"aaaa", "a"}));
    EXPECT_EQ(tok->tokenize("aaa"), (std::vector<std::string>{"aaa"}));
    EXPECT_EQ(tok->special_ids(), (std::map<std::string, TokenId>{{"eod", 262}}));
    EXPECT_EQ(tok->encode("x<|endoftext|>y"), (std::vector<TokenId>{'x', 262, 'y'}));
    EXPECT_EQ(tok->decode(tok->encode("x<|endoftext|>y"), true), "xy");
  }
}

TEST(BpeTiny, AddedTokensLeftmostLongest) {
  auto j = tiny_tokenizer_json(false);
  j["added_tokens"].push_back({{"id", 263}, {"content", "<x>"}, {"special", false}});
  j["added_tokens"].push_back({{"id", 264}, {"content", "<x>y"}, {"special", true}});
  auto tok = make_bpe_tokenizer_from_hf(j, "tiny.json", {});
  EXPECT_EQ(tok->vocab_size(), 265);
  EXPECT_EQ(tok->encode("a<x>y<x><|endoftext|><x>yb"), (std::vector<TokenId>{'a', 264, 263, 262, 264, 'b'}));
  EXPECT_EQ(tok->decode(tok->encode("a<x>y<x>"), true), "a<x>");  // only special tokens are skipped
  EXPECT_EQ(tok->token_to_id("<x>y"), 264);
  EXPECT_EQ(tok->id_to_token(263), "<x>");
}

TEST(BpeTiny, ThreadCachesStayPerTokenizer) {
  // Two tokenizers on one thread, alternating, with tiny caches that keep clearing.
  auto big = tiny_tokenizer_json(false);
  TokenizerOptions small_cache;
  small_cache.bpe_cache_words = 3;
  auto a = make_bpe_tokenizer_from_hf(big, "a.json", small_cache);
  auto j = big;
  j["model"]["merges"] = nlohmann::json::array();
  auto b = make_bpe_tokenizer_from_hf(j, "b.json", small_cache);
  for (int round = 0; round < 50; ++round) {
    std::string text = "aaaa the " + std::to_string(round) + " aaaaa";
    EXPECT_EQ(a->decode(a->encode(text)), text);
    EXPECT_EQ(b->encode(text).size(), text.size());  // no merges: one token per byte
    EXPECT_LT(a->encode(text).size(), text.size());
  }
}

// ---------------------------------------------------------------------------------------------
// Load errors name the file and the line.

struct TinyFiles {
  TempDir dir;
  std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  explicit TinyFiles(const std::string& merges_text, const std::string& vocab_text = "") {
    auto j = tiny_tokenizer_json(true);
    write_file(vocab, vocab_text.empty() ? j["model"]["vocab"].dump(1) : vocab_text);
    write_file(merges, merges_text);
  }
  static void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
};

std::string load_error(const TinyFiles& f) {
  try {
    make_bpe_tokenizer(f.vocab, f.merges, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BpeLoad, GoodFilesLoad) {
  TinyFiles f("#version: 0.2\n\u0120 t\nh e\n\u0120t he\n\n");
  auto tok = make_bpe_tokenizer(f.vocab, f.merges, {});
  EXPECT_EQ(tok->tokenize(" the"), (std::vector<std::string>{"\u0120the"}));
  auto via_loader = load_tokenizer(f.vocab);
  EXPECT_EQ(via_loader->encode(" the"), tok->encode(" the"));
}

TEST(BpeLoad, ErrorsNameFileAndLine) {
  {
    TinyFiles f("#version: 0.2\nh e\nhe\n");
    EXPECT_NE(load_error(f).find(f.merges + ":3:"), std::string::npos) << load_error(f);
  }
  {
    TinyFiles f("h e\na b c\n");
    EXPECT_NE(load_error(f).find(f.merges + ":2:"), std::string::npos) << load_error(f);
  }
  {
    TinyFiles f("h e\nh \u4e00\n");
    std::string e = load_error(f);
    EXPECT_NE(e.find(f.merges + ":2:"), std::string::npos) << e;
    EXPECT_NE(e.find("not in the vocabulary"), std::string::npos) << e;
  }
  {
    TinyFiles f("h e\nx y\n");  // both parts exist, "xy" does not
    std::string e = load_error(f);
    EXPECT_NE(e.find(f.merges + ":2:"), std::string::npos) << e;
    EXPECT_NE(e.find("result"), std::string::npos) << e;
  }
  {
    TinyFiles f("h e\n\nh e\n");  // a blank line in the middle
    EXPECT_NE(load_error(f).find(f.merges + ":2:"), std::string::npos) << load_error(f);
  }
  {
    TinyFiles f("h e\n", "{\n\"a\": 1,\n\"b\": ,\n}\n");
    EXPECT_NE(load_error(f).find(f.vocab + ":3:"), std::string::npos) << load_error(f);
  }
  {
    TinyFiles f("h e\n", "{\"a\": \"one\"}");
    EXPECT_NE(load_error(f).find(f.vocab), std::string::npos) << load_error(f);
  }
  {
    TinyFiles f("h e\n", "{\"a\": 0, \"h\": 1, \"e\": 2, \"he\": 3}");  // no byte tokens
    std::string e = load_error(f);
    EXPECT_NE(e.find(f.vocab), std::string::npos) << e;
    EXPECT_NE(e.find("byte"), std::string::npos) << e;
  }
  {
    TinyFiles f("h e\n");
    std::filesystem::remove(f.merges);
    EXPECT_NE(load_error(f).find(f.merges), std::string::npos) << load_error(f);
  }
  {
    auto j = tiny_tokenizer_json(false);
    j["model"]["merges"][2] = nlohmann::json::array({"a", "b", "c"});
    try {
      make_bpe_tokenizer_from_hf(j, "tok.json", {});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("merges[2]"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GPT-2's own files.

std::unique_ptr<Tokenizer> gpt2(const std::string& encoder, const TokenizerOptions& options = {}) {
  return load_tokenizer(encoder, options);
}

// Texts with \n inside, ids from tiktoken (equal to HF's GPT2TokenizerFast on each):
//   enc = tiktoken.Encoding("gpt2", pat_str=..., mergeable_ranks=data_gym_to_mergeable_bpe_ranks(
//             "gpt2-vocab.bpe", "gpt2-encoder.json"), special_tokens={"<|endoftext|>": 50256})
//   enc.encode(text, allowed_special="all")
TEST(BpeGpt2, MultiLineTextsMatchTiktoken) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  auto tok = gpt2(encoder);
  const std::vector<std::pair<std::string, std::vector<TokenId>>> cases = {
      {"Hello\nworld", {15496, 198, 6894}},
      {"line one\n\nline two\n", {1370, 530, 198, 198, 1370, 734, 198}},
      {"  \n\n  indented\n\tTab\r\nCRLF  \n", {220, 220, 628, 220, 773, 4714, 198, 197, 33349, 201, 198, 34, 7836, 37, 220, 220, 198}},
      {"a\n \nb", {64, 198, 220, 198, 65}},
      {"def f(x):\n    return x  # comment\n", {4299, 277, 7, 87, 2599, 198, 220, 220, 220, 1441, 2124, 220, 1303, 2912, 198}},
      {"\n", {198}},
      {"\n\n\n", {628, 198}},
      {"end.<|endoftext|>\nNext doc", {437, 13, 50256, 198, 10019, 2205}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok->encode(text), ids) << text;
    EXPECT_EQ(tok->decode(ids), text);
  }
  EXPECT_EQ(tok->special_ids(), (std::map<std::string, TokenId>{{"eod", 50256}}));
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->decode(std::vector<TokenId>{437, 13, 50256, 198}, /*skip_special_tokens=*/true), "end.\n");
  EXPECT_EQ(tok->id_to_token(50256), "<|endoftext|>");
  EXPECT_EQ(tok->id_to_token(262), "\u0120the");
  EXPECT_EQ(tok->token_to_id("\u0120the"), 262);
  EXPECT_THROW(tok->id_to_token(50257), UsageError);
}

std::string random_utf8(std::mt19937& rng, size_t n_chars) {
  static const char32_t kPool[] = {U'a', U'Z', U'0', U' ', U' ', U' ', U'\n', U'\t', U'\r', U'\'', U's', U'.', U'!',
                                   U'\u00a0', U'\u3000', U'\u00e9', U'\u0301', U'\u65e5', U'\u03bb', U'\u200d',
                                   U'\U0001F642', U'\U0001F468', U'\u0663', U'\u00b2', U'\u2028'};
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    char32_t c;
    switch (rng() % 4) {
      case 0:
      case 1:
        c = kPool[rng() % std::size(kPool)];
        break;
      case 2:
        c = 0x20 + rng() % 0x60;
        break;
      default:
        do c = rng() % 0x110000;
        while (c >= 0xD800 && c <= 0xDFFF);
    }
    append_utf8(c, s);
  }
  if (rng() % 8 == 0) s += "<|endoftext|>";
  return s;
}

TEST(BpeGpt2, RoundTripOnRandomValidUtf8) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  auto tok = gpt2(encoder);
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s = random_utf8(rng, rng() % 60);
    auto ids = tok->encode(s);
    for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
    ASSERT_EQ(tok->decode(ids), s);
  }
}

TEST(BpeGpt2, InvalidUtf8BecomesReplacementCharacter) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  auto tok = gpt2(encoder);
  EXPECT_EQ(tok->encode("a\xff\xfe b\xc3"), tok->encode("a\xEF\xBF\xBD\xEF\xBF\xBD b\xEF\xBF\xBD"));
  EXPECT_EQ(tok->decode(tok->encode("x\xe6\x97")), "x\xEF\xBF\xBD");
  // Ids that cut a character apart decode to U+FFFD, as HF's decode (from_utf8_lossy) does.
  auto ids = tok->encode("\u65e5");  // two tokens: bytes E6 97 | A5
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->decode(std::vector<TokenId>{ids[0]}), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(std::vector<TokenId>{ids[1]}), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(std::vector<TokenId>{ids[1], ids[0]}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_EQ(tok->decode(std::vector<TokenId>{}), "");
}

TEST(BpeGpt2, HugeLinesAndWords) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  auto tok = gpt2(encoder);
  const size_t kSize = 10 << 20;
  std::mt19937 rng(3);
  std::string words;
  static const char* kWords[] = {"the ", "tokenizer ", "of ", "antidisestablishmentarianism ", "42 ", "\u65e5\u672c ",
                                 "!! ", "   "};
  while (words.size() < kSize) words += kWords[rng() % std::size(kWords)];
  EXPECT_EQ(tok->decode(tok->encode(words)), words);
  // One 10 MB "word" with no spaces: the merge loop must not be quadratic.
  std::string word;
  static const char* kPieces[] = {"ab", "cde", "xyz", "q", "ing", "tion"};
  while (word.size() < kSize) word += kPieces[rng() % std::size(kPieces)];
  auto ids = tok->encode(word);
  EXPECT_LT(ids.size(), word.size());
  EXPECT_EQ(tok->decode(ids), word);
  // One 10 MB run of spaces, and of a single repeated letter.
  std::string spaces(kSize, ' ');
  EXPECT_EQ(tok->decode(tok->encode(spaces)), spaces);
  std::string letters(kSize, 'a');
  EXPECT_EQ(tok->decode(tok->encode(letters)), letters);
}

TEST(BpeGpt2, BatchEqualsSerialAndCacheChangesNothing) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  PRETRAIN_REQUIRE_SHARED(botchan, "vocab/botchan.txt");
  auto tok = gpt2(encoder);
  TokenizerOptions no_cache;
  no_cache.bpe_cache_words = 0;
  auto uncached = gpt2(encoder, no_cache);
  TokenizerOptions tiny_cache;
  tiny_cache.bpe_cache_words = 10;
  auto small = gpt2(encoder, tiny_cache);
  std::vector<std::string> lines;
  std::string text = read_file(botchan);
  for (size_t b = 0, e; b < text.size(); b = e + 1) {
    e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    lines.push_back(text.substr(b, e - b));
  }
  auto batch = tok->encode_batch(lines);
  ASSERT_EQ(batch.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    auto serial = uncached->encode(lines[i]);
    ASSERT_EQ(batch[i], serial) << lines[i];
    ASSERT_EQ(small->encode(lines[i]), serial) << lines[i];
  }
}

TEST(BpeGpt2, TokenizerJsonGivesTheSameIds) {
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  PRETRAIN_REQUIRE_SHARED(merges, "vocab/gpt2-vocab.bpe");
  PRETRAIN_REQUIRE_SHARED(botchan, "vocab/botchan.txt");
  auto tok = gpt2(encoder);
  nlohmann::json j = tiny_tokenizer_json(false);
  j["model"]["vocab"] = nlohmann::json::parse(read_file(encoder));
  j["model"]["merges"] = nlohmann::json::array();
  std::ifstream in(merges);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') j["model"]["merges"].push_back(line);
  j["added_tokens"][0]["id"] = 50256;
  TempDir dir;
  std::ofstream(dir.file("tokenizer.json")) << j.dump();
  auto from_json = load_tokenizer(dir.path());
  std::string text = read_file(botchan);
  EXPECT_EQ(from_json->encode(text), tok->encode(text));
  EXPECT_EQ(from_json->special_ids(), tok->special_ids());
}

}  // namespace
}  // namespace pretrain::bpe_test
