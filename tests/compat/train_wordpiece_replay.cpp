// For test_train_tokenizer.py: trains WordPiece as train-tokenizer does, but keeps the alphabet and
// gives the "##x" forms the ids one HF run gave them (read from that run's vocab.txt), so the rest
// of the training can be compared with HF's entry for entry. HF breaks the alphabet's ties and
// orders the "##x" forms by a randomly seeded HashMap.
//   train_wordpiece_replay VOCAB_SIZE lowercase|cased HF_VOCAB_TXT TEXT_FILE... > vocab.txt
#include <fstream>
#include <iostream>

#include "common/error.h"
#include "common/progress.h"
#include "tokenizer/train_wordpiece.h"

int main(int argc, char** argv) {
  using namespace pretrain;
  if (argc < 5) {
    std::cerr << "usage: train_wordpiece_replay VOCAB_SIZE lowercase|cased HF_VOCAB_TXT TEXT_FILE...\n";
    return 2;
  }
  try {
    Progress::set_enabled(false);
    WordPieceTrainerOptions options;
    options.vocab_size = std::stoll(argv[1]);
    bool lowercase = std::string(argv[2]) == "lowercase";
    std::ifstream hf(argv[3]);
    for (std::string line; std::getline(hf, line);) {
      if (line.starts_with("##")) options.continuing_order.push_back(line);
      if (options.continuing_order.empty() && !line.empty() && line.size() <= 4) options.alphabet.push_back(line);
    }
    std::vector<std::string> files(argv + 4, argv + argc);
    TextSource source = [&](const TextSink& sink) {
      for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) throw_errno("cannot open", f);
        for (std::string line; std::getline(in, line);) sink(line);
      }
    };
    for (const auto& token : train_wordpiece(count_words(source, bert_word_splitter(lowercase)), options))
      std::cout << token << '\n';
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
