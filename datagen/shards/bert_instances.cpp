// A line-by-line transcription of create_instances_from_document(), truncate_seq_pair() and
// create_masked_lm_predictions() from google-research/bert's create_pretraining_data.py. The order
// of random draws is the contract: change nothing here without the golden test
// (tests/compat/test_make_shards_golden.py) and the unit tests.
#include "datagen/shards/bert_instances.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "common/counter_rng.h"
#include "common/error.h"
#include "datagen/shards/python_random.h"

namespace pretrain {

void BertInstance::write_row(BertBatch& batch, int64_t i) const {
  const size_t seq = static_cast<size_t>(batch.seq_len), max_pred = static_cast<size_t>(batch.max_predictions);
  const size_t row = static_cast<size_t>(i) * seq, pred_row = static_cast<size_t>(i) * max_pred;
  auto put = [](auto* dst, size_t width, const auto& src) {
    std::copy(src.begin(), src.end(), dst);
    std::fill(dst + src.size(), dst + width, 0);
  };
  put(batch.input_ids.data() + row, seq, tokens);
  std::fill_n(batch.input_mask.data() + row, seq, int8_t{0});
  std::fill_n(batch.input_mask.data() + row, tokens.size(), int8_t{1});
  put(batch.segment_ids.data() + row, seq, segment_ids);
  put(batch.masked_lm_positions.data() + pred_row, max_pred, masked_lm_positions);
  put(batch.masked_lm_ids.data() + pred_row, max_pred, masked_lm_labels);
  batch.next_sentence_labels[static_cast<size_t>(i)] = is_random_next ? 1 : 0;
}

BertRecord BertInstance::to_record(int seq_len, int max_predictions) const {
  BertBatch one(1, seq_len, max_predictions);
  write_row(one, 0);
  return one.record(0);
}

namespace {

// The tokens of a segment, held as [begin, end) in a buffer so that truncating from the front is
// O(1) (Python's `del tokens[0]`).
struct Segment {
  std::vector<TokenId32> buffer;
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
  void clear() { buffer.clear(), begin = end = 0; }
  void extend(std::span<const TokenId32> s) {
    buffer.insert(buffer.end(), s.begin(), s.end());
    end = buffer.size();
  }
};

// truncate_seq_pair(): trims the longer segment (B on ties), front or back with probability 0.5.
template <typename Rng>
void truncate_seq_pair(Segment& a, Segment& b, size_t max_num_tokens, Rng& rng) {
  while (a.size() + b.size() > max_num_tokens) {
    Segment& trunc = a.size() > b.size() ? a : b;
    if (rng.random() < 0.5)
      ++trunc.begin;
    else
      --trunc.end;
  }
}

}  // namespace

template <typename Rng>
void create_masked_lm_predictions(BertInstance& inst, const BertInstanceOptions& options, const BertMaskVocab& vocab,
                                  Rng& rng) {
  const std::vector<TokenId32>& tokens = inst.tokens;
  // Candidate sets: one position each, or under whole-word masking a word's "##" pieces joined to
  // the set before them (as Google's code does, even across a [SEP]). A set is a run in `members`
  // (a continuation always extends the newest set, so its members stay contiguous); shuffling the
  // (begin, size) runs draws exactly what Python's shuffle of the list of lists draws, without a
  // vector per token.
  thread_local std::vector<int32_t> members;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> cand_indexes;
  members.clear();
  cand_indexes.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == vocab.cls || tokens[i] == vocab.sep) continue;
    const bool continuation = options.whole_word_mask && static_cast<size_t>(tokens[i]) < vocab.is_continuation.size() &&
                              vocab.is_continuation[tokens[i]];
    if (continuation && !cand_indexes.empty())
      ++cand_indexes.back().second;
    else
      cand_indexes.emplace_back(static_cast<uint32_t>(members.size()), 1u);
    members.push_back(static_cast<int32_t>(i));
  }
  rng.shuffle(cand_indexes);

  // int(round(len × p)): Python 3 rounds half to even, as nearbyint does in the default mode.
  const size_t num_to_predict = std::min<size_t>(
      static_cast<size_t>(options.max_predictions),
      std::max<size_t>(1, static_cast<size_t>(std::nearbyint(static_cast<double>(tokens.size()) * options.masked_lm_prob))));

  // Masked in place: Python writes a copy (output_tokens) but reads each label from the original
  // before it writes that position, and a position is masked at most once (`covered`). The
  // scratch lists are per thread: this runs once per instance.
  std::vector<TokenId32>& output = inst.tokens;
  thread_local std::vector<std::pair<int32_t, TokenId32>> masked;  // (index, label)
  thread_local std::vector<uint8_t> covered;
  masked.clear();
  covered.assign(tokens.size(), 0);
  for (const auto& [begin, size] : cand_indexes) {
    const std::span<const int32_t> index_set(members.data() + begin, size);
    if (masked.size() >= num_to_predict) break;
    // Whole words only: skip a set that would overshoot the budget.
    if (masked.size() + index_set.size() > num_to_predict) continue;
    bool any_covered = false;
    for (int32_t index : index_set) any_covered = any_covered || covered[index];
    if (any_covered) continue;
    for (int32_t index : index_set) {
      covered[index] = 1;
      const TokenId32 original = output[index];
      TokenId32 masked_token;
      if (rng.random() < 0.8) {
        masked_token = vocab.mask;  // 80%: [MASK]
      } else if (rng.random() < 0.5) {
        masked_token = original;  // 10%: kept
      } else {                    // 10%: a random vocabulary word
        masked_token = vocab.vocab_words[static_cast<size_t>(
            rng.randint(0, static_cast<int64_t>(vocab.vocab_words.size()) - 1))];
      }
      output[index] = masked_token;
      masked.emplace_back(index, original);
    }
  }
  std::sort(masked.begin(), masked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  inst.masked_lm_positions.resize(masked.size());
  inst.masked_lm_labels.resize(masked.size());
  for (size_t k = 0; k < masked.size(); ++k) {
    inst.masked_lm_positions[k] = masked[k].first;
    inst.masked_lm_labels[k] = masked[k].second;
  }
}

