// Tokenized documents on disk: written once by make-pretraining-shards' first stage, then read
// through mmap by every later one, so no stage holds the corpus in memory.
//
//   <dir>/tokens.bin     token ids, all sentences back to back: uint16 when every id of the
//                        tokenizer fits (a vocabulary of at most 65536: BERT's, GPT-2's), else
//                        int32 (store.json's token_bytes); half the disk of int32 ids, and for GPT
//                        as large as the Megatron/llm.c output it becomes
//   <dir>/sentences.bin  uint64 end offset (in tokens) of each sentence
//   <dir>/documents.bin  uint64 end index (in sentences) of each document
//   <dir>/store.json     counts, token width and the caller's key; written last, so its presence
//                        means the three files are whole (each is written as <name>.partial and
//                        renamed) — unless it says a later stage took the store over (taken_by),
//                        which frees its files as it consumes them (make_shards.h)
//   <dir>/progress.json  while the store is being written: the counts at the last checkpoint and
//                        how many input documents they cover, so an interrupted run continues
//                        from there (the .partial files are cut back to the checkpoint)
//
// make-pretraining-shards tokenizes the input in pieces (input_pieces.h), each a store of its own,
// then moves them into the one store (TokenStoreJoin): each piece's documents at their offsets,
// its tokens copied from the end backwards and the piece's file cut behind them, so that the
// pieces and the store together never take much more than the store.
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

// Bytes per stored token id for a vocabulary of `vocab_size` ids: 2 when every id fits uint16.
int token_store_width(int64_t vocab_size);

// A committed store's store.json.
struct TokenStoreMeta {
  TokenStoreCounts counts;
  int token_bytes = 4;
  // The later stage that took the store over (null: none). It frees the store's files as it goes
  // (freed: all of them are gone), so only that stage, resumed with the same key, may read them.
  nlohmann::json taken_by;
  bool freed = false;
};
// The store.json of a store committed in `dir` with `key`; nullopt when there is none (or it is damaged).
std::optional<TokenStoreMeta> read_token_store_meta(const std::string& dir, const nlohmann::json& key);
// Says in store.json that the stage `by` takes the store over, before it frees any of it.
void take_token_store(const std::string& dir, const nlohmann::json& by);
// Removes the store's three files; store.json stays, saying so (its counts are still read).
void free_token_store(const std::string& dir);

class TokenStoreWriter {
 public:
  // What a checkpoint records: the store's counts, how many input documents (empty ones
  // included) they hold, and whatever else the caller needs to go on from there (`extra`).
  struct Checkpoint : TokenStoreCounts {
    uint64_t input_documents = 0;
    nlohmann::json extra;
  };
  // A new store of `token_bytes`-wide ids (any earlier partial files are emptied).
  explicit TokenStoreWriter(const std::string& dir, int token_bytes = 4);
  // Continues the partial store whose files hold `from` (a resume_point(), or the whole store that
  // TokenStoreJoin wrote, which commit() then puts in place).
  TokenStoreWriter(const std::string& dir, const TokenStoreCounts& from, int token_bytes = 4);
  // The last checkpoint of a partial store made with `key`, when its files still hold it.
  static std::optional<Checkpoint> resume_point(const std::string& dir, const nlohmann::json& key, int token_bytes = 4);
  // A document without sentences is skipped (the Python script drops empty documents too).
  void add_document(const std::vector<std::vector<TokenId32>>& sentences);
  // The same from one buffer: `tokens` holds the sentences back to back, sentence k ending at
  // ends[k] − base (ends rise; no empty sentence). Error when an id does not fit the width.
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
  int token_bytes_;
  AtomicFile tokens_file_, sentences_file_, documents_file_;
  uint64_t documents_ = 0, sentences_ = 0, tokens_ = 0;
  std::vector<uint16_t> narrow_;
};

class TokenStore final : public DocumentCorpus {
 public:
  // resident_budget: see release_pages(); tests pass a small one.
  explicit TokenStore(const std::string& dir, uint64_t resident_budget = kResidentBudget);
  ~TokenStore() override;
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;
  // True when dir holds a complete store made with `key` that no later stage took over.
  static bool complete(const std::string& dir, const nlohmann::json& key);

