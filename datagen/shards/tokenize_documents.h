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

#include "common/communicator.h"
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
  // the files. A part is a store of its own, checkpointed like a whole one, whose blocks.bin says
  // how many stored documents each of its blocks gave; tokenize_in_parts puts the parts' blocks
  // back in input order.
  int part = 0, parts = 1;
  static constexpr uint64_t kPartBlock = 16;
};

// What makes a store: the inputs (path, size, mtime), the model, language, tokenizer (its
// vocabulary hash and options). A resumed run reuses a store, or its checkpoint, only with the same key.
nlohmann::json token_store_key(const TokenizeOptions& options, const Tokenizer& tok, const TextDocumentReader& reader);

// The id that ends each GPT document: the tokenizer's eod, eos or [SEP]; UsageError when it has none.
TokenId32 end_of_document_id(const Tokenizer& tok);

// Reads every document of `reader` (of options.part, when parts > 1) into a committed store in
// `store_dir` made with `key`. A part's store also lists, in blocks.bin (uint64 each), how many
// stored documents each of its blocks gave. Returns the input documents a --resume found
// checkpointed (0: tokenized from the start).
uint64_t tokenize_documents(const TokenizeOptions& options, const Tokenizer& tok, TextDocumentReader& reader,
                        const std::string& store_dir, const nlohmann::json& key);

// Stage 1 under mpirun (a collective of `ranks`): each rank tokenizes its part (options.part and
// parts are set here) into `store_dir`-part-R-of-N, continuing its last checkpoint on --resume at
// the same N (rank 0 says where each part went on from); then the ranks learn every block's counts and each writes its own blocks into the
// one-process store in `store_dir` (TokenStorePieces): no rank copies another's.
void tokenize_in_parts(const TokenizeOptions& options, const Tokenizer& tok, TextDocumentReader& reader,
                       const std::string& store_dir, const nlohmann::json& key, const Communicator& ranks);

// Before tokenizing into `store_dir` in `parts` parts (1: one process): removes the parts an
// interrupted run at another part count left, saying on --resume that its tokenizing starts over.
void forget_other_parts(const std::string& store_dir, int parts, bool resume);

// The pieces of tokenize_in_parts, apart for tests. A part's blocks, each one's counts, in order
// (from the part's store and blocks.bin; an Error naming the file when they disagree).
std::vector<TokenStoreCounts> part_block_counts(const TokenStore& part, const std::string& part_dir);
// Where the blocks of part `part` begin in the whole store, from every part's block counts
// (blocks[p][l]: input block l · parts + p); one entry more at the end: the whole store's counts.
std::vector<TokenStoreCounts> part_block_offsets(const std::vector<std::vector<TokenStoreCounts>>& blocks, size_t part);
// Writes a part's blocks at those offsets.
void write_part_blocks(const TokenStore& part, const std::vector<TokenStoreCounts>& blocks,
                       const std::vector<TokenStoreCounts>& offsets, TokenStorePieces& out);

}  // namespace pretrain