template <typename Rng>
void create_instances_from_document(const DocumentCorpus& corpus, size_t document, const BertInstanceOptions& options,
                                    const BertMaskVocab& vocab, Rng& rng, const InstanceSink& emit) {
  const int64_t num_sentences = static_cast<int64_t>(corpus.num_sentences(document));
  const int64_t num_documents = static_cast<int64_t>(corpus.num_documents());
  if (num_sentences == 0) return;
  if (options.seq_len < 5) throw UsageError(cat("seq_len ", options.seq_len, " is too short: at least 5"));
  const int64_t max_num_tokens = options.seq_len - 3;  // [CLS], [SEP], [SEP]

  // Usually fill the whole sequence; sometimes (short_seq_prob) aim shorter, to match fine-tuning.
  int64_t target_seq_length = max_num_tokens;
  bool short_target = false;
  if (rng.random() < options.short_seq_prob) {
    target_seq_length = rng.randint(2, max_num_tokens);
    short_target = true;
  }

  bool first = true;
  std::vector<int64_t> chunk;  // sentence indexes
  int64_t current_length = 0;
  Segment a, b;
  BertInstance inst;  // refilled for each instance
  for (int64_t i = 0; i < num_sentences; ++i) {
    chunk.push_back(i);
    current_length += static_cast<int64_t>(corpus.sentence(document, i).size());
    if (i != num_sentences - 1 && current_length < target_seq_length) continue;

    // How many chunk sentences go into A.
    int64_t a_end = 1;
    if (chunk.size() >= 2) a_end = rng.randint(1, static_cast<int64_t>(chunk.size()) - 1);
    a.clear();
    for (int64_t j = 0; j < a_end; ++j) a.extend(corpus.sentence(document, chunk[j]));

    b.clear();
    bool is_random_next = false;
    const bool forced = chunk.size() == 1;
    if (forced || rng.random() < 0.5) {
      is_random_next = true;
      const int64_t target_b_length = target_seq_length - static_cast<int64_t>(a.size());
      // Another document, if 10 tries find one (a one-document corpus uses itself).
      int64_t random_document = 0;
      for (int t = 0; t < 10; ++t) {
        random_document = rng.randint(0, num_documents - 1);
        if (random_document != static_cast<int64_t>(document)) break;
      }
      const int64_t random_sentences = static_cast<int64_t>(corpus.num_sentences(random_document));
      const int64_t random_start = rng.randint(0, random_sentences - 1);
      for (int64_t j = random_start; j < random_sentences; ++j) {
        b.extend(corpus.sentence(random_document, j));
        if (static_cast<int64_t>(b.size()) >= target_b_length) break;
      }
      // The chunk's unused sentences are put back, to start the next chunk.
      i -= static_cast<int64_t>(chunk.size()) - a_end;
    } else {
      for (size_t j = a_end; j < chunk.size(); ++j) b.extend(corpus.sentence(document, chunk[j]));
    }
    truncate_seq_pair(a, b, static_cast<size_t>(max_num_tokens), rng);

    inst.is_random_next = is_random_next;
    inst.short_target = short_target;
    inst.forced_random_next = is_random_next && forced;
    inst.first_of_document = first;
    first = false;
    inst.tokens.clear();
    inst.tokens.push_back(vocab.cls);
    inst.tokens.insert(inst.tokens.end(), a.buffer.begin() + a.begin, a.buffer.begin() + a.end);
    inst.tokens.push_back(vocab.sep);
    inst.segment_ids.assign(inst.tokens.size(), 0);
    inst.tokens.insert(inst.tokens.end(), b.buffer.begin() + b.begin, b.buffer.begin() + b.end);
    inst.tokens.push_back(vocab.sep);
    inst.segment_ids.resize(inst.tokens.size(), 1);
    create_masked_lm_predictions(inst, options, vocab, rng);
    emit(inst);

    chunk.clear();
    current_length = 0;
  }
}

