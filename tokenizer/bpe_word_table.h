// A hash table from a word (bytes) to its token ids, with keys and ids kept in two flat arenas:
// a lookup hashes the word once and allocates nothing. Used twice by the BPE tokenizer:
//   - read-only, shared: the vocabulary entries that BPE turns into themselves (" the" → 262),
//     checked at load, so most words of real text never reach the merge loop (tiktoken's trick,
//     made exact by the check);
//   - per thread: a bounded cache of the other words seen, cleared when it reaches its size.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pretrain {

// A fast 64-bit hash of short strings (8 bytes per step, multiply-xorshift mixing); quality is
// enough for open addressing, which is all it is for.
inline uint64_t word_hash(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94d049bb133111ebull;
  }
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  return h ^ (h >> 29);
}

class WordTable {
 public:
  // max_words: the table clears itself when an insert would go past it (0: never holds anything).
  explicit WordTable(size_t max_words) : max_words_(max_words) {}

  // Appends the ids stored for word to out; false when absent.
  bool find(std::string_view word, uint64_t hash, std::vector<TokenId>& out) const {
    if (slots_.empty()) return false;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return false;
      if (s.hash == hash && s.key_len == word.size() && std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }

  // Stores word → ids (word non-empty, not present yet).
  void insert(std::string_view word, uint64_t hash, const TokenId* ids, size_t n) {
    if (max_words_ == 0 || word.empty()) return;
    if (count_ >= max_words_) clear();
    if ((count_ + 1) * 2 > slots_.size()) grow();
    size_t i = hash & mask_;
    while (slots_[i].key_len != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
                     static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)};
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + n);
    ++count_;
  }

  size_t size() const { return count_; }

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0;  // key_len 0: free (words are never empty)
    uint32_t ids_off = 0, ids_len = 0;
  };

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key_len == 0) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].key_len != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  size_t max_words_;
  size_t count_ = 0;
  size_t mask_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<TokenId> ids_;
};

}  // namespace pretrain
