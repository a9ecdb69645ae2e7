// Reading tokenizer.json: the model, the normalizer, the pre-tokenizer and the added tokens, each
// field checked for its JSON type here so that the models only judge values.
#include "tokenizer/tokenizer_json.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/json_integer.h"

namespace pretrain {
namespace {

// The JSON type that holds a T, and its name for messages.
template <typename T>
bool holds(const nlohmann::json& value) {
  if constexpr (std::is_same_v<T, std::string>) return value.is_string();
  else if constexpr (std::is_same_v<T, bool>) return value.is_boolean();
  else if constexpr (std::is_same_v<T, int64_t>) return value.is_number_integer();
  else return value.is_number();
}
template <typename T>
constexpr const char* json_type_name() {
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_same_v<T, int64_t>) return "an integer";
  else return "a number";
}

// An optional field of `object` (`parent` names it in messages): absent and null are nullopt;
// another JSON type than T's is an Error.
template <typename T>
std::optional<T> optional_field(const nlohmann::json& object, const char* key, const char* parent, const Where& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!holds<T>(*it))
    throw Error(where, cat(parent, ".", key, ": expected ", json_type_name<T>(), ", found ", it->dump()));
  return it->template get<T>();
}

std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& merges, const std::string& source) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Where where = Where::at_record(source, static_cast<int64_t>(i));
    const nlohmann::json& m = merges[i];
    if (m.is_string()) {  // "left right" (tokenizers < 0.20)
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw Error(where, cat("merges[", i, "]: expected \"left right\", found \"", s, "\""));
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["left", "right"]
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw Error(where, cat("merges[", i, "]: expected \"left right\" or [\"left\", \"right\"], found ", m.dump()));
    }
  }
  return out;
}

std::optional<TokenizerJson::Normalizer> read_normalizer(const nlohmann::json& j, const Where& where) {
  auto it = j.find("normalizer");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw Error(where, cat("normalizer: expected an object or null, found ", it->dump()));
  TokenizerJson::Normalizer n;
  n.type = optional_field<std::string>(*it, "type", "normalizer", where).value_or("");
  n.clean_text = optional_field<bool>(*it, "clean_text", "normalizer", where).value_or(true);
  n.handle_chinese_chars = optional_field<bool>(*it, "handle_chinese_chars", "normalizer", where).value_or(true);
  n.lowercase = optional_field<bool>(*it, "lowercase", "normalizer", where).value_or(true);
  n.strip_accents = optional_field<bool>(*it, "strip_accents", "normalizer", where);
  return n;
}

std::optional<TokenizerJson::PreTokenizer> read_pre_tokenizer(const nlohmann::json& j, const Where& where) {
  auto it = j.find("pre_tokenizer");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw Error(where, cat("pre_tokenizer: expected an object or null, found ", it->dump()));
  const nlohmann::json* pre = &*it;
  // A Sequence of one step splits as that step does (tokenizers writes GPT-2's ByteLevel so).
  if (optional_field<std::string>(*pre, "type", "pre_tokenizer", where) == "Sequence") {
    auto steps = pre->find("pretokenizers");
    if (steps != pre->end() && steps->is_array() && steps->size() == 1 && (*steps)[0].is_object()) pre = &(*steps)[0];
  }
  TokenizerJson::PreTokenizer p;
  p.type = optional_field<std::string>(*pre, "type", "pre_tokenizer", where).value_or("");
  p.add_prefix_space = optional_field<bool>(*pre, "add_prefix_space", "pre_tokenizer", where).value_or(false);
  p.use_regex = optional_field<bool>(*pre, "use_regex", "pre_tokenizer", where).value_or(true);
  return p;
}

