// make-pretraining-shards, stage 1: documents → token ids → a token store on disk (token_store.h).
//
// bert: each document's sentences (the text format's lines, or ICU sentences of its text, split
// on the worker that tokenizes it), each tokenized; gpt: the whole text tokenized at once, as
// Megatron's preprocess_data.py encodes a JSON document, then the end-of-document id. In parallel,
// in input order, checkpointed every `checkpoint_bytes` of document text so that a resumed run
// goes on from the last checkpoint.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/model_kind.h"
#include "datagen/shards/text_documents.h"
#include "datagen/shards/token_store.h"
#include "tokenizer/tokenizer.h"

namespace pretrain {

struct TokenizeOptions {
  ModelKind model = ModelKind::bert;
  std::string lang = "en";              // sentence splitting of text that is not one sentence per line
  TokenizerOptions tokenizer_options;   // those the tokenizer was loaded with: part of the store's key
  bool resume = false;                  // continue the store's last checkpoint when its key matches
  uint64_t checkpoint_bytes = uint64_t{64} << 20;
  // Under mpirun: this rank's part of the inputs, blocks of kPartBlock input documents dealt
  // round-robin (block b to part b % parts), so every rank has about as much to tokenize whatever
  // the files; each part is a store of its own (no checkpoints), assembled by assemble_token_store.
  int part = 0, parts = 1;
  static constexpr uint64_t kPartBlock = 16;
};

// What makes a store: the inputs (path, size, mtime), the model, language, tokenizer (its
// vocabulary hash and options). A resumed run reuses a store, or its checkpoint, only with the same key.
nlohmann::json token_store_key(const TokenizeOptions& options, const Tokenizer& tok, const TextDocumentReader& reader);

// The id that ends each GPT document: the tokenizer's eod, eos or [SEP]; UsageError when it has none.
TokenId32 end_of_document_id(const Tokenizer& tok);

// Reads every document of `reader` (of options.part, when parts > 1) into a committed store in
// `store_dir` made with `key`. A part's store also lists, in block_documents.json, how many stored
// documents each of its blocks gave.
void tokenize_documents(const TokenizeOptions& options, const Tokenizer& tok, TextDocumentReader& reader,
                        const std::string& store_dir, const nlohmann::json& key);

// The one-process store from the parts' stores (part_dirs[p] = part p of part_dirs.size()): their
// blocks taken back in input order, so the bytes are a one-process run's.
void assemble_token_store(const std::vector<std::string>& part_dirs, const std::string& store_dir,
                          const nlohmann::json& key);

}  // namespace pretrain
