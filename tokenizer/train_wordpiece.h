// WordPiece training as HF tokenizers' WordPieceTrainer does it (BertWordPieceTokenizer.train):
//
//   normalizer + pre-tokenizer   BERT's (BertNormalizer, BertPreTokenizer) split text into words
//   word counts                  every distinct word with its count
//   BPE with "##" continuations  special tokens, the alphabet (by code point), the "##" forms of
//                                the characters seen inside words, then merges of the most
//                                frequent adjacent pair until vocab_size (HF's BpeTrainer)
//
// The result is the vocabulary in id order, what vocab.txt holds. It is the same for every thread
// count and every run; HF's own result is not (see train_wordpiece.cpp: where HF depends on Rust's
// randomly seeded HashMap order we take a fixed order instead).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/train_text.h"

namespace pretrain {

// Text → words (the normalizer and pre-tokenizer). Appends to words. Called concurrently.
using WordSplitter = std::function<void(std::string_view text, std::vector<std::string>& words)>;

// BERT's normalizer and pre-tokenizer as HF's fast tokenizer runs them; strip_accents follows
// lowercase (HF's default). Invalid UTF-8 is read as U+FFFD (which clean_text then drops).
WordSplitter bert_word_splitter(bool lowercase);

// Distinct words and their counts, sorted by word (bytes). Texts are split on oneTBB workers in
// batches; counts are sums, so the result does not depend on the thread count.
using WordCounts = std::vector<std::pair<std::string, uint64_t>>;
WordCounts count_words(const TextSource& source, const WordSplitter& split);

struct WordPieceTrainerOptions {
  int64_t vocab_size = 30000;
  uint64_t min_frequency = 2;   // BertWordPieceTokenizer.train's default: rarer pairs are not merged
  size_t limit_alphabet = 1000;  // keep the most frequent characters only
  std::vector<std::string> special_tokens{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::string continuing_subword_prefix = "##";
  // The alphabet to keep instead of limit_alphabet's cut (which ties HF breaks in HashMap order).
  // Only for reproducing one particular HF run (tests).
  std::vector<std::string> alphabet;
  // The ids of the "##x" forms, in this order (then any others by code point). Empty: by code point.
  // Only for reproducing one particular HF run, whose order came from its HashMap (tests).
  std::vector<std::string> continuing_order;
};

// The vocabulary, in id order.
std::vector<std::string> train_wordpiece(const WordCounts& words, const WordPieceTrainerOptions& options);

// vocab.txt: one token per line, written atomically.
void write_vocab_txt(const std::string& path, const std::vector<std::string>& vocab);

}  // namespace pretrain
