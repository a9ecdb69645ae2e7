#include "loader/config_json.h"

#include <cstdint>
#include <functional>
#include <map>

#include "common/error.h"

namespace pretrain {
namespace {

using json = nlohmann::json;

const char* type_name(const json& v) { return v.type_name(); }

[[noreturn]] void bad_type(const std::string& key, const char* expected, const json& v) {
  throw UsageError(cat("loader option '", key, "': expected ", expected, ", found ", type_name(v),
                       " ", v.dump()));
}

int64_t get_int(const std::string& key, const json& v) {
  if (!v.is_number_integer()) bad_type(key, "an integer", v);
  return v.get<int64_t>();
}

// uint64 options (seed, epochs) take any non-negative integer, including ones above INT64_MAX.
uint64_t get_uint(const std::string& key, const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (!v.is_number_integer() || v.get<int64_t>() < 0) bad_type(key, "a non-negative integer", v);
  return uint64_t(v.get<int64_t>());
}

int get_small_int(const std::string& key, const json& v) {
  int64_t x = get_int(key, v);
  if (x < INT32_MIN || x > INT32_MAX) bad_type(key, "a 32-bit integer", v);
  return int(x);
}

double get_double(const std::string& key, const json& v) {
  if (!v.is_number()) bad_type(key, "a number", v);
  return v.get<double>();
}

bool get_bool(const std::string& key, const json& v) {
  if (!v.is_boolean()) bad_type(key, "true or false", v);
  return v.get<bool>();
}

std::string get_string(const std::string& key, const json& v) {
  if (!v.is_string()) bad_type(key, "a string", v);
  return v.get<std::string>();
}

std::vector<std::string> get_strings(const std::string& key, const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) bad_type(key, "a string or a list of strings", v);
  std::vector<std::string> out;
  for (const json& e : v) out.push_back(get_string(key, e));
  return out;
}

template <typename T, typename Get>
std::vector<T> get_list(const std::string& key, const json& v, Get get) {
  if (!v.is_array()) bad_type(key, "a list", v);
  std::vector<T> out;
  for (const json& e : v) out.push_back(get(key, e));
  return out;
}

using Setter = std::function<void(LoaderConfig&, const std::string&, const json&)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"sources", [](LoaderConfig& c, const std::string& k, const json& v) { c.sources = get_strings(k, v); }},
      {"weights", [](LoaderConfig& c, const std::string& k, const json& v) {
         c.weights = get_list<double>(k, v, get_double);
       }},
      {"kind", [](LoaderConfig& c, const std::string& k, const json& v) {
         c.kind = parse_model_kind(get_string(k, v), "loader option 'kind'");
       }},
      {"batch_size", [](LoaderConfig& c, const std::string& k, const json& v) { c.batch_size = get_int(k, v); }},
      {"seq_len", [](LoaderConfig& c, const std::string& k, const json& v) { c.seq_len = get_int(k, v); }},
      {"rank", [](LoaderConfig& c, const std::string& k, const json& v) { c.rank = get_small_int(k, v); }},
      {"world_size", [](LoaderConfig& c, const std::string& k, const json& v) { c.world_size = get_small_int(k, v); }},
      {"seed", [](LoaderConfig& c, const std::string& k, const json& v) { c.seed = get_uint(k, v); }},
      {"shuffle", [](LoaderConfig& c, const std::string& k, const json& v) { c.shuffle = get_bool(k, v); }},
      {"drop_last", [](LoaderConfig& c, const std::string& k, const json& v) { c.drop_last = get_bool(k, v); }},
      {"epochs", [](LoaderConfig& c, const std::string& k, const json& v) { c.epochs = get_uint(k, v); }},
      {"workers", [](LoaderConfig& c, const std::string& k, const json& v) { c.workers = get_small_int(k, v); }},
      {"prefetch", [](LoaderConfig& c, const std::string& k, const json& v) { c.prefetch = get_small_int(k, v); }},
      {"device", [](LoaderConfig& c, const std::string& k, const json& v) { c.device = get_string(k, v); }},
      {"pin_memory", [](LoaderConfig& c, const std::string& k, const json& v) { c.pin_memory = get_bool(k, v); }},
      {"narrow_tokens", [](LoaderConfig& c, const std::string& k, const json& v) { c.narrow_tokens = get_bool(k, v); }},
      {"id_dtype", [](LoaderConfig& c, const std::string& k, const json& v) {
         std::string s = get_string(k, v);
         if (s == "int32") c.id_dtype = TensorDType::i32;
         else if (s == "int64") c.id_dtype = TensorDType::i64;
         else throw UsageError(cat("loader option 'id_dtype': expected \"int32\" or \"int64\", found \"", s, "\""));
       }},
      {"shuffle_window", [](LoaderConfig& c, const std::string& k, const json& v) { c.shuffle_window = get_int(k, v); }},
      {"bin_batches", [](LoaderConfig& c, const std::string& k, const json& v) { c.bin_batches = get_int(k, v); }},
      {"add_extra_token", [](LoaderConfig& c, const std::string& k, const json& v) { c.add_extra_token = get_bool(k, v); }},
      {"samples_per_epoch", [](LoaderConfig& c, const std::string& k, const json& v) { c.samples_per_epoch = get_int(k, v); }},
      {"verify_checksums", [](LoaderConfig& c, const std::string& k, const json& v) { c.verify_checksums = get_bool(k, v); }},
      {"dynamic_masking", [](LoaderConfig& c, const std::string& k, const json& v) { c.masking.enabled = get_bool(k, v); }},
      {"mask_probability", [](LoaderConfig& c, const std::string& k, const json& v) { c.masking.probability = get_double(k, v); }},
      {"max_predictions", [](LoaderConfig& c, const std::string& k, const json& v) { c.masking.max_predictions = get_int(k, v); }},
      {"mask_id", [](LoaderConfig& c, const std::string& k, const json& v) { c.masking.mask_id = get_int(k, v); }},
      {"vocab_size", [](LoaderConfig& c, const std::string& k, const json& v) { c.masking.vocab_size = get_int(k, v); }},
      {"special_ids", [](LoaderConfig& c, const std::string& k, const json& v) {
         c.masking.special_ids = get_list<int64_t>(k, v, get_int);
       }},
      {"consumer_stream", [](LoaderConfig& c, const std::string& k, const json& v) {
         c.consumer_stream = reinterpret_cast<void*>(uintptr_t(get_uint(k, v)));
       }},
  };
  return table;
}

}  // namespace