namespace {

// The script's document list: the non-empty documents, in the order its shuffle leaves them.
// Shuffling indexes draws what shuffling the documents draws (Fisher–Yates looks at the length
// only), and no document is copied.
class ShuffledDocuments final : public DocumentCorpus {
 public:
  explicit ShuffledDocuments(const DocumentCorpus& corpus) : corpus_(corpus) {
    for (size_t d = 0; d < corpus.num_documents(); ++d)
      if (corpus.num_sentences(d) > 0) order.push_back(d);
  }
  size_t num_documents() const override { return order.size(); }
  size_t num_sentences(size_t d) const override { return corpus_.num_sentences(order[d]); }
  std::span<const TokenId32> sentence(size_t d, size_t i) const override { return corpus_.sentence(order[d], i); }

  std::vector<size_t> order;

 private:
  const DocumentCorpus& corpus_;
};

}  // namespace

std::vector<uint32_t> create_training_instances_python(const DocumentCorpus& corpus, const BertInstanceOptions& options,
                                                       const BertMaskVocab& vocab, int dupe_factor, int64_t seed,
                                                       const InstanceSink& emit) {
  PythonRandom rng(seed);
  ShuffledDocuments documents(corpus);
  rng.shuffle(documents.order);
  uint32_t made = 0;
  const InstanceSink count = [&](BertInstance& instance) {
    if (made == UINT32_MAX) throw Error("--rng python: more than 2^32 - 1 instances");
    ++made;
    emit(instance);
  };
  for (int pass = 0; pass < dupe_factor; ++pass)
    for (size_t d = 0; d < documents.num_documents(); ++d)
      create_instances_from_document(documents, d, options, vocab, rng, count);
  // Shuffling indexes draws what shuffling the instances draws, as for the documents above.
  std::vector<uint32_t> order(made);
  std::iota(order.begin(), order.end(), 0u);
  rng.shuffle(order);
  return order;
}

std::vector<BertInstance> create_training_instances_python(const DocumentCorpus& corpus,
                                                           const BertInstanceOptions& options,
                                                           const BertMaskVocab& vocab, int dupe_factor, int64_t seed) {
  std::vector<BertInstance> made;
  const std::vector<uint32_t> order = create_training_instances_python(
      corpus, options, vocab, dupe_factor, seed, [&made](BertInstance& instance) { made.push_back(instance); });
  std::vector<BertInstance> instances;
  instances.reserve(order.size());
  for (uint32_t k : order) instances.push_back(std::move(made[k]));
  return instances;
}

BertMaskVocab make_bert_mask_vocab(const std::vector<std::string>& entries, const std::string& source) {
  BertMaskVocab v;
  std::unordered_map<std::string_view, size_t> position;  // entry → index in vocab_words
  v.is_continuation.resize(entries.size());
  for (size_t id = 0; id < entries.size(); ++id) {
    const std::string& e = entries[id];
    auto [it, fresh] = position.emplace(e, v.vocab_words.size());
    if (fresh)
      v.vocab_words.push_back(static_cast<TokenId32>(id));
    else
      v.vocab_words[it->second] = static_cast<TokenId32>(id);
    v.is_continuation[id] = e.starts_with("##");  // Python's token.startswith("##")
  }
  auto need = [&](const char* token) {
    auto it = position.find(token);
    if (it == position.end())
      throw Error(Where{source}, cat("the vocabulary has no ", token, " entry, which BERT instances need"));
    return v.vocab_words[it->second];
  };
  v.cls = need("[CLS]");
  v.sep = need("[SEP]");
  v.mask = need("[MASK]");
  return v;
}

template void create_instances_from_document<PythonRandom>(const DocumentCorpus&, size_t, const BertInstanceOptions&,
                                                           const BertMaskVocab&, PythonRandom&, const InstanceSink&);
template void create_instances_from_document<CounterRng>(const DocumentCorpus&, size_t, const BertInstanceOptions&,
                                                         const BertMaskVocab&, CounterRng&, const InstanceSink&);
template void create_masked_lm_predictions<PythonRandom>(BertInstance&, const BertInstanceOptions&,
                                                         const BertMaskVocab&, PythonRandom&);
template void create_masked_lm_predictions<CounterRng>(BertInstance&, const BertInstanceOptions&, const BertMaskVocab&,
                                                       CounterRng&);

}  // namespace pretrain
