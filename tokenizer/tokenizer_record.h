// The tokenizer a manifest's record names (common/manifest.h TokenizerInfo), loaded again: what
// `--export` writes beside a model and what `shard-tool stats` spells ids with. One place decides
// where the recorded files are, that they are unchanged, and how they are loaded.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pretrain {

// A file the record names, as given (relative to where make-pretraining-shards ran, maybe here),
// else beside the manifest; "" when neither exists.
std::string find_recorded_file(const std::string& given, const std::string& manifest_path);

// The tokenizer of `record` (written by make-pretraining-shards, beside `manifest_path`): every
// file found, of the size and xxh3 recorded, loaded with the recorded options, and loading again
// as the same kind, vocabulary hash and file roles. Anything else is an Error naming the file or
// field and why. `paths` (optional) receives the files found, in the record's order.
std::unique_ptr<Tokenizer> load_recorded_tokenizer(const TokenizerInfo& record, const std::string& manifest_path,
                                                   std::vector<std::string>* paths = nullptr);

}  // namespace pretrain
