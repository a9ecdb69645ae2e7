// Shared between the wikitext cleaner's files; not part of its interface.
#pragma once
#include <string_view>
#include <vector>

namespace pretrain {

// Built-in File and Category namespace names, lowercase where the script has case.
const std::vector<std::string_view>& builtin_dropped_namespaces();

}  // namespace pretrain
