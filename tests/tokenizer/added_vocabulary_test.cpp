// The added vocabulary shared by WordPiece and BPE: how text splits at added tokens (HF's
// precedence: earliest match, then longest, then first listed), single_word, the flags a model
// refuses, and reading tokenizer.json's added_tokens entries.
#include "tokenizer/added_vocabulary.h"

#include <gtest/gtest.h>

#include <cctype>
#include <random>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "test_util.h"

namespace pretrain::added_vocabulary_test {
namespace {

using testing::error_message;

// A split as pieces: plain text as itself, an added token as "#<id>".
using Pieces = std::vector<std::string>;

Pieces split(const AddedVocabulary& vocab, std::string_view text) {
  Pieces out;
  vocab.split(text, [&](std::string_view segment, const AddedToken* token) {
    if (token) {
      EXPECT_TRUE(segment.empty());
      out.push_back("#" + std::to_string(token->id));
    } else {
      EXPECT_FALSE(segment.empty()) << "an empty segment was reported";
      out.emplace_back(segment);
    }
  });
  return out;
}

AddedToken token(std::string content, TokenId id, bool single_word = false) {
  return {.content = std::move(content), .id = id, .single_word = single_word};
}

AddedVocabulary vocab(std::vector<AddedToken> tokens) {
  return AddedVocabulary(std::move(tokens), {.single_word = true}, "test");
}

// ---- Splitting ------------------------------------------------------------------------------

TEST(AddedVocabulary, LongestMatchWhereSeveralStartTogether) {
  // Listed shortest first, so the longest must win on length, not on order.
  auto v = vocab({token("<x>", 1), token("<x>y", 2)});
  EXPECT_EQ(split(v, "a<x>yb"), (Pieces{"a", "#2", "b"}));
  EXPECT_EQ(split(v, "a<x>b"), (Pieces{"a", "#1", "b"}));
  EXPECT_EQ(split(v, "a<x>y<x><x>yb"), (Pieces{"a", "#2", "#1", "#2", "b"}));
}

TEST(AddedVocabulary, EarliestMatchBeatsALongerOneLater) {
  // "abc" starts first and wins; "bcdef" overlaps it and is not matched inside its text.
  auto v = vocab({token("bcdef", 2), token("abc", 1)});
  EXPECT_EQ(split(v, "abcdef"), (Pieces{"#1", "def"}));
  EXPECT_EQ(split(v, "xbcdefabc"), (Pieces{"x", "#2", "#1"}));
}

TEST(AddedVocabulary, OverlappingOccurrencesOfOneToken) {
  auto v = vocab({token("aa", 1)});
  EXPECT_EQ(split(v, "aaa"), (Pieces{"#1", "a"}));
  EXPECT_EQ(split(v, "aaaa"), (Pieces{"#1", "#1"}));
  EXPECT_EQ(split(v, "baaaab"), (Pieces{"b", "#1", "#1", "b"}));
}

TEST(AddedVocabulary, TokensAtStartEndAndAdjacent) {
  auto v = vocab({token("<s>", 1), token("</s>", 2)});
  EXPECT_EQ(split(v, "<s>hello</s>"), (Pieces{"#1", "hello", "#2"}));
  EXPECT_EQ(split(v, "<s><s></s>"), (Pieces{"#1", "#1", "#2"}));
  EXPECT_EQ(split(v, "</s>"), (Pieces{"#2"}));
  EXPECT_EQ(split(v, "<s"), (Pieces{"<s"}));  // a prefix of a token is plain text
}

TEST(AddedVocabulary, EmptyTextAndNoTokens) {
  EXPECT_EQ(split(vocab({token("<s>", 1)}), ""), Pieces{});
  EXPECT_EQ(split(AddedVocabulary(), "plain text"), Pieces{"plain text"});
  EXPECT_EQ(split(AddedVocabulary(), ""), Pieces{});
}

TEST(AddedVocabulary, Utf8TokensAndText) {
  auto v = vocab({token("日本", 1), token("\u00e9", 2)});  // é, precomposed
  EXPECT_EQ(split(v, "こんにちは日本語"), (Pieces{"こんにちは", "#1", "語"}));
  EXPECT_EQ(split(v, "café!"), (Pieces{"caf", "#2", "!"}));
  EXPECT_EQ(split(v, "cafe\u0301"), (Pieces{"cafe\u0301"}));  // e + combining accent is not é: bytes match
}

TEST(AddedVocabulary, FirstListedWinsBetweenEqualTokens) {
  auto v = vocab({token("<s>", 5), token("<s>", 6)});
  EXPECT_EQ(split(v, "a<s>"), (Pieces{"a", "#5"}));
  ASSERT_NE(v.find("<s>"), nullptr);
  EXPECT_EQ(v.find("<s>")->id, 5);
  EXPECT_EQ(v.find("<s"), nullptr);
}

TEST(AddedVocabulary, SingleWordNeedsNoWordCharacterBesideIt) {
  auto v = vocab({token("ab", 1, true)});
  EXPECT_EQ(split(v, "ab cab ab_ abc (ab) éab ab"), (Pieces{"#1", " cab ab_ abc (", "#1", ") éab ", "#1"}));
  // Where the longest token fails single_word, a shorter one at the same place still matches.
  auto w = vocab({token("abc", 2, true), token("ab", 1)});
  EXPECT_EQ(split(w, "abcd abc"), (Pieces{"#1", "cd ", "#2"}));
}

TEST(AddedVocabulary, ManyTokens) {
  // More tokens than the matcher keeps on the stack.
  std::vector<AddedToken> tokens;
  std::string text;
  Pieces expected;
  for (int i = 0; i < 40; ++i) {
    tokens.push_back(token("<t" + std::to_string(i) + ">", i));
    text += "w<t" + std::to_string(39 - i) + ">";
    expected.push_back("w");
    expected.push_back("#" + std::to_string(39 - i));
  }
  EXPECT_EQ(split(vocab(tokens), text), expected);
}

// The matcher against a plain reference (at each byte, the longest token that matches there and
// passes single_word; the first listed among equals) on random text over a tiny alphabet, where
// tokens overlap, nest and repeat all the time.
Pieces reference_split(const std::vector<AddedToken>& tokens, std::string_view text) {
  auto word = [&](size_t i) {
    return i < text.size() && (isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_');
  };
  Pieces out;
  std::string plain;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* best = nullptr;
    for (const AddedToken& t : tokens) {
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word && ((i > 0 && word(i - 1)) || word(i + t.content.size()))) continue;
      if (!best || t.content.size() > best->content.size()) best = &t;
    }
    if (!best) {
      plain += text[i++];
      continue;
    }
    if (!plain.empty()) out.push_back(std::move(plain));
    plain.clear();
    out.push_back("#" + std::to_string(best->id));
    i += best->content.size();
  }
  if (!plain.empty()) out.push_back(plain);
  return out;
}

TEST(AddedVocabulary, MatchesTheReferenceOnRandomText) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab <";
  for (int round = 0; round < 300; ++round) {
    std::vector<AddedToken> tokens;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 6); k < n; ++k) {
      std::string content;
      for (int len = 1 + static_cast<int>(rng() % 4); len > 0; --len) content += alphabet[rng() % alphabet.size()];
      tokens.push_back(token(content, k, rng() % 3 == 0));
    }
    std::string text;
    for (int len = static_cast<int>(rng() % 40); len > 0; --len) text += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(split(vocab(tokens), text), reference_split(tokens, text)) << "text \"" << text << "\", round " << round;
  }
}

