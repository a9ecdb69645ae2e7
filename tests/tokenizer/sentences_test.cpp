#include "tokenizer/sentences.h"

#include <gtest/gtest.h>

#include <thread>

namespace pretrain::sentences_test {
namespace {

using Lines = std::vector<std::string>;

TEST(Sentences, AbbreviationsDoNotEndSentences) {
  SentenceSplitter en("en");
  EXPECT_EQ(en.locale(), "en@ss=standard");
  EXPECT_EQ(en.split("Dr. Smith went home. He slept."), (Lines{"Dr. Smith went home.", "He slept."}));
  EXPECT_EQ(en.split("St. Louis is big. Gen. Lee and Sen. Smith met."),
            (Lines{"St. Louis is big.", "Gen. Lee and Sen. Smith met."}));
  EXPECT_EQ(en.split("It cost approx. five dollars, i.e. a lot. Mr. Jones paid."),
            (Lines{"It cost approx. five dollars, i.e. a lot.", "Mr. Jones paid."}));
}

TEST(Sentences, QuestionsExclamationsAndQuotes) {
  SentenceSplitter en("en");
  EXPECT_EQ(en.split("Where? There! \"Yes,\" he said. Done"),
            (Lines{"Where?", "There!", "\"Yes,\" he said.", "Done"}));
}

TEST(Sentences, CjkFullStopSplits) {
  SentenceSplitter ja("ja");
  EXPECT_EQ(ja.split("東京は大きい。大阪も大きい。"), (Lines{"東京は大きい。", "大阪も大きい。"}));
  SentenceSplitter zh("zh");
  EXPECT_EQ(zh.split("你好吗？我很好。"), (Lines{"你好吗？", "我很好。"}));
}

TEST(Sentences, NeverSpanALineBreak) {
  SentenceSplitter en("en");
  // A heading without a full stop and an abbreviation at a line's end both end there.
  EXPECT_EQ(en.split("History\nIt was built by Dr.\nSmith. It stood.\n\n  \nA list item"),
            (Lines{"History", "It was built by Dr.", "Smith.", "It stood.", "A list item"}));
}

TEST(Sentences, TrimsAndCountsLines) {
  SentenceSplitter en("");
  std::string out = "x\n";
  EXPECT_EQ(en.append_lines("  One.   Two.  ", out), 2u);
  EXPECT_EQ(out, "x\nOne.\nTwo.\n");
  EXPECT_EQ(en.append_lines("", out), 0u);
  EXPECT_EQ(en.append_lines(" \n\t\n", out), 0u);
}

TEST(Sentences, UnknownOrOddLanguagesStillSplit) {
  for (const char* lang : {"el", "zh-yue", "be-x-old", "xx", "simple", "de", "!!"}) {
    SentenceSplitter s(lang);
    EXPECT_EQ(s.split("Alpha beta. Gamma delta."), (Lines{"Alpha beta.", "Gamma delta."})) << lang;
  }
}

TEST(Sentences, ClonesWorkOnTheirOwnThreads) {
  SentenceSplitter prototype("en");
  std::vector<Lines> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      SentenceSplitter mine(prototype);
      for (int i = 0; i < 200; ++i) results[t] = mine.split("Dr. No came. Ms. Moneypenny left. The end.");
    });
  for (auto& th : threads) th.join();
  for (const Lines& r : results) EXPECT_EQ(r, (Lines{"Dr. No came.", "Ms. Moneypenny left.", "The end."}));
}

}  // namespace
}  // namespace pretrain::sentences_test
