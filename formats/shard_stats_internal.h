// The counting half of shard-tool stats (internal to formats/): each shard of a set checked
// against its manifest entry and counted into a tally of its kind; shard_stats.cpp sums the
// tallies in shard order and turns them into the report.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/manifest.h"
#include "formats/doc_json.h"
#include "formats/shard_stats.h"
#include "formats/stats_histogram.h"

namespace pretrain::shard_stats_internal {

struct Shard {
  std::string path;                 // Megatron: the .bin
  std::optional<ShardEntry> entry;  // from the manifest, when there is one
  std::string root;                 // the manifest's directory
  int bin = -1;                     // a binned BERT set: index into the bins
};

// Present, the size (and with `verify` the xxh3 and companions) the manifest records; Error
// naming the file and the manifest otherwise. Nothing to check without a manifest.
void check_against_manifest(const Shard& s, bool verify);
uint64_t disk_bytes(const Shard& s, const std::string& format);  // a Megatron shard's .idx too

// Token ids: the special ones (left out of the text tokens) and the unknown token, from the
// manifest's tokenizer record.
class IdKinds {
 public:
  enum Kind : uint8_t { text = 0, special = 1, unknown = 2 };
  IdKinds() = default;
  explicit IdKinds(const TokenizerInfo& t);
  Kind operator()(int64_t id) const { return id >= 0 && size_t(id) < kinds_.size() ? Kind(kinds_[size_t(id)]) : text; }
  std::optional<int64_t> unk_id() const { return unk_id_; }
  bool known() const { return !kinds_.empty(); }

 private:
  std::vector<uint8_t> kinds_;
  std::optional<int64_t> unk_id_;
};

struct DocTally {
  uint64_t documents = 0, empty = 0, bytes = 0, chars = 0, words = 0, paragraphs = 0, sentences = 0;
  uint64_t duplicates = 0, duplicate_bytes = 0;  // documents the dedup report names
  StatsHistogram doc_bytes, doc_words, doc_paragraphs, doc_sentences;

  void add(const Document& d, const SentenceCounter& count_sentences, const std::unordered_set<std::string>* removed);
  void merge(const DocTally& o);
};
// One document shard: decoded on this thread, its documents counted in batches on the workers.
DocTally tally_docs(const Shard& s, const SentenceCounter& sentences, const std::unordered_set<std::string>* removed);

struct BertTally {
  uint64_t rows = 0, instances = 0, real_tokens = 0, text_tokens = 0, unk = 0, predictions = 0, nsp_random = 0;
  StatsHistogram instance_tokens{StatsHistogram::Scale::exact}, row_tokens{StatsHistogram::Scale::exact},
      row_instances{StatsHistogram::Scale::exact};
  void merge(const BertTally& o);
};
struct BertShape {
  int64_t seq_len = 0;   // of this shard (a bin's padded length in a binned set)
  int64_t max_pack = 0;  // 0: not packed
};
// Reads only the datasets it counts; Error naming the shard when its shape is not `want`.
BertTally tally_bert(const Shard& s, const BertShape& want, const IdKinds& kinds);

// GPT tokens: how often each id occurs (counted over the token array in parallel pieces), and the
// documents' and sequences' lengths (from the index, or the end-of-text ids of an llm.c stream).
struct TokenTally {
  uint64_t documents = 0, sequences = 0, tokens = 0;
  std::vector<uint64_t> id_counts;  // tokens of each id, up to the largest id seen
  StatsHistogram doc_tokens, seq_tokens;
  void merge(const TokenTally& o);
};
// Error naming the shard for an id that is negative or past any vocabulary (2^24).
TokenTally tally_megatron(const Shard& s);
// An llm.c stream, cut into documents at each `eot`: before it when the stream opens with one
// (llm.c's fineweb.py writes it before every document), else after it (make-pretraining-shards
// ends every document with it); tokens left at either end are a document of their own.
TokenTally tally_llmc(const Shard& s, int64_t eot);

}  // namespace pretrain::shard_stats_internal