  size_t num_documents() const override { return documents_.size(); }
  size_t num_sentences(size_t d) const override { return document_end(d) - document_begin(d); }
  // A narrow store's ids are widened into a buffer of the calling thread: the span is valid until
  // its next sentence() (DocumentCorpus's rule).
  std::span<const TokenId32> sentence(size_t d, size_t i) const override;
  uint64_t num_tokens() const { return num_tokens_; }
  uint64_t total_sentences() const { return sentence_ends_.size(); }
  int token_bytes() const { return token_bytes_; }
  // The counts of documents [0, d), d ≤ num_documents(): where document d begins.
  TokenStoreCounts counts_before(size_t d) const;
  uint64_t document_size(size_t d) const;  // tokens of document d
  // All of document d's tokens, its sentences back to back (a narrow store's: valid until this
  // thread's next document_tokens()).
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
  // Tokens [begin, end) as stored (token_bytes() each).
  void read_token_bytes(uint64_t begin, uint64_t end, void* out) const;
  // sentence(d, i) through pread into two windows per thread (a few dozen sentences each, the
  // least recently used one refilled on a miss): one follows the document being cut into
  // instances, the other the random documents its next-sentence pairs draw. The span stays valid
  // until this thread's next read_sentence() (create_instances_from_document copies each span
  // before it asks for the next).
  std::span<const TokenId32> read_sentence(size_t d, size_t i) const;
  // Gives the disk blocks of tokens [begin, end) back to the filesystem (the whole pages inside
  // it; they read as zeros after): a stage that took the store over (take_token_store) and has
  // consumed those tokens. False when the filesystem cannot (the space then comes back when the
  // store is removed).
  bool free_tokens(uint64_t begin, uint64_t end) const;

 private:
  size_t document_begin(size_t d) const { return d ? documents_[d - 1] : 0; }
  size_t document_end(size_t d) const { return documents_[d]; }
  uint64_t sentence_begin(size_t s) const { return s ? sentence_ends_[s - 1] : 0; }
  // Tokens [begin, end) as int32, from the map: in place when the store is int32, else widened
  // into `buffer`.
  std::span<const TokenId32> mapped_tokens(uint64_t begin, uint64_t end, std::vector<TokenId32>& buffer) const;
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
  int token_bytes_;
  MappedFile tokens_file_, sentences_file_, documents_file_;
  int tokens_fd_ = -1, sentences_fd_ = -1;  // for the pread path
  uint64_t id_ = 0;                          // tells this store's windows from another's
  uint64_t resident_budget_;
  mutable std::atomic<uint64_t> touched_{0};
  mutable Regions token_regions_, sentence_regions_;
  const uint8_t* tokens_ = nullptr;
  uint64_t num_tokens_ = 0;
  std::span<const uint64_t> sentence_ends_;
  std::span<const uint64_t> documents_;
};

// The one store made from pieces (stores of consecutive runs of its documents, tokenized apart:
// mpirun ranks, or one process's pieces of a large input), with no piece copied whole while it
// still takes its space: begin() (one process, once) creates the store's .partial files at their
// final sizes and join.json; then each piece is moved in (move_piece(), any process, pieces in any
// order); then commit(). Every step survives a kill and is continued by a later run: a piece
// being moved has moving.json (its sentence and document ends are in the store; its tokens.bin
// is cut back as its tokens are), a piece moved is gone. The files are those a TokenStoreWriter
// adding the same documents in order writes.
class TokenStoreJoin {
 public:
  // The pieces' counts, in order; the store's are their sum.
  static void begin(const std::string& dir, const std::vector<TokenStoreCounts>& pieces, int token_bytes,
                    const nlohmann::json& key);
  // The pieces' counts of a join of `key` begun in dir whose files are there (a resumed run goes
  // on with it); nullopt when there is none.
  static std::optional<std::vector<TokenStoreCounts>> begun(const std::string& dir, const nlohmann::json& key);
  // A piece committed with `piece_key`, whole or being moved; nullopt when it is neither.
  static std::optional<TokenStoreCounts> piece_counts(const std::string& piece_dir, const nlohmann::json& piece_key);
  // Moves the piece's documents in after `at` (the counts of the pieces before it) and removes
  // the piece; its tokens go in chunks of `chunk_bytes` from the end, each on disk in the store
  // before the piece's file is cut back (so at most a chunk is held twice).
  static void move_piece(const std::string& dir, const std::string& piece_dir, const TokenStoreCounts& at,
                         uint64_t chunk_bytes = uint64_t{64} << 20);
  // Every piece moved: the files renamed into place, store.json written, join.json removed.
  static void commit(const std::string& dir, const TokenStoreCounts& total, int token_bytes, const nlohmann::json& key);
};

}  // namespace pretrain
