// Tokenized documents on disk: written once by make-pretraining-shards' first stage, then read
// through mmap by every later one, so no stage holds the corpus in memory.
//
//   <dir>/tokens.bin     int32 token ids, all sentences back to back
//   <dir>/sentences.bin  uint64 end offset (in tokens) of each sentence
//   <dir>/documents.bin  uint64 end index (in sentences) of each document
//   <dir>/store.json     counts and the caller's key; written last, so its presence means the
//                        three files are whole (each is also written to a temp name and renamed)
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/file.h"
#include "datagen/bert_instances.h"

namespace pretrain {

class TokenStoreWriter {
 public:
  explicit TokenStoreWriter(const std::string& dir);
  // A document without sentences is skipped (the Python script drops empty documents too).
  void add_document(const std::vector<std::vector<TokenId32>>& sentences);
  // Renames the files into place and writes store.json with `key` (what made the store: inputs,
  // tokenizer hash, options), which a resumed run compares before it reuses the store.
  void commit(const nlohmann::json& key);
  uint64_t documents() const { return documents_; }
  uint64_t sentences() const { return sentences_; }
  uint64_t tokens() const { return tokens_; }

 private:
  std::string dir_;
  AtomicFile tokens_file_, sentences_file_, documents_file_;
  uint64_t documents_ = 0, sentences_ = 0, tokens_ = 0;
};

class TokenStore final : public DocumentCorpus {
 public:
  explicit TokenStore(const std::string& dir);
  // True when dir holds a complete store made with `key`.
  static bool complete(const std::string& dir, const nlohmann::json& key);

  size_t num_documents() const override { return documents_.size(); }
  size_t num_sentences(size_t d) const override { return document_end(d) - document_begin(d); }
  std::span<const TokenId32> sentence(size_t d, size_t i) const override;
  uint64_t num_tokens() const { return tokens_.size(); }
  uint64_t total_sentences() const { return sentence_ends_.size(); }
  // All of document d's tokens, its sentences back to back.
  std::span<const TokenId32> document_tokens(size_t d) const;
  // Long passes call this now and then so the mapped pages they touched leave the resident set.
  void release_pages() const {
    tokens_file_.release_pages();
    sentences_file_.release_pages();
  }

 private:
  size_t document_begin(size_t d) const { return d ? documents_[d - 1] : 0; }
  size_t document_end(size_t d) const { return documents_[d]; }
  uint64_t sentence_begin(size_t s) const { return s ? sentence_ends_[s - 1] : 0; }
  MappedFile tokens_file_, sentences_file_, documents_file_;
  std::span<const TokenId32> tokens_;
  std::span<const uint64_t> sentence_ends_;
  std::span<const uint64_t> documents_;
};

}  // namespace pretrain
