// Hugging Face's model directory (what transformers' from_pretrained reads and save_pretrained
// writes): config.json (BertConfig / GPT2Config) and model.safetensors under HF's names and layout.
// Our BERT parameters already carry HF's names; our GPT-2 ones are nanoGPT's, which are HF's with
// the four Conv1D weights ([in, out] in HF) transposed to nn.Linear's [out, in]. The tokenizer files
// beside them are hf_tokenizer.h's.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "trainer/model.h"
#include "trainer/safetensors.h"

namespace pretrain {

// --export / --init-from: a directory (existing, or any path without the .safetensors suffix) is
// HF's layout; a FILE.safetensors is our names and layout, as checkpoints hold them.
bool is_hf_directory(const std::string& path);

// config.json for `config` with the tokenizer's `vocab` ids (≤ config.vocab_size: --vocab-size
// padding rows are not HF's vocabulary); `special_ids` (the manifest's) give pad/bos/eos ids.
nlohmann::json hf_config(const ModelConfig& config, int64_t vocab, const std::map<std::string, int64_t>& special_ids);

// Our whole tensors (export_weights) → HF's names and layout, vocabulary rows cut to `vocab`.
std::map<std::string, HostTensor> to_hf_tensors(const ModelConfig& config, std::map<std::string, HostTensor> ours,
                                                int64_t vocab);
// HF's tensors → ours: Conv1D transposed back, LayerNorm gamma/beta renamed, vocabulary rows
// padded with zeros up to config.vocab_size. Tensors we do not have (buffers, tied copies) stay and
// import_weights ignores them.
std::map<std::string, HostTensor> from_hf_tensors(const ModelConfig& config, std::map<std::string, HostTensor> hf);

// Writes config.json and model.safetensors into dir (created).
void write_hf_model(const std::string& dir, const ModelConfig& config, const std::map<std::string, HostTensor>& ours,
                    int64_t vocab, const std::map<std::string, int64_t>& special_ids);
// Reads an HF directory (ours or save_pretrained's: model.safetensors, or the shards a
// model.safetensors.index.json lists) into our names and layout, after checking config.json
// against `config`: an Error naming the file and the first field that disagrees.
std::map<std::string, HostTensor> read_hf_model(const std::string& dir, const ModelConfig& config);
// What --init-from takes: an HF directory, or a .safetensors file of our names.
std::map<std::string, HostTensor> read_init_weights(const std::string& path, const ModelConfig& config);

}  // namespace pretrain
