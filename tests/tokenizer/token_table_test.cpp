// TokenTable, the vocabulary lookup WordPiece and BPE share: every key found with its id, absent
// keys refused (by an empty table too, and as the filter in front grows with the table), long keys
// told apart past their first 16 bytes (the part the slot holds), the key offset WordPiece's "##"
// table uses, and a table that keeps working after the vector of tokens it reads is moved (BPE
// builds it in its loader, then moves both into the tokenizer).
#include "tokenizer/token_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pretrain::token_table_test {
namespace {

TokenTable table_of(const std::vector<std::string>& tokens, size_t key_offset = 0) {
  TokenTable table(tokens, key_offset);
  for (size_t id = 0; id < tokens.size(); ++id) table.insert(std::string_view(tokens[id]).substr(key_offset), static_cast<TokenId>(id));
  return table;
}

TEST(TokenTable, FindsEveryKeyAndRefusesOthers) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back("tok" + std::to_string(i));  // grows the table and its filter many times
  TokenTable table = table_of(tokens);
  for (size_t id = 0; id < tokens.size(); ++id) EXPECT_EQ(table.find(tokens[id]), static_cast<TokenId>(id)) << tokens[id];
  for (const char* absent : {"", "tok", "tok5000", "tok-1", "Tok1", "tok1 "}) EXPECT_EQ(table.find(absent), -1) << absent;
  EXPECT_EQ(table.find(std::string_view()), -1);  // no data pointer at all (UBSan checks the copy)
}

TEST(TokenTable, AnEmptyTableFindsNothing) {
  // Its filter is one word until the first insert, and there are no slots to probe.
  TokenTable table({}, 0);
  for (const char* absent : {"", "a", "a key longer than sixteen bytes"}) EXPECT_EQ(table.find(absent), -1) << absent;
}

TEST(TokenTable, LongKeysDifferingPastSixteenBytes) {
  const std::string head = "0123456789abcdef";  // the 16 bytes a slot holds
  std::vector<std::string> tokens = {head, head + "x", head + "y", head + "xy", head + std::string(40, 'z'), head + std::string(40, 'z') + "!"};
  TokenTable table = table_of(tokens);
  for (size_t id = 0; id < tokens.size(); ++id) EXPECT_EQ(table.find(tokens[id]), static_cast<TokenId>(id)) << tokens[id];
  EXPECT_EQ(table.find(head + "z"), -1);
  EXPECT_EQ(table.find(head + std::string(40, 'z') + "?"), -1);
  EXPECT_EQ(table.find(head + std::string(39, 'z') + "!"), -1);
}

TEST(TokenTable, ARepeatedKeyTakesTheLaterId) {
  std::vector<std::string> tokens = {"same", "other", "same", "a-long-key-past-16-bytes", "a-long-key-past-16-bytes"};
  TokenTable table = table_of(tokens);
  EXPECT_EQ(table.find("same"), 2);
  EXPECT_EQ(table.find("other"), 1);
  EXPECT_EQ(table.find("a-long-key-past-16-bytes"), 4);
}

TEST(TokenTable, KeyOffsetComparesTheTokenPastItsPrefix) {
  std::vector<std::string> tokens = {"##ing", "##tionalization-of-it", "##tionalization-of-us"};
  TokenTable table = table_of(tokens, 2);
  EXPECT_EQ(table.find("ing"), 0);
  EXPECT_EQ(table.find("tionalization-of-it"), 1);
  EXPECT_EQ(table.find("tionalization-of-us"), 2);
  EXPECT_EQ(table.find("##ing"), -1);
  EXPECT_EQ(table.find("tionalization-of-me"), -1);
}

TEST(TokenTable, SurvivesMovingTheTokens) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back("a token longer than sixteen bytes, number " + std::to_string(i));
  TokenTable table = table_of(tokens);
  std::vector<std::string> moved = std::move(tokens);  // the elements stay where the table points
  TokenTable table_moved = std::move(table);
  for (size_t id = 0; id < moved.size(); ++id) EXPECT_EQ(table_moved.find(moved[id]), static_cast<TokenId>(id));
  EXPECT_EQ(table_moved.find("a token longer than sixteen bytes, number 300"), -1);
}

}  // namespace
}  // namespace pretrain::token_table_test
