// shard-tool: inspect, verify, convert and count shards. The work is in shard_tool.cpp; here is
// what `stats` takes from tokenizer/, which the formats library does not link (the tool does, as
// train-tokenizer links formats): make-pretraining-shards' sentence splitting, and the bytes each
// id of the tokenizer that made a set of shards stands for.
#include <tbb/enumerable_thread_specific.h>

#include <memory>
#include <optional>

#include "common/error.h"
#include "common/file.h"
#include "common/utf8.h"
#include "formats/shard_tool.h"
#include "tokenizer/gpt2_pretokenize.h"
#include "tokenizer/sentences.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_record.h"

namespace {

using namespace pretrain;

// Sentences as make-pretraining-shards counts them: ICU's, one splitter per thread.
SentenceCounter sentence_counter(const std::string& lang) {
  struct Splitters {
    explicit Splitters(const std::string& lang) : first(lang) {}
    SentenceSplitter first;
    tbb::enumerable_thread_specific<std::optional<SentenceSplitter>> local;
    tbb::enumerable_thread_specific<std::string> lines;
  };
  auto s = std::make_shared<Splitters>(lang);
  return [s](std::string_view text) -> uint64_t {
    auto& mine = s->local.local();
    if (!mine) mine.emplace(s->first);
    std::string& lines = s->lines.local();
    lines.clear();
    return mine->append_lines(text, lines);
  };
}

// The bytes of text one token stands for inside a text, as the vocabulary spells it: byte-level
// BPE spells each byte as one character (gpt2_pretokenize.h; an added token's other characters
// are themselves), SentencePiece a space as "▁" and a byte it fell back on as <0xNN>.
uint32_t spelled_bytes(std::string_view kind, const std::string& token) {
  if (kind == "sentencepiece" && token.size() == 6 && token.starts_with("<0x") && token.ends_with(">")) return 1;
  uint32_t bytes = 0;
  const auto* p = reinterpret_cast<const uint8_t*>(token.data());
  const auto* end = p + token.size();
  while (p < end) {
    const Utf8Step c = decode_utf8(p, end);
    if (kind == "bpe") bytes += c.valid && gpt2::unicode_to_byte(c.code_point) >= 0 ? 1 : c.length;
    else bytes += c.valid && c.code_point == U'\u2581' ? 1 : c.length;
    p += c.length;
  }
  return bytes;
}

// The tokenizer that made the shards: `path` when given (it must have the vocabulary hash the
// manifest records), else the one the manifest's record names (tokenizer_record.h). Then each id's
// bytes (special tokens: none).
std::vector<uint32_t> token_bytes(const TokenizerInfo& record, const std::string& manifest_path, const std::string& path) {
  std::unique_ptr<Tokenizer> tok;
  if (path.empty()) {
    tok = load_recorded_tokenizer(record, manifest_path);
  } else {
    tok = load_tokenizer(path);
    if (!record.vocab_hash.empty() && tok->info().vocab_hash != record.vocab_hash)
      throw UsageError(Where{path}, cat("not the tokenizer that made the shards (vocabulary hash ", tok->info().vocab_hash,
                                        ", ", manifest_path, " says ", record.vocab_hash, ")"));
  }
  const std::string file = tok->source();
  const std::string_view kind = tok->kind();
  if (kind != "bpe" && kind != "sentencepiece")
    throw Error(Where{file}, cat("a ", kind, " vocabulary spells no bytes per token (its [UNK] share says how it fits)"));
  std::vector<uint32_t> bytes(size_t(tok->vocab_size()));
  for (TokenId id = 0; id < TokenId(bytes.size()); ++id)
    bytes[size_t(id)] = tok->is_special(id) ? 0 : spelled_bytes(kind, tok->id_to_token(id));
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  return pretrain::shard_tool_main(argc, argv, {.sentences = sentence_counter, .token_bytes = token_bytes});
}
