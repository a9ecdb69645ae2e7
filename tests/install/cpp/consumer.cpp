// consumer <shards> <vocab.txt> <text>: the first batch (4 rows, in file order) of a BERT shard set
// through pretrain::Loader, and the WordPiece ids of <text> through pretrain::load_tokenizer.
// Prints "batch <rows> input_ids <d0> <d1> masked_lm_positions <d0> <d1>", "row0 <ids…>" and
// "ids <ids…>", for tests/e2e/test_install.sh to compare with the C consumer and the tokenize CLI.
#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>

#include "loader/loader.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: consumer <shards> <vocab.txt> <text>\n";
    return 2;
  }
  try {
    pretrain::LoaderConfig config;
    config.sources = {argv[1]};
    config.batch_size = 4;
    config.shuffle = false;
    config.epochs = 1;
    config.workers = 1;
    pretrain::Loader loader(config);
    std::optional<pretrain::Batch> batch = loader.next();
    if (!batch) {
      std::cerr << "consumer: " << argv[1] << ": no batch\n";
      return 1;
    }
    const pretrain::Tensor& ids = batch->input_ids;
    const pretrain::Tensor& positions = batch->masked_lm_positions;
    std::cout << "batch " << batch->size << " input_ids " << ids.shape[0] << ' ' << ids.shape[1]
              << " masked_lm_positions " << positions.shape[0] << ' ' << positions.shape[1] << '\n';
    std::cout << "row0";
    const int32_t* row = ids.as<int32_t>();
    for (int64_t i = 0; i < ids.shape[1]; ++i) std::cout << ' ' << row[i];
    std::cout << '\n';

    std::unique_ptr<pretrain::Tokenizer> tokenizer = pretrain::load_tokenizer(argv[2]);
    std::cout << "ids";
    for (pretrain::TokenId id : tokenizer->encode(argv[3])) std::cout << ' ' << id;
    std::cout << '\n';
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
