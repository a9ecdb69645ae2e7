// GPT-2 byte-level BPE: GPT-2's pre-tokenizer pattern with ICU properties, bytes to unicode, merges by rank.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace pretrain {

struct TokenizerJson;

// From encoder.json/vocab.json (token → id) and vocab.bpe/merges.txt (one merge per line, by rank);
// <|endoftext|>, where the vocabulary has it, is the added (special) token.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(const std::string& vocab_json, const std::string& merges_path,
                                              const TokenizerOptions& options);
// From an HF tokenizer.json whose model is BPE with a ByteLevel pre-tokenizer (tokenizer_json.h).
std::unique_ptr<Tokenizer> make_bpe_tokenizer_from_hf(const TokenizerJson& tokenizer_json,
                                                      const TokenizerOptions& options);
// The same from JSON already parsed (tests, fuzzers); `source` names it in messages.
std::unique_ptr<Tokenizer> make_bpe_tokenizer_from_hf(const nlohmann::json& tokenizer_json, const std::string& source,
                                                      const TokenizerOptions& options);

// For the tests: the model step alone on one pre-token's raw bytes, by the algorithm the fast path
// picks for its length, by one of its three algorithms, or by the naive reference implementation.
// `tokenizer` must come from one of the functions above.
enum class BpeMergeAlgorithm { by_length, scan, heap, buckets, reference };
std::vector<TokenId> bpe_merge_word(const Tokenizer& tokenizer, std::string_view word,
                                    BpeMergeAlgorithm algorithm = BpeMergeAlgorithm::by_length);

}  // namespace pretrain
