// SentencePiece training through the library's own trainer (SentencePieceTrainer), fed our text
// through a SentenceIterator instead of a file. The options are built in code; the rest are
// spm_train's defaults, so `spm_train` on the same sentences with the same options (and
// --num_threads=16) makes the same model.
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/train_text.h"

namespace pretrain {

struct SentencePieceTrainerOptions {
  int64_t vocab_size = 8000;          // spm_train's default
  std::string model_type = "unigram";  // unigram | bpe | word | char
  double character_coverage = 0.9995;  // spm_train's default; 1.0 for small alphabets
  bool byte_fallback = false;
};

struct SentencePieceModel {
  std::string model;  // the serialized ModelProto: what spm.model holds
  std::string vocab;  // spm.vocab: "piece<TAB>score" per line, as spm_train writes it
  uint64_t sentences = 0;
};

// Trains on every text the source gives (one sentence or paragraph each). Throws Error with the
// library's message when training fails (too few sentences for vocab_size, …).
SentencePieceModel train_sentencepiece(const TextSource& source, const SentencePieceTrainerOptions& options);

}  // namespace pretrain
