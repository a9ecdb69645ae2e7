// shard-tool: inspect, verify, convert and count shards. The work is in shard_tool.cpp; here is
// what `stats` takes from tokenizer/, which the formats library does not link (the tool does, as
// train-tokenizer links formats): make-pretraining-shards' sentence splitting, and the tokenizer
// that made a set of shards, loaded again to decode its ids.
#include <tbb/enumerable_thread_specific.h>

#include <memory>
#include <optional>

#include "common/error.h"
#include "common/file.h"
#include "formats/shard_tool.h"
#include "tokenizer/sentences.h"
#include "tokenizer/tokenizer.h"

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

// The tokenizer that made the shards: `path` when given, else the record's first file as it was
// given (relative to where make-pretraining-shards ran) or beside the manifest, loaded with the
// recorded options; either must have the vocabulary hash the manifest records.
DecodedBytes token_decoder(const TokenizerInfo& record, const std::string& manifest_path, const std::string& path) {
  std::string file = path;
  if (file.empty()) {
    const std::string& given = record.files.front().path;
    file = file_exists(given) ? given : path_join(dir_name(manifest_path), given);
    if (!file_exists(file))
      throw Error(Where{manifest_path}, cat("the tokenizer that made the shards ('", given, "') is not here or beside the manifest"));
  }
  std::shared_ptr<const Tokenizer> tok =
      load_tokenizer(file, path.empty() ? tokenizer_options_from_json(record.options, manifest_path) : TokenizerOptions{});
  if (!record.vocab_hash.empty() && tok->info().vocab_hash != record.vocab_hash)
    throw UsageError(Where{file}, cat("not the tokenizer that made the shards (vocabulary hash ", tok->info().vocab_hash, ", ",
                                      manifest_path, " says ", record.vocab_hash, ")"));
  return [tok](std::span<const int32_t> ids) -> uint64_t { return tok->decode(ids, /*skip_special_tokens=*/true).size(); };
}

}  // namespace

int main(int argc, char** argv) {
  return pretrain::shard_tool_main(argc, argv, {.sentences = sentence_counter, .decoder = token_decoder});
}
