#include "common/json_integer.h"
#include "common/manifest.h"

#include <type_traits>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

using nlohmann::json;

namespace {

json tokenizer_to_json(const TokenizerInfo& t) {
  json tok;
  tok["kind"] = t.kind;
  tok["vocab_hash"] = t.vocab_hash;
  tok["vocab_size"] = t.vocab_size;
  tok["special_ids"] = t.special_ids;
  if (!t.has_record()) return tok;
  json files = json::array();
  for (const TokenizerFile& f : t.files)
    files.push_back({{"role", f.role}, {"path", f.path}, {"bytes", f.bytes}, {"xxh3", f.xxh3}});
  tok["files"] = files;
  tok["options"] = t.options;
  tok["casing"] = {{"lowercase", t.casing.lowercase},
                   {"strip_accents", t.casing.strip_accents ? json(*t.casing.strip_accents) : json(nullptr)}};
  json specials = json::object();
  for (const auto& [role, s] : t.special_tokens) specials[role] = {{"id", s.id}, {"token", s.token}};
  tok["special_tokens"] = specials;
  return tok;
}

// obj[name] as a T, or an Error naming where.name and what it found.
template <typename T>
T record_field(const json& obj, const char* name, const std::string& where) {
  if (!obj.is_object() || !obj.contains(name)) throw Error(cat("expected field '", name, "' in ", where));
  const json& v = obj.at(name);
  try {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return json_integer<T>(v);
    else return v.get<T>();
  } catch (const json::exception& e) {
    throw Error(cat(where, ".", name, ": ", e.what()));
  }
}

// The record's fields of the manifest's "tokenizer" object t (which has "files") into info.
// Throws Error saying what is wrong.
void read_tokenizer_record(const json& t, TokenizerInfo& info) {
  const json& files = t.at("files");
  if (!files.is_array() || files.empty()) throw Error("expected tokenizer.files to be a list of at least one file");
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string where = cat("tokenizer.files[", i, "]");
    TokenizerFile f{record_field<std::string>(files[i], "role", where), record_field<std::string>(files[i], "path", where),
                    record_field<uint64_t>(files[i], "bytes", where), record_field<std::string>(files[i], "xxh3", where)};
    if (f.path.empty()) throw Error(cat("expected a path in ", where));
    info.files.push_back(std::move(f));
  }
  info.options = record_field<json>(t, "options", "tokenizer");
  if (!info.options.is_object()) throw Error("expected tokenizer.options to be an object");
  const json casing = record_field<json>(t, "casing", "tokenizer");
  info.casing.lowercase = record_field<bool>(casing, "lowercase", "tokenizer.casing");
  if (!record_field<json>(casing, "strip_accents", "tokenizer.casing").is_null())
    info.casing.strip_accents = record_field<bool>(casing, "strip_accents", "tokenizer.casing");
  const json specials = record_field<json>(t, "special_tokens", "tokenizer");
  if (!specials.is_object()) throw Error("expected tokenizer.special_tokens to be an object");
  for (const auto& [role, s] : specials.items()) {
    const std::string where = cat("tokenizer.special_tokens.", role);
    info.special_tokens[role] = {record_field<int64_t>(s, "id", where), record_field<std::string>(s, "token", where)};
  }
}

}  // namespace

json Manifest::to_json() const {
  json j;
  j["format"] = format;
  j["version"] = version;
  j["tokenizer"] = tokenizer_to_json(tokenizer);
  j["seq_len"] = seq_len;
  j["max_predictions"] = max_predictions;
  j["created_by"] = {{"tool", tool}, {"args", args}};
  j["created_by"]["seed"] = seed ? json(*seed) : json(nullptr);
  j["complete"] = complete;
  j["stats"] = stats;
  j["extra"] = extra;
  json shard_list = json::array();
  for (const ShardEntry& s : shards) {
    json e = {{"file", s.file}, {"records", s.records}, {"bytes", s.bytes}, {"xxh3", s.xxh3}};
    if (!s.companions.empty()) e["companions"] = s.companions;
    shard_list.push_back(e);
  }
  j["shards"] = shard_list;
  return j;
}

