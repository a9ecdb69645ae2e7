// Exact duplicates (dedup's first stage): two documents are exact duplicates when the xxh3-128 hashes
// of their normalized texts are equal. Normalization, in this order, each step a flag:
//   case folding (off by default; --fold-case): Unicode full case folding (ICU), "Straße" = "STRASSE";
//   NFC (on; --no-nfc): canonical composition, so "é" typed as e + U+0301 equals U+00E9;
//   whitespace folding (on; --no-fold-whitespace): each run of White_Space characters (ICU's
//     property: spaces, tabs, newlines, NBSP, …) becomes one space, none at either end.
// 128 bits because the hash stands for the text: with N documents the chance that two different
// texts share a hash is about N²/2^129 — 1.5·10^-21 at a billion documents — where 64 bits would
// give 2.7% at a billion and 3·10^-6 at ten million, and a collision silently deletes a document.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace pretrain {

struct ExactOptions {
  bool nfc = true;
  bool fold_whitespace = true;
  bool fold_case = false;
};

struct Hash128 {
  uint64_t low = 0, high = 0;
  bool operator==(const Hash128&) const = default;
  auto operator<=>(const Hash128&) const = default;
};

// The normalized text, as the hash sees it.
std::string normalize_for_exact(std::string_view text, const ExactOptions& options);
// xxh3-128 of normalize_for_exact(text) (without the copy when nothing changes it).
Hash128 exact_hash(std::string_view text, const ExactOptions& options);
// xxh3-128 of bytes, as stored (low, high).
Hash128 xxh3_128(std::string_view bytes);

}  // namespace pretrain
