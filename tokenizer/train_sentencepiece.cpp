// SentencePiece training: our sentences go to libsentencepiece's trainer through a
// SentenceIterator; the model comes back serialized and the .vocab is written from it.
//
// Determinism: the unigram trainer's EM sums expected counts per worker thread, so its scores and
// even its pieces depend on num_threads (measured on botchan.txt, vocab 1000: 1, 2 and 4 threads
// give three different models; two runs with the same count give the same one). num_threads is
// therefore pinned to 16, spm_train's default, whatever --threads says: the model is the same on
// every machine and equals spm_train's with default threads. No sampling is done
// (input_sentence_size 0: every sentence is used), and the random seed is fixed anyway.
#include "tokenizer/train_sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <sstream>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"

namespace pretrain {
namespace {

constexpr int kSpmThreads = 16;

// The library pulls sentences; ours are collected first (the trainer keeps them all in memory
// anyway).
class VectorSentences final : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentences(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return next_ >= sentences_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return sentences_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;
  size_t next_ = 0;
};

}  // namespace

SentencePieceModel train_sentencepiece(const TextSource& source, const SentencePieceTrainerOptions& options) {
  std::vector<std::string> sentences;
  source([&](std::string_view text) {
    if (text.empty()) return;
    std::string& s = sentences.emplace_back(text);
    repair_utf8(s);  // the library would read each invalid byte as U+FFFD; we read subparts
  });
  if (sentences.empty()) throw UsageError("no text to train on: the inputs hold no non-empty line");

  const std::unordered_map<std::string, std::string> args{
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model_type},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"num_threads", std::to_string(kSpmThreads)},
      {"minloglevel", "1"},  // warnings and errors only: the INFO lines are a screenful per step
  };
  sentencepiece::SetRandomGeneratorSeed(1);
  VectorSentences iterator(sentences);
  SentencePieceModel out;
  out.sentences = sentences.size();
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator, &out.model);
  if (!status.ok()) throw Error(cat("SentencePiece training failed: ", status.ToString()));
  sentences.clear();

  sentencepiece::SentencePieceProcessor processor;
  status = processor.LoadFromSerializedProto(out.model);
  if (!status.ok()) throw Error(cat("the trained SentencePiece model does not load: ", status.ToString()));
  std::ostringstream vocab;  // spm_train's .vocab: the piece, a tab, the score as ostream prints it
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    vocab << processor.IdToPiece(id) << '\t' << processor.GetScore(id) << '\n';
  out.vocab = vocab.str();
  return out;
}

}  // namespace pretrain
