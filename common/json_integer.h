// Integers out of JSON read from files (manifests, checkpoints, tokenizer.json, safetensors
// headers). nlohmann's get<int64_t>() turns a JSON float into an integer with a plain cast:
// undefined behaviour past the type's range (UBSan in from_json.hpp, found by fuzzing a
// safetensors header whose shape held 461168601842738793047) and a silent truncation inside it
// (a shape of 2.5 read as 2). These take a JSON integer that fits T and nothing else, and refuse
// anything else with the type_error nlohmann's own get<T>() throws for a string, so every caller's
// existing `catch (const nlohmann::json::exception&)` names the file as before.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace pretrain {

// `v` as a T (an integer type) when it is a JSON integer T holds; else throws json::type_error.
template <typename T>
T json_integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto s = v.get<int64_t>();
    if (std::in_range<T>(s)) return static_cast<T>(s);
  }
  throw nlohmann::json::type_error::create(
      302, cat("type must be an integer from ", +std::numeric_limits<T>::min(), " to ", +std::numeric_limits<T>::max(), ", but is ",
               v.is_number() ? v.dump() : std::string(v.type_name())),
      nullptr);
}

// An array of them.
template <typename T>
std::vector<T> json_integers(const nlohmann::json& v) {
  if (!v.is_array()) throw nlohmann::json::type_error::create(302, cat("type must be array, but is ", v.type_name()), nullptr);
  std::vector<T> out;
  out.reserve(v.size());
  for (const nlohmann::json& x : v) out.push_back(json_integer<T>(x));
  return out;
}

// An object of them, by key.
template <typename T>
std::map<std::string, T> json_integer_map(const nlohmann::json& v) {
  if (!v.is_object()) throw nlohmann::json::type_error::create(302, cat("type must be object, but is ", v.type_name()), nullptr);
  std::map<std::string, T> out;
  for (const auto& [key, x] : v.items()) out.emplace(key, json_integer<T>(x));
  return out;
}

// object[key] as a T, or `fallback` when there is no such key: json::value(key, fallback) for
// integers (which, like it, refuses an `object` that is not an object).
template <typename T>
T json_integer_or(const nlohmann::json& object, const std::string& key, T fallback) {
  if (!object.is_object())
    throw nlohmann::json::type_error::create(306, cat("cannot use value() with ", object.type_name()), nullptr);
  const auto it = object.find(key);
  return it == object.end() ? fallback : json_integer<T>(*it);
}

}  // namespace pretrain
