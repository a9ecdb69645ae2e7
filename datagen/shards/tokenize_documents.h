// make-pretraining-shards, stage 1: documents → token ids → a token store on disk (token_store.h).
//
// bert: each document's sentences (the text format's lines, or ICU sentences of its text, split
// on the worker that tokenizes it), each tokenized; gpt: the whole text tokenized at once, as
// Megatron's preprocess_data.py encodes a JSON document, then the end-of-document id. In parallel,
// in input order, checkpointed every `checkpoint_bytes` of document text so that a resumed run
// goes on from the last checkpoint. The input is tokenized in pieces (input_pieces.h), by one
// process or shared among mpirun ranks, which are then moved into the one store.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/communicator.h"
#include "common/model_kind.h"
#include "common/progress.h"
#include "datagen/shards/input_pieces.h"
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
  uint64_t piece_bytes = kDefaultPieceBytes;  // tokenize_in_pieces: the input's pieces (input_pieces.h)
  uint64_t move_chunk_bytes = uint64_t{64} << 20;  // tokenize_in_pieces: TokenStoreJoin::move_piece's chunks
};

// What makes a store: the inputs (path, size, mtime), the model, language, tokenizer (its
// vocabulary hash and options). A resumed run reuses a store, or its checkpoint, only with the
// same key (and the same width of ids, which store.json and progress.json say apart: the key is
// in every manifest, and stays what it was before stores were narrow).
nlohmann::json token_store_key(const TokenizeOptions& options, const Tokenizer& tok, const TextDocumentReader& reader);

// The id that ends each GPT document: the tokenizer's eod, eos or [SEP]; UsageError when it has none.
TokenId32 end_of_document_id(const Tokenizer& tok);

// Reads every document of `reader` (of its range, when it has one) into a committed store in
// `store_dir` made with `key`, checkpointed every options.checkpoint_bytes of text. Returns the
// input documents a --resume found checkpointed (0: tokenized from the start). Progress goes to
// `progress` when given (bytes of input), else to a line of its own.
uint64_t tokenize_documents(const TokenizeOptions& options, const Tokenizer& tok, TextDocumentReader& reader,
                            const std::string& store_dir, const nlohmann::json& key, Progress* progress = nullptr);

// Stage 1 as make-pretraining-shards runs it, a collective of `ranks` (one process too): the
// input of `inputs` cut into pieces (input_pieces.h); each rank tokenizes its run of them, each
// into <dir of store_dir>/pieces/piece-NNNNN (on --resume: a piece finished before is kept, one
// checkpointed is continued, at any rank count); then every rank moves its pieces into the one
// store in `store_dir` (TokenStoreJoin; a join a killed run began is continued). The store is
// the one a single tokenize_documents() over the whole input writes. A single piece is
// tokenized into the store directly.
void tokenize_in_pieces(const TokenizeOptions& options, const Tokenizer& tok, const std::vector<std::string>& inputs,
                        const std::string& store_dir, const nlohmann::json& key, const Communicator& ranks);

// The directory of piece `index` of a store in `store_dir`, and the key it is made with.
std::string piece_dir(const std::string& store_dir, size_t index);
nlohmann::json piece_key(const nlohmann::json& store_key, size_t index, const InputPiece& piece);

}  // namespace pretrain