LoaderConfig loader_config_from_json(const json& options) {
  if (!options.is_object()) throw UsageError(cat("loader options: expected a JSON object, found ", options.dump()));
  LoaderConfig config;
  const auto& table = setters();
  for (const auto& [key, value] : options.items()) {
    auto it = table.find(key);
    if (it == table.end()) {
      std::string known;
      for (const auto& [name, setter] : table) known += (known.empty() ? "" : ", ") + name;
      throw UsageError(cat("unknown loader option '", key, "' (options: ", known, ")"));
    }
    if (value.is_null()) continue;  // null: keep the default (Python's None)
    it->second(config, key, value);
  }
  return config;
}

LoaderConfig loader_config_from_json(const std::string& text) {
  json options;
  try {
    options = json::parse(text);
  } catch (const json::parse_error& e) {
    throw UsageError(cat("loader options are not valid JSON: ", e.what()));
  }
  return loader_config_from_json(options);
}

json loader_config_to_json(const LoaderConfig& c) {
  return json{
      {"sources", c.sources},
      {"weights", c.weights},
      {"kind", model_kind_name(c.kind)},
      {"batch_size", c.batch_size},
      {"seq_len", c.seq_len},
      {"rank", c.rank},
      {"world_size", c.world_size},
      {"seed", c.seed},
      {"shuffle", c.shuffle},
      {"drop_last", c.drop_last},
      {"epochs", c.epochs},
      {"workers", c.workers},
      {"prefetch", c.prefetch},
      {"device", c.device},
      {"pin_memory", c.pin_memory},
      {"narrow_tokens", c.narrow_tokens},
      {"id_dtype", dtype_name(c.id_dtype)},
      {"shuffle_window", c.shuffle_window},
      {"bin_batches", c.bin_batches},
      {"add_extra_token", c.add_extra_token},
      {"samples_per_epoch", c.samples_per_epoch},
      {"verify_checksums", c.verify_checksums},
      {"dynamic_masking", c.masking.enabled},
      {"mask_probability", c.masking.probability},
      {"max_predictions", c.masking.max_predictions},
      {"mask_id", c.masking.mask_id},
      {"vocab_size", c.masking.vocab_size},
      {"special_ids", c.masking.special_ids},
      {"consumer_stream", uint64_t(reinterpret_cast<uintptr_t>(c.consumer_stream))},
  };
}

}  // namespace pretrain
