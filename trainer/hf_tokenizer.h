// The tokenizer files of a Hugging Face directory (AutoTokenizer.from_pretrained), written from the
// tokenizer the shards were made with, as the shards' manifest records it (common/manifest.h,
// TokenizerInfo): its kind, files (checked against their sizes and xxh3), load options, casing
// and special tokens. A manifest written before that record names the tokenizer only among
// make-pretraining-shards' saved arguments (--tokenizer): it is found there, with a warning
// saying so. WordPiece → vocab.txt (BertTokenizer); GPT-2 byte-level BPE → vocab.json + merges.txt
// (GPT2Tokenizer), or its tokenizer.json; SentencePiece (unigram, bpe) → tokenizer.json
// (PreTrainedTokenizerFast, no sentencepiece package needed); each with tokenizer_config.json and
// special_tokens_map.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pretrain {

// The manifest.json of the first --data source that has one ("" when none does).
std::string find_shards_manifest(const std::vector<std::string>& sources);

// Writes the tokenizer files into dir and returns true; returns false after a warning naming the
// path or field and why when the tokenizer cannot be had (no manifest, a record that cannot be
// read, a file gone or changed since the shards were made, a kind or SentencePiece model HF cannot
// express): the model files are still worth having.
bool write_hf_tokenizer(const std::string& dir, const std::string& manifest_path, int64_t model_max_length);

}  // namespace pretrain