TokenizerJson read_parts(const nlohmann::json& j, const std::string& source) {
  const Where where{source};
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    throw Error(where, "expected an HF tokenizer.json (an object with a \"model\" object)");
  const nlohmann::json& model = j["model"];
  TokenizerJson out;
  out.source = source;
  out.model_type = optional_field<std::string>(model, "type", "model", where).value_or("");
  if (out.model_type != "WordPiece" && out.model_type != "BPE")
    throw Error(where, cat("expected a WordPiece or BPE model in tokenizer.json, found \"", out.model_type, "\""));

  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw Error(where, "model.vocab must be an object of token → id");
  out.vocab = read_vocab_object(model["vocab"], where);
  if (out.model_type == "BPE") {
    if (!model.contains("merges") || !model["merges"].is_array()) throw Error(where, "model.merges must be an array");
    out.merges = read_merges(model["merges"], source);
  }
  out.unk_token = optional_field<std::string>(model, "unk_token", "model", where);
  out.continuing_subword_prefix = optional_field<std::string>(model, "continuing_subword_prefix", "model", where);
  out.end_of_word_suffix = optional_field<std::string>(model, "end_of_word_suffix", "model", where);
  if (auto max_chars = optional_field<int64_t>(model, "max_input_chars_per_word", "model", where)) {
    if (*max_chars < 0 || *max_chars > INT32_MAX)
      throw Error(where, cat("model.max_input_chars_per_word: ", *max_chars, " is out of range"));
    out.max_input_chars_per_word = static_cast<int>(*max_chars);
  }
  out.dropout = optional_field<double>(model, "dropout", "model", where).value_or(0);
  out.ignore_merges = optional_field<bool>(model, "ignore_merges", "model", where).value_or(false);

  out.normalizer = read_normalizer(j, where);
  out.pre_tokenizer = read_pre_tokenizer(j, where);
  if (j.contains("added_tokens") && !j["added_tokens"].is_null())
    out.added_tokens = read_added_tokens(j["added_tokens"], source);
  return out;
}

}  // namespace

std::vector<std::pair<std::string, TokenId>> read_vocab_object(const nlohmann::json& object, const Where& where) {
  if (!object.is_object()) throw Error(where, cat("expected a JSON object of token → id, found ", object.type_name()));
  std::vector<std::pair<std::string, TokenId>> vocab;
  vocab.reserve(object.size());
  for (const auto& [token, value] : object.items()) {
    if (!value.is_number_integer())
      throw Error(where, cat("the id of token \"", token, "\" is not an integer: ", value.dump()));
    const auto id = json_integer<int64_t>(value);
    if (id < 0 || id >= kMaxTokenId) throw Error(where, cat("the id of token \"", token, "\" is out of range: ", id));
    vocab.emplace_back(token, static_cast<TokenId>(id));
  }
  return vocab;
}

namespace {

// SAX events of a flat {"token": id, …} object into (token, id) pairs in file order; anything
// else stops the parse (the caller falls back to the document).
class FlatVocabSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::pair<std::string, TokenId>> entries;

  bool start_object(std::size_t) override { return depth_++ == 0; }
  bool end_object() override { return --depth_ == 0; }
  bool key(string_t& token) override {
    key_ = std::move(token);
    return true;
  }
  bool number_integer(number_integer_t id) override { return add(id >= 0 ? uint64_t(id) : UINT64_MAX); }
  bool number_unsigned(number_unsigned_t id) override { return add(id); }
  bool null() override { return false; }
  bool boolean(bool) override { return false; }
  bool number_float(number_float_t, const string_t&) override { return false; }
  bool string(string_t&) override { return false; }
  bool binary(binary_t&) override { return false; }
  bool start_array(std::size_t) override { return false; }
  bool end_array() override { return false; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool add(uint64_t id) {
    if (depth_ != 1 || id >= uint64_t(kMaxTokenId)) return false;
    entries.emplace_back(std::move(key_), TokenId(id));
    return true;
  }
  int depth_ = 0;
  std::string key_;
};

}  // namespace

std::optional<std::vector<std::pair<std::string, TokenId>>> read_flat_vocab_json(std::string_view text) {
  FlatVocabSax sax;
  if (!nlohmann::json::sax_parse(text, &sax)) return std::nullopt;
  // A repeated key (the document keeps its last value) or id (an error that names two tokens in
  // key order): left to the document. Otherwise its entries are these, sorted by key; in file
  // order they build the same vocabulary, and sorting them cost as much as the parse.
  std::vector<uint8_t> id_seen;
  std::unordered_set<std::string_view> keys;
  keys.reserve(sax.entries.size());
  for (const auto& [token, id] : sax.entries) {
    if (size_t(id) >= id_seen.size()) id_seen.resize(std::max(size_t(id) + 1, 2 * id_seen.size()));
    if (id_seen[size_t(id)]++ || !keys.insert(token).second) return std::nullopt;
  }
  return std::move(sax.entries);
}

TokenizerJson parse_tokenizer_json(const nlohmann::json& j, const std::string& source) {
  try {
    return read_parts(j, source);
  } catch (const nlohmann::json::exception& e) {  // e.g. dump() of a string that is not UTF-8 (JSON built in code)
    throw Error(Where{source}, cat("malformed tokenizer.json: ", e.what()));
  }
}

TokenizerJson read_tokenizer_json(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(Where::at_offset(path, static_cast<int64_t>(e.byte)), cat("not valid JSON: ", e.what()));
  }
  return parse_tokenizer_json(j, path);
}

}  // namespace pretrain
