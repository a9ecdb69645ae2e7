// LoaderConfig from JSON: the one spelling of the loader's options that the C API and the Python
// module share, so a trainer in C, Python or anything with an FFI names options the same way.
//
//   {"sources": ["shards/"], "kind": "bert", "batch_size": 32, "dynamic_masking": true, …}
//
// Keys are LoaderConfig's field names; dynamic masking is flattened: "dynamic_masking" (bool),
// "mask_probability", "max_predictions", "mask_id", "vocab_size", "special_ids". "sources" may be
// one string; "id_dtype" is "int32" or "int64"; "consumer_stream" is the cudaStream_t as an
// integer. An unknown key or a value of the wrong type is a UsageError naming the key (a typo must
// not silently train with a default).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "loader/loader.h"

namespace pretrain {

LoaderConfig loader_config_from_json(const nlohmann::json& options);
LoaderConfig loader_config_from_json(const std::string& text);  // throws UsageError if malformed

// Every option with its value (defaults included): what a run used, for logs.
nlohmann::json loader_config_to_json(const LoaderConfig& config);

}  // namespace pretrain
