// Shared between the wikitext cleaner's files; not part of its interface.
#pragma once
#include <string_view>
#include <vector>

namespace pretrain {

// ASCII classes of wikitext's syntax (names, entities, tags), whatever the locale.
inline bool is_ascii_alpha(char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
inline bool is_ascii_alnum(char c) { return is_ascii_alpha(c) || (c >= '0' && c <= '9'); }
inline bool is_hex(char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

// Built-in File and Category namespace names, lowercase where the script has case.
const std::vector<std::string_view>& builtin_dropped_namespaces();

}  // namespace pretrain
