// Reading added_tokens, checking their flags against what a model takes, and single_word.
#include "tokenizer/added_vocabulary.h"

#include <unicode/uchar.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_integer.h"
#include "common/utf8.h"

namespace pretrain {
namespace {

// An optional boolean field of an added token: absent is false.
bool read_flag(const nlohmann::json& entry, const char* key, const Where& where, size_t i) {
  auto it = entry.find(key);
  if (it == entry.end()) return false;
  if (!it->is_boolean())
    throw Error(where, cat("added_tokens[", i, "].", key, ": expected true or false, found ", it->dump()));
  return it->get<bool>();
}

// single_word's word character: a letter, digit or '_' (code points, not bytes). HF tests Rust
// regex's \w, which also counts combining marks and connector punctuation, so a single_word token
// touching one of those (U+302C, U+203F) is kept whole here and not by HF. Changing it would
// change ids; it is left for its own change.
bool is_word_char(std::string_view text, size_t i) {
  auto step = decode_utf8(reinterpret_cast<const uint8_t*>(text.data()) + i,
                          reinterpret_cast<const uint8_t*>(text.data()) + text.size());
  return u_isalnum(static_cast<UChar32>(step.code_point)) || step.code_point == '_';
}

bool is_word_char_before(std::string_view text, size_t i) {
  if (i == 0) return false;
  size_t k = i - 1;
  while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;  // back to the character's lead byte
  return is_word_char(text, k);
}

bool is_word_char_at(std::string_view text, size_t i) { return i < text.size() && is_word_char(text, i); }

}  // namespace

std::vector<AddedToken> read_added_tokens(const nlohmann::json& added_tokens, const std::string& source) {
  if (!added_tokens.is_array())
    throw Error(Where{source}, cat("added_tokens: expected an array, found ", added_tokens.type_name()));
  std::vector<AddedToken> tokens;
  tokens.reserve(added_tokens.size());
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const nlohmann::json& a = added_tokens[i];
    const Where where = Where::at_record(source, static_cast<int64_t>(i));
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get_ref<const std::string&>().empty())
      throw Error(where, cat("added_tokens[", i, "]: expected {\"id\": int, \"content\": non-empty string, ...}, found ",
                             a.dump()));
    const int64_t id = json_integer<int64_t>(a["id"]);
    if (id < 0 || id >= kMaxTokenId) throw Error(where, cat("added_tokens[", i, "]: id ", id, " out of range"));
    AddedToken token;
    token.content = a["content"].get<std::string>();
    repair_utf8(token.content);
    token.id = static_cast<TokenId>(id);
    token.special = read_flag(a, "special", where, i);
    token.single_word = read_flag(a, "single_word", where, i);
    token.lstrip = read_flag(a, "lstrip", where, i);
    token.rstrip = read_flag(a, "rstrip", where, i);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, AddedTokenFlags flags, const std::string& source)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    const Where where = Where::at_record(source, static_cast<int64_t>(i));
    if (t.single_word && !flags.single_word)
      throw Error(where, cat("added_tokens[", i, "] \"", t.content, "\": single_word is not supported here"));
    if ((t.lstrip || t.rstrip) && !flags.ignore_strip)
      throw Error(where, cat("added_tokens[", i, "] \"", t.content, "\": lstrip and rstrip are not supported here"));
  }
}

const AddedToken* AddedVocabulary::find(std::string_view content) const {
  for (const AddedToken& t : tokens_)
    if (t.content == content) return &t;
  return nullptr;
}

size_t AddedVocabulary::next_match(std::string_view text, size_t k, size_t from) const {
  const AddedToken& t = tokens_[k];
  if (t.content.empty()) return std::string_view::npos;  // matches nothing (and would never advance)
  for (size_t at = text.find(t.content, from); at != std::string_view::npos; at = text.find(t.content, at + 1))
    if (!t.single_word || !(is_word_char_before(text, at) || is_word_char_at(text, at + t.content.size()))) return at;
  return std::string_view::npos;
}

}  // namespace pretrain
