// The shingles of a document (dedup's near-duplicate stage): the text simplified as datatrove's
// MinHash pipeline simplifies it (datatrove.utils.text.simplify_text with its default
// TextNormConfig), cut into words at spaces, and every run of n consecutive words hashed.
//
// simplify_for_shingles does, per code point and in datatrove's order:
//   1. lowercase (the full mapping: Rust's to_lowercase, tokenizer/bert_chars.h; Python's
//      str.lower differs only in mapping a word-final capital sigma to ς, we write σ);
//   2. every number, `\p{Nd}+([.,،٫⎖⎗⎘]\p{Nd}+)?`, becomes "0";
//   3. datatrove's PUNCTUATION (ASCII punctuation, C0/C1 controls but tab and newline, and a list
//      of typographic and CJK marks) becomes a space;
//   4. whitespace (Python's str.isspace: category Zs or bidi class WS, B, S) becomes a space;
//   5. what is left is decomposed (NFD) and its nonspacing marks (Mn) are dropped.
// Runs of spaces become one, none at either end: the result is words joined by single spaces.
// datatrove then tokenizes that with spaCy's English tokenizer; we split at the spaces, which is
// the same words but where spaCy also splits a word (English contractions left without their
// apostrophe, "dont" → "do", "nt"; a symbol spaCy treats as a prefix or suffix, "°c"): such words
// stay whole here, which moves the Jaccard similarity of a pair by a few shingles at most.
//
// A shingle is n consecutive words joined by single spaces: a substring of the simplified text,
// hashed with xxh3-64 (seed 0) where it lies. Python: xxhash.xxh3_64_intdigest(" ".join(words[i:i+n])).
// A document of fewer than n words has no shingles (datatrove skips it too; only the exact stage
// can remove it).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

// Writes the simplified text of `text` (UTF-8; invalid bytes count as U+FFFD) into out.
void simplify_for_shingles(std::string_view text, std::string& out);

// The hashes of the n-word shingles of simplified text (as simplify_for_shingles writes it), in
// text order, repeats included. Empty when it has fewer than n words.
void shingle_hashes(std::string_view simplified, int n, std::vector<uint64_t>& out);

}  // namespace pretrain