Manifest Manifest::from_json(const json& j, const std::string& source) {
  // Every field access names the field when it fails.
  auto field = [&](const json& obj, const char* name, const char* where) -> const json& {
    if (!obj.is_object() || !obj.contains(name))
      throw Error(Where{source}, cat("expected field '", name, "' in ", where));
    return obj.at(name);
  };
  Manifest m;
  try {
    m.format = field(j, "format", "the manifest").get<std::string>();
    m.version = json_integer<int>(field(j, "version", "the manifest"));
    if (m.version != kManifestVersion)
      throw Error(Where{source}, cat("expected manifest version ", kManifestVersion, ", found ", m.version));
    if (j.contains("tokenizer")) {
      const json& t = j["tokenizer"];
      m.tokenizer.kind = t.value("kind", "");
      m.tokenizer.vocab_hash = t.value("vocab_hash", "");
      m.tokenizer.vocab_size = json_integer_or<int64_t>(t, "vocab_size", 0);
      if (t.contains("special_ids")) m.tokenizer.special_ids = json_integer_map<int64_t>(t["special_ids"]);
      if (t.contains("files")) {
        TokenizerInfo record;
        try {
          read_tokenizer_record(t, record);
          m.tokenizer.files = std::move(record.files);
          m.tokenizer.options = std::move(record.options);
          m.tokenizer.casing = record.casing;
          m.tokenizer.special_tokens = std::move(record.special_tokens);
        } catch (const Error& e) {
          m.tokenizer.record_error = e.what();
        } catch (const json::exception& e) {
          m.tokenizer.record_error = e.what();
        }
      }
    }
    m.seq_len = json_integer_or<int64_t>(j, "seq_len", 0);
    m.max_predictions = json_integer_or<int64_t>(j, "max_predictions", 0);
    if (j.contains("created_by")) {
      const json& c = j["created_by"];
      m.tool = c.value("tool", "");
      if (c.contains("args")) m.args = c["args"].get<std::vector<std::string>>();
      if (c.contains("seed") && !c["seed"].is_null()) m.seed = json_integer<uint64_t>(c["seed"]);
    }
    m.complete = j.value("complete", true);
    if (j.contains("stats")) m.stats = j["stats"];
    if (j.contains("extra")) m.extra = j["extra"];
    const json& list = field(j, "shards", "the manifest");
    if (!list.is_array()) throw Error(Where{source}, "expected 'shards' to be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      const json& e = list[i];
      ShardEntry s;
      std::string where = cat("shards[", i, "]");
      s.file = field(e, "file", where.c_str()).get<std::string>();
      s.records = json_integer<uint64_t>(field(e, "records", where.c_str()));
      s.bytes = json_integer<uint64_t>(field(e, "bytes", where.c_str()));
      s.xxh3 = field(e, "xxh3", where.c_str()).get<std::string>();
      if (e.contains("companions")) s.companions = e["companions"].get<std::map<std::string, std::string>>();
      if (s.file.empty() || s.file.find("..") != std::string::npos || s.file[0] == '/')
        throw Error(Where{source}, cat("expected a plain file name in ", where, ", found '", s.file, "'"));
      m.shards.push_back(std::move(s));
    }
  } catch (const json::exception& e) {
    throw Error(Where{source}, cat("malformed manifest: ", e.what()));
  }
  return m;
}

Manifest Manifest::read(const std::string& path) {
  std::string text = read_file(path);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(Where{path}, "expected a JSON manifest, found text that does not parse");
  return from_json(j, path);
}

void Manifest::write(const std::string& path) const { write_file_atomic(path, to_json().dump(2) + "\n"); }

uint64_t Manifest::total_records() const {
  uint64_t n = 0;
  for (const ShardEntry& s : shards) n += s.records;
  return n;
}

json ManifestBin::to_json() const {
  return {{"dir", dir}, {"bin", bin}, {"max_length", max_length}, {"records", records}, {"shards", shards}};
}

std::string ManifestBin::mismatch(const Manifest& m) const {
  if (m.total_records() == records && m.seq_len == max_length) return {};
  return cat("holds ", m.total_records(), " records of length ", m.seq_len, ", but the split's manifest lists ",
             records, " of length ", max_length);
}

std::vector<ManifestBin> manifest_bins(const Manifest& split, const std::string& source) {
  std::vector<ManifestBin> bins;
  if (!split.extra.contains("bins")) return bins;
  try {
    for (const json& b : split.extra.at("bins"))
      bins.push_back({b.at("dir").get<std::string>(), json_integer<int>(b.at("bin")), json_integer<int64_t>(b.at("max_length")),
                      json_integer<uint64_t>(b.at("records")), json_integer<uint64_t>(b.at("shards"))});
  } catch (const json::exception& e) {
    throw Error(Where{source}, cat("expected extra.bins, a list of {dir, bin, max_length, records, shards}: ", e.what()));
  }
  return bins;
}

ShardEntry Manifest::describe(const std::string& dir, const std::string& file, uint64_t records) {
  std::string path = path_join(dir, file);
  return ShardEntry{file, records, file_size(path), hex64(xxh3_file(path)), {}};
}

std::vector<VerifyProblem> verify_manifest(const Manifest& m, const std::string& dir,
                                           const std::function<uint64_t(const std::string&)>& count_records) {
  std::vector<VerifyProblem> problems;
  if (!m.complete) problems.push_back({kManifestName, "the run that wrote this manifest did not finish (complete=false)"});
  for (const ShardEntry& s : m.shards) {
    std::string path = path_join(dir, s.file);
    if (!file_exists(path)) {
      problems.push_back({s.file, "missing"});
      continue;
    }
    uint64_t size = file_size(path);
    if (size != s.bytes) {
      problems.push_back({s.file, cat("expected ", s.bytes, " bytes, found ", size)});
      continue;
    }
    std::string sum = hex64(xxh3_file(path));
    if (sum != s.xxh3) {
      problems.push_back({s.file, cat("expected xxh3 ", s.xxh3, ", found ", sum)});
      continue;
    }
    bool companions_ok = true;
    for (const auto& [name, want] : s.companions) {
      std::string cpath = path_join(dir, name);
      if (!file_exists(cpath)) {
        problems.push_back({name, "missing"});
        companions_ok = false;
      } else if (std::string got = hex64(xxh3_file(cpath)); got != want) {
        problems.push_back({name, cat("expected xxh3 ", want, ", found ", got)});
        companions_ok = false;
      }
    }
    if (count_records && companions_ok) {
      try {
        uint64_t n = count_records(path);
        if (n != s.records) problems.push_back({s.file, cat("expected ", s.records, " records, found ", n)});
      } catch (const std::exception& e) {
        problems.push_back({s.file, e.what()});
      }
    }
  }
  return problems;
}

}  // namespace pretrain
