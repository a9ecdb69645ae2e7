// BERT pretraining instances by Google's create_pretraining_data.py algorithm (NVIDIA's copy is
// the same with whole-word masking off): per document and pass, chunks of sentences up to a target
// length, segment A, segment B (the real continuation, or a random other document's sentences with
// probability 0.5), truncate_seq_pair, [CLS] A [SEP] B [SEP], then 80/10/10 masked-LM predictions.
//
// Every random draw happens in the same order and through the same method as in the Python code,
// so with PythonRandom (python_random.h) the instances are theirs exactly; with CounterRng
// each (document, pass) has its own stream and documents can be processed in parallel.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "formats/bert_defaults.h"
#include "formats/bert_hdf5.h"

namespace pretrain {

using TokenId32 = int32_t;

struct BertInstanceOptions {
  int seq_len = kBertSeqLen;
  int max_predictions = kBertMaxPredictions;
  double masked_lm_prob = kBertMaskedLmProb;
  double short_seq_prob = 0.1;
  bool whole_word_mask = false;
};

// What the masking needs to know about the vocabulary.
struct BertMaskVocab {
  TokenId32 cls = -1, sep = -1, mask = -1;
  // Python's `list(tokenizer.vocab.keys())`: the id behind each distinct vocab entry in file order
  // (a random replacement is vocab_words[randint(0, len − 1)]).
  std::vector<TokenId32> vocab_words;
  // Whole-word masking: true for "##" continuation pieces.
  std::vector<bool> is_continuation;
};

// Read access to tokenized documents: document d is a list of sentences of token ids. A span from
// sentence() may be valid only until the calling thread's next sentence() call.
class DocumentCorpus {
 public:
  virtual ~DocumentCorpus() = default;
  virtual size_t num_documents() const = 0;
  virtual size_t num_sentences(size_t document) const = 0;
  virtual std::span<const TokenId32> sentence(size_t document, size_t index) const = 0;
};

// Documents held in memory (tests, and callers with their own documents).
class InMemoryCorpus final : public DocumentCorpus {
 public:
  std::vector<std::vector<std::vector<TokenId32>>> documents;
  size_t num_documents() const override { return documents.size(); }
  size_t num_sentences(size_t d) const override { return documents[d].size(); }
  std::span<const TokenId32> sentence(size_t d, size_t i) const override { return documents[d][i]; }
};

struct BertInstance {
  std::vector<TokenId32> tokens;       // [CLS] A [SEP] B [SEP], masked
  std::vector<int8_t> segment_ids;     // 0 for [CLS] A [SEP], 1 for B [SEP]
  bool is_random_next = false;
  std::vector<int32_t> masked_lm_positions;  // sorted
  std::vector<TokenId32> masked_lm_labels;   // the original ids at those positions
  // For statistics: the target length was drawn short; B was random because the chunk had one
  // sentence (no coin flipped); the first instance of its (document, pass).
  bool short_target = false;
  bool forced_random_next = false;
  bool first_of_document = false;

  // Row i of a batch of the shard's shape, with NVIDIA's padding (0) — no allocation, for writers.
  void write_row(BertBatch& batch, int64_t i) const;
  BertRecord to_record(int seq_len, int max_predictions) const;  // the same as one record
};

// Receives each instance as it is made. The instance is one object that the maker refills for the
// next: a sink copies what it keeps (a spill record, say), and its vectors' capacity is reused, so
// making an instance allocates nothing.
using InstanceSink = std::function<void(BertInstance& instance)>;

// create_instances_from_document() for one document, handing each instance to `emit` in order.
// Rng is PythonRandom or CounterRng. Documents without sentences give nothing (the Python code
// removes them earlier).
template <typename Rng>
void create_instances_from_document(const DocumentCorpus& corpus, size_t document, const BertInstanceOptions& options,
                                    const BertMaskVocab& vocab, Rng& rng, const InstanceSink& emit);

// The same, appending copies to `out`.
template <typename Rng>
void create_instances_from_document(const DocumentCorpus& corpus, size_t document, const BertInstanceOptions& options,
                                    const BertMaskVocab& vocab, Rng& rng, std::vector<BertInstance>& out) {
  create_instances_from_document(corpus, document, options, vocab, rng,
                                 InstanceSink([&out](BertInstance& instance) { out.push_back(instance); }));
}

// create_masked_lm_predictions() on inst.tokens (fills the masked fields).
template <typename Rng>
void create_masked_lm_predictions(BertInstance& inst, const BertInstanceOptions& options, const BertMaskVocab& vocab,
                                  Rng& rng);

// create_pretraining_data.py's dupe_factor: passes over the data, each with other masks.
inline constexpr int kBertDupeFactor = 10;

// create_training_instances() as the Python script runs it with one random.Random(seed): shuffle
// the (non-empty) documents, then dupe_factor passes over every document, then shuffle all the
// instances. Sequential by nature; this is the --rng python path. The corpus is read, not copied
// (a TokenStore serves as it is). Each instance goes to `emit` in the order it is made; the
// result is the final shuffle, as the order in which to output them: its k-th entry is the index,
// in making order, of the script's k-th instance.
std::vector<uint32_t> create_training_instances_python(const DocumentCorpus& corpus, const BertInstanceOptions& options,
                                                       const BertMaskVocab& vocab, int dupe_factor, int64_t seed,
                                                       const InstanceSink& emit);

// The same, as the list of instances the script returns.
std::vector<BertInstance> create_training_instances_python(const DocumentCorpus& corpus,
                                                           const BertInstanceOptions& options,
                                                           const BertMaskVocab& vocab, int dupe_factor, int64_t seed);

// The masking vocabulary of a WordPiece vocab given as its entries in id order (Python's dict
// semantics: a repeated entry keeps its first place in the key order and takes the later id).
// Throws Error when [CLS], [SEP] or [MASK] is missing.
BertMaskVocab make_bert_mask_vocab(const std::vector<std::string>& entries, const std::string& source);

}  // namespace pretrain