// ---- The flags a model takes ----------------------------------------------------------------

TEST(AddedVocabulary, RefusesFlagsTheModelDoesNotTake) {
  std::vector<AddedToken> single{token("<s>", 1), token("<w>", 2, true)};
  std::string e = error_message([&] { AddedVocabulary(single, {}, "tok.json"); });
  EXPECT_NE(e.find("tok.json: record 1"), std::string::npos) << e;
  EXPECT_NE(e.find("added_tokens[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("single_word"), std::string::npos) << e;
  EXPECT_NO_THROW(AddedVocabulary(single, {.single_word = true}, "tok.json"));

  std::vector<AddedToken> strip{token("<s>", 1)};
  strip[0].lstrip = true;
  e = error_message([&] { AddedVocabulary(strip, {.single_word = true}, "tok.json"); });
  EXPECT_NE(e.find("added_tokens[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("lstrip"), std::string::npos) << e;
  AddedVocabulary ignored(strip, {.ignore_strip = true}, "tok.json");
  EXPECT_EQ(split(ignored, "a <s> b"), (Pieces{"a ", "#1", " b"}));  // ignored: the spaces stay in the text
}

// ---- Reading added_tokens -------------------------------------------------------------------

TEST(ReadAddedTokens, ReadsEveryFieldInFileOrder) {
  auto j = nlohmann::json::parse(R"([
    {"id": 7, "content": "[MASK]", "special": true, "single_word": false, "lstrip": true, "rstrip": false,
     "normalized": false},
    {"id": 3, "content": "<new>"}])");
  std::vector<AddedToken> tokens = read_added_tokens(j, "tok.json");
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].content, "[MASK]");
  EXPECT_EQ(tokens[0].id, 7);
  EXPECT_TRUE(tokens[0].special);
  EXPECT_TRUE(tokens[0].lstrip);
  EXPECT_FALSE(tokens[0].rstrip);
  EXPECT_FALSE(tokens[0].single_word);
  EXPECT_EQ(tokens[1].content, "<new>");
  EXPECT_EQ(tokens[1].id, 3);
  EXPECT_FALSE(tokens[1].special);  // absent flags are false
}

TEST(ReadAddedTokens, ErrorsNameTheSourceAndTheEntry) {
  auto error = [](const std::string& json) {
    return error_message([&] { read_added_tokens(nlohmann::json::parse(json), "tok.json"); });
  };
  const std::string good = R"({"id": 1, "content": "<s>"})";
  struct Case {
    std::string entry, expect;
  } cases[] = {
      {R"("<s>")", "added_tokens[1]"},                          // not an object
      {R"({"content": "<s>"})", "added_tokens[1]"},             // no id
      {R"({"id": 2})", "added_tokens[1]"},                      // no content
      {R"({"id": 2, "content": ""})", "added_tokens[1]"},       // empty content
      {R"({"id": 2, "content": 5})", "added_tokens[1]"},        // content not a string
      {R"({"id": "2", "content": "<t>"})", "added_tokens[1]"},  // id not an integer
      {R"({"id": 2.5, "content": "<t>"})", "added_tokens[1]"},
      {R"({"id": -1, "content": "<t>"})", "out of range"},
      {R"({"id": 99999999999, "content": "<t>"})", "out of range"},
      {R"({"id": 2, "content": "<t>", "special": "yes"})", "added_tokens[1].special"},
  };
  for (const Case& c : cases) {
    std::string e = error("[" + good + ", " + c.entry + "]");
    EXPECT_NE(e.find("tok.json: record 1"), std::string::npos) << c.entry << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.entry << ": " << e;
  }
  std::string e = error(R"({"id": 1})");
  EXPECT_NE(e.find("tok.json"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an array"), std::string::npos) << e;
}

}  // namespace
}  // namespace pretrain::added_vocabulary_test
