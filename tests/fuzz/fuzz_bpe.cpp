// Fuzz target for the GPT-2 byte-level BPE tokenizer. Every input is used three ways:
//   - as text: encode never crashes, every id is in the vocabulary, and
//     decode(encode(repair_utf8(x))) == repair_utf8(x) (with GPT-2's files when the shared data is
//     there, and always with a tiny vocabulary built in code: 256 byte tokens and a few merges);
//   - as token ids (pairs of bytes): decode gives valid UTF-8;
//   - as a merges file for the tiny vocabulary: it loads or throws pretrain::Error, nothing else;
//   - as an encoder.json: the fast reader declines it or gives the JSON document's entries.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/utf8.h"
#include "fuzz_util.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gpt2_pretokenize.h"
#include "tokenizer/tokenizer_json.h"

namespace {

using namespace pretrain;

nlohmann::json tiny_vocab() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2::byte_token(static_cast<uint8_t>(b))] = b;
  int id = 256;
  for (const char* t : {"\u0120t", "he", "\u0120the", "aa", "aaaa", "aaa", "\u0120\u0120", "\u00e6\u0139", "<|endoftext|>"})
    vocab[t] = id++;
  return vocab;
}

const Tokenizer& tiny() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    nlohmann::json j;
    // Built pair by pair: a braced list of string pairs would become a JSON object.
    nlohmann::json merges = nlohmann::json::array();
    for (auto [a, b] : {std::pair{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}, {"a", "a"}, {"aa", "aa"}, {"aa", "a"},
                        {"\u0120", "\u0120"}, {"\u00e6", "\u0139"}})
      merges.push_back(nlohmann::json::array({a, b}));
    j["model"] = {{"type", "BPE"}, {"vocab", tiny_vocab()}, {"merges", merges}};
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
    j["added_tokens"] = nlohmann::json::array({{{"id", 264}, {"content", "<|endoftext|>"}, {"special", true}}});
    TokenizerOptions options;
    options.bpe_cache_words = 64;  // small, so that the fuzzer also sees the cache clear
    return make_bpe_tokenizer_from_hf(j, "tiny tokenizer.json", options);
  }();
  return *tok;
}

const Tokenizer* gpt2_files() {
  static const std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    std::string encoder = pretrain::testing::shared_file("vocab/gpt2-encoder.json");
    std::string merges = pretrain::testing::shared_file("vocab/gpt2-vocab.bpe");
    if (encoder.empty() || merges.empty()) return nullptr;
    return make_bpe_tokenizer(encoder, merges, {});
  }();
  return tok.get();
}

void check_text(const Tokenizer& tok, std::string_view in) {
  std::string text(in);
  repair_utf8(text);
  std::vector<TokenId> ids = tok.encode(in);
  for (TokenId id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  if (tok.decode(ids) != text) __builtin_trap();
  if (tok.encode(text) != ids) __builtin_trap();
}

void check_ids(const Tokenizer& tok, std::string_view in) {
  std::vector<TokenId> ids;
  for (size_t i = 0; i + 1 < in.size(); i += 2)
    ids.push_back(static_cast<TokenId>((static_cast<uint8_t>(in[i]) << 8 | static_cast<uint8_t>(in[i + 1])) %
                                       tok.vocab_size()));
  if (!is_valid_utf8(tok.decode(ids)) || !is_valid_utf8(tok.decode(ids, true))) __builtin_trap();
}

void check_merges_file(std::string_view in) {
  static const fuzz::ScratchFile vocab("bpe", "-vocab.json");
  static const fuzz::ScratchFile merges("bpe", "-merges.txt");
  static const bool written = (vocab.write(tiny_vocab().dump()), true);
  (void)written;
  merges.write(in);
  try {
    auto tok = make_bpe_tokenizer(vocab.path(), merges.path(), {});
    check_text(*tok, "the aaaa \u65e5 tiny");
  } catch (const Error&) {
  }
}

void check_vocab_json(std::string_view in) {
  auto fast = read_flat_vocab_json(in);
  if (!fast) return;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) __builtin_trap();
  std::vector<std::pair<std::string, TokenId>> document;
  try {
    document = read_vocab_object(j, Where{"fuzz"});
  } catch (const Error&) {
    __builtin_trap();  // the fast path accepted what the document refuses
  }
  std::sort(fast->begin(), fast->end());  // keys are distinct: key order, the document's
  if (*fast != document) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  check_text(tiny(), in);
  check_ids(tiny(), in);
  if (const Tokenizer* tok = gpt2_files()) {
    check_text(*tok, in);
    check_ids(*tok, in);
  }
  check_merges_file(in);
  check_vocab_json(in);
  return 0;
}
