// Tokenized documents on disk: written once by make-pretraining-shards' first stage, then read
// through mmap by every later one, so no stage holds the corpus in memory.
//
//   <dir>/tokens.bin     int32 token ids, all sentences back to back
//   <dir>/sentences.bin  uint64 end offset (in tokens) of each sentence
//   <dir>/documents.bin  uint64 end index (in sentences) of each document
//   <dir>/store.json     counts and the caller's key; written last, so its presence means the
//                        three files are whole (each is written as <name>.partial and renamed)
//   <dir>/progress.json  while the store is being written: the counts at the last checkpoint and
//                        how many input documents they cover, so an interrupted run continues
//                        from there (the .partial files are cut back to the checkpoint)
//
// Under mpirun the ranks write one store together (TokenStorePieces): each its own runs of
// documents, straight into the .partial files at offsets every rank knows.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/file.h"
#include "datagen/shards/bert_instances.h"

namespace pretrain {

// What a store, or a run of its documents, holds (or, as an offset: the counts before it).
struct TokenStoreCounts {
  uint64_t documents = 0, sentences = 0, tokens = 0;
  TokenStoreCounts& operator+=(const TokenStoreCounts& o) {
    documents += o.documents, sentences += o.sentences, tokens += o.tokens;
    return *this;
  }
  friend TokenStoreCounts operator-(TokenStoreCounts a, const TokenStoreCounts& b) {
    return {a.documents - b.documents, a.sentences - b.sentences, a.tokens - b.tokens};
  }
  friend bool operator==(const TokenStoreCounts&, const TokenStoreCounts&) = default;
};

class TokenStoreWriter {
 public:
  // What a checkpoint records: the store's counts, how many input documents (empty ones
  // included) they hold, and whatever else the caller needs to go on from there (`extra`).
  struct Checkpoint : TokenStoreCounts {
    uint64_t input_documents = 0;
    nlohmann::json extra;
  };
  // A new store (any earlier partial files are emptied).
  explicit TokenStoreWriter(const std::string& dir);
  // Continues the partial store whose files hold `from` (a resume_point(), or the whole store that
  // TokenStorePieces wrote, which commit() then puts in place).
  TokenStoreWriter(const std::string& dir, const TokenStoreCounts& from);
  // The last checkpoint of a partial store made with `key`, when its files still hold it.
  static std::optional<Checkpoint> resume_point(const std::string& dir, const nlohmann::json& key);
  // A document without sentences is skipped (the Python script drops empty documents too).
  void add_document(const std::vector<std::vector<TokenId32>>& sentences);
  // The same from one buffer: `tokens` holds the sentences back to back, sentence k ending at
  // ends[k] − base (ends rise; no empty sentence).
  void add_document(std::span<const TokenId32> tokens, std::span<const uint64_t> ends, uint64_t base);
  // Makes everything added so far, which covers the first `input_documents` input documents,
  // survive a kill: flushes the files, then rewrites progress.json (with `extra`, which
  // resume_point() hands back).
  void checkpoint(uint64_t input_documents, const nlohmann::json& key, const nlohmann::json& extra = nullptr);
  // Renames the files into place and writes store.json with `key` (what made the store: inputs,
  // tokenizer hash, options), which a resumed run compares before it reuses the store.
  void commit(const nlohmann::json& key);
  uint64_t documents() const { return documents_; }
  uint64_t sentences() const { return sentences_; }
  uint64_t tokens() const { return tokens_; }
  TokenStoreCounts counts() const { return {documents_, sentences_, tokens_}; }

 private:
  std::string dir_;
  AtomicFile tokens_file_, sentences_file_, documents_file_;
  uint64_t documents_ = 0, sentences_ = 0, tokens_ = 0;
};

class TokenStore final : public DocumentCorpus {
 public:
  // resident_budget: see release_pages(); tests pass a small one.
  explicit TokenStore(const std::string& dir, uint64_t resident_budget = kResidentBudget);
  ~TokenStore() override;
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;
  // True when dir holds a complete store made with `key`.
  static bool complete(const std::string& dir, const nlohmann::json& key);

