// The two model families every stage knows by one name: which shards make-pretraining-shards
// writes (NVIDIA's BERT HDF5 or Megatron's GPT tokens), which samples the loader yields, which
// network the trainer builds.
#pragma once
#include <string>

namespace pretrain {

enum class ModelKind { bert, gpt };

const char* model_kind_name(ModelKind kind);  // "bert" | "gpt"
// "bert" or "gpt"; UsageError naming `what` (an option, a JSON key) otherwise.
ModelKind parse_model_kind(const std::string& name, const std::string& what);

}  // namespace pretrain
