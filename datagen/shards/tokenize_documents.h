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
};

// What makes a store: the inputs (path, size, mtime), the model, language, tokenizer (its
// vocabulary hash and options). A resumed run reuses a store, or its checkpoint, only with the same key.
nlohmann::json token_store_key(const TokenizeOptions& options, const Tokenizer& tok, const TextDocumentReader& reader);

// The id that ends each GPT document: the tokenizer's eod, eos or [SEP]; UsageError when it has none.
TokenId32 end_of_document_id(const Tokenizer& tok);

// Reads every document of `reader` into a committed store in `store_dir` made with `key`.
void tokenize_documents(const TokenizeOptions& options, const Tokenizer& tok, TextDocumentReader& reader,
                        const std::string& store_dir, const nlohmann::json& key);

}  // namespace pretrain