  size_t num_documents() const override { return documents_.size(); }
  size_t num_sentences(size_t d) const override { return document_end(d) - document_begin(d); }
  std::span<const TokenId32> sentence(size_t d, size_t i) const override;
  uint64_t num_tokens() const { return tokens_.size(); }
  uint64_t total_sentences() const { return sentence_ends_.size(); }
  // The counts of documents [0, d), d ≤ num_documents(): where document d begins.
  TokenStoreCounts counts_before(size_t d) const;
  // All of document d's tokens, its sentences back to back.
  std::span<const TokenId32> document_tokens(size_t d) const;
  // Drops the mapped pages from the resident set (they are read again from the page cache when
  // next touched). sentence() and document_tokens() call it themselves once they have touched
  // `resident_budget` bytes since the last release, so however large the store and in whatever
  // order it is read (BERT's random next sentences, GPT's shuffled documents), its share of the
  // process's RSS stays near that budget. Any thread may call it: the maps are read-only and a
  // span in use stays valid.
  void release_pages() const;
  static constexpr uint64_t kResidentBudget = uint64_t{1} << 30;

  // Reads without the maps (pread): for random access to a store larger than the budget, where a
  // mapped read costs a fault (~5 µs, mapping a large folio) each time it lands on a released
  // region. The first sentence of document d and that document's sentence count come from here
  // too. ends[k] = end (in tokens) of sentence s0 + k - 1, for k in [0, n]: ends[0] is where
  // sentence s0 begins.
  uint64_t first_sentence(size_t d) const { return document_begin(d); }
  void read_sentence_bounds(uint64_t s0, size_t n, uint64_t* ends) const;
  void read_tokens(uint64_t begin, uint64_t end, TokenId32* out) const;
  // sentence(d, i) through pread into two windows per thread (a few dozen sentences each, the
  // least recently used one refilled on a miss): one follows the document being cut into
  // instances, the other the random documents its next-sentence pairs draw. The span stays valid
  // until this thread's next read_sentence() (create_instances_from_document copies each span
  // before it asks for the next).
  std::span<const TokenId32> read_sentence(size_t d, size_t i) const;

 private:
  size_t document_begin(size_t d) const { return d ? documents_[d - 1] : 0; }
  size_t document_end(size_t d) const { return documents_[d]; }
  uint64_t sentence_begin(size_t s) const { return s ? sentence_ends_[s - 1] : 0; }
  // Counts what reading tokens [begin, end) and sentence end `s` maps, in 2 MiB regions
  // first touched since the last release: a fault on a file mapping maps the page cache's folio
  // around the address, and on this kernel (6.x, ext4 large folios) that is up to 2 MiB, so one
  // random read of a few bytes can add 2 MiB to the RSS.
  void touch(uint64_t begin, uint64_t end, uint64_t s) const;
  static constexpr int kRegionShift = 21;  // 2 MiB
  struct Regions {
    std::unique_ptr<std::atomic<uint64_t>[]> bits;  // one bit per region touched since the release
    size_t words = 0;
    explicit Regions(uint64_t bytes);
    uint64_t mark(uint64_t first_byte, uint64_t end_byte);  // bytes of regions newly marked
    void clear();
  };
  MappedFile tokens_file_, sentences_file_, documents_file_;
  int tokens_fd_ = -1, sentences_fd_ = -1;  // for the pread path
  uint64_t id_ = 0;                          // tells this store's windows from another's
  uint64_t resident_budget_;
  mutable std::atomic<uint64_t> touched_{0};
  mutable Regions token_regions_, sentence_regions_;
  std::span<const TokenId32> tokens_;
  std::span<const uint64_t> sentence_ends_;
  std::span<const uint64_t> documents_;
};

// One store written by several processes at once (mpirun ranks over a shared filesystem), each
// writing its own runs of documents, with no process copying the others': rank 0 create()s the
// .partial files at their final sizes; then every rank write()s its runs at their offsets in the
// whole store and finish()es (its bytes are on disk before the barrier that must follow); then
// rank 0 commits with TokenStoreWriter(dir, total).commit(key). The files are those a
// TokenStoreWriter adding the same documents in order writes.
class TokenStorePieces {
 public:
  static void create(const std::string& dir, const TokenStoreCounts& total);
  explicit TokenStorePieces(const std::string& dir);  // opens the created files
  ~TokenStorePieces();
  TokenStorePieces(const TokenStorePieces&) = delete;
  TokenStorePieces& operator=(const TokenStorePieces&) = delete;
  // Documents [first, first + documents) of `from`, placed after `at` in the whole store.
  void write(const TokenStore& from, size_t first, size_t documents, const TokenStoreCounts& at);
  void finish();  // fsyncs

 private:
  std::string dir_;
  int fds_[3] = {-1, -1, -1};  // tokens, sentences, documents
  std::vector<uint64_t> ends_;
  std::vector<TokenId32> tokens_;
};

}  // namespace pretrain
