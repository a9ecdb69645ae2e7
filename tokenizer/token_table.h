// The vocabulary lookup of the WordPiece and byte-level BPE tokenizers: token text → id in a flat
// table whose slots hold a key's first 16 bytes, so that a lookup allocates nothing and rarely
// touches the token strings (a node-based std::unordered_map costs a pointer chase or two per
// lookup; BPE's loader looks up three spellings per merge, 150 k lookups for GPT-2).
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pretrain {

// string_view → id, open addressing with linear probing at load <= 1/2, in front of it a bit filter
// of the keys' hashes: most lookups of WordPiece's greedy longest-match search miss, and the filter
// (which stays in cache) answers ~97% of those without touching the table. The filter has 64 bits
// per slot up to 128 KiB, the size every real vocabulary (more than ~4 k keys) gets, so a small
// table (a test's, a fuzz input's) does not zero-fill 128 KiB it never uses. Keys
// longer than 16 bytes are compared against tokens[id] from key_offset on (the "##" that
// WordPiece's continuation table leaves out). The table keeps a span of the tokens: they must not
// change while it is used (moving their vector keeps its elements in place).
class TokenTable {
  // A key's first 16 bytes, zero-padded, and its hash. Nearly every token is at most 16 bytes, so a
  // lookup compares two words held in the slot and never touches the token's string.
  struct Key {
    uint64_t a = 0, b = 0, hash;
    explicit Key(std::string_view k) {
      const size_t n = k.size();
      if (n > 0) std::memcpy(&a, k.data(), std::min<size_t>(n, 8));  // an empty view may hold nullptr
      if (n > 8) std::memcpy(&b, k.data() + 8, std::min<size_t>(n - 8, 8));
      uint64_t h = (a ^ (n * 0x9E3779B97F4A7C15ull)) * 0xFF51AFD7ED558CCDull;
      h = (h ^ (h >> 29) ^ b) * 0xC4CEB9FE1A85EC53ull;
      for (size_t i = 16; i < n; i += 8) {  // the rest, for long keys
        uint64_t v = 0;
        std::memcpy(&v, k.data() + i, std::min<size_t>(n - i, 8));
        h = (h ^ (h >> 29) ^ v) * 0xFF51AFD7ED558CCDull;
      }
      hash = h ^ (h >> 32);
    }
  };

 public:
  TokenTable(std::span<const std::string> tokens, size_t key_offset)
      : tokens_(tokens), key_offset_(key_offset), filter_(1) {}

  // key → id; a key inserted again takes the later id.
  void insert(std::string_view key, TokenId id) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    Key k(key);
    Slot& s = probe(k, key);
    if (s.id < 0) ++count_;
    s = {k.hash, k.a, k.b, id, static_cast<uint32_t>(key.size())};
    set_filter_bit(k.hash);
  }
  // The key's id, -1 when absent.
  TokenId find(std::string_view key) const {
    Key k(key);
    const uint64_t bit = k.hash >> filter_shift_;
    if (!(filter_[bit / 64] >> (bit % 64) & 1)) return -1;
    for (size_t i = k.hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (matches(s, k, key)) return s.id;
    }
  }

 private:
  static constexpr unsigned kMaxFilterLog2 = 20;  // 2^20 bits, indexed by the hash's top 20 bits
  struct Slot {
    uint64_t hash = 0, a = 0, b = 0;
    TokenId id = -1;
    uint32_t size = 0;
  };
  bool matches(const Slot& s, const Key& k, std::string_view key) const {
    return s.hash == k.hash && s.size == key.size() && s.a == k.a && s.b == k.b &&
           (s.size <= 16 ||
            std::memcmp(tokens_[static_cast<size_t>(s.id)].data() + key_offset_ + 16, key.data() + 16, s.size - 16) == 0);
  }
  Slot& probe(const Key& k, std::string_view key) {
    for (size_t i = k.hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0 || matches(s, k, key)) return s;
    }
  }
  void set_filter_bit(uint64_t hash) {
    const uint64_t bit = hash >> filter_shift_;
    filter_[bit / 64] |= uint64_t{1} << (bit % 64);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].id < 0) {
          slots_[i] = s;
          break;
        }
      }
    }
    // 64 filter bits per slot, at most 2^20: a larger filter is refilled from the slots' hashes; at
    // its full size it stays as it is (a bit depends on the hash alone).
    const unsigned log2 = std::min<unsigned>(kMaxFilterLog2, static_cast<unsigned>(std::countr_zero(slots_.size())) + 6);
    if (64 - log2 != filter_shift_) {
      filter_shift_ = 64 - log2;
      filter_.assign(size_t{1} << (log2 - 6), 0);
      for (const Slot& s : slots_)
        if (s.id >= 0) set_filter_bit(s.hash);
    }
  }
  std::span<const std::string> tokens_;
  size_t key_offset_;
  std::vector<uint64_t> filter_;  // 2^(64 - filter_shift_) bits; one word until the first insert
  unsigned filter_shift_ = 58;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace pretrain
