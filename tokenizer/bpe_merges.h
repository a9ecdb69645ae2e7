// The BPE model step: one pre-token's bytes → token ids by repeatedly merging the adjacent pair of
// lowest rank (leftmost first among equals), as HF tokenizers' BPE::merge_word and GPT-2's
// original bpe() do.
//
// Two implementations of the same function:
//   merge()            — the fast one: ids from a (left id, right id) → (rank, merged id) hash
//                        table, a linear scan for short words, a heap over a linked list for
//                        long ones (O(n log n)), and one bucket of positions per rank for huge
//                        ones (a 10 MB word with no spaces takes about a second); scratch buffers
//                        reused per thread (no allocation per word).
//   reference_merge()  — the naive one over std::string symbols, for the tests to check the fast
//                        one against.
#pragma once
#include <array>
#include <cstdint>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pretrain {

class BpeMerges {
 public:
  // byte_ids[b]: the token for the single byte b. token_bytes[id]: what each token stands for
  // (raw bytes; the reference merges over them).
  BpeMerges(const std::array<TokenId, 256>& byte_ids, std::vector<std::string> token_bytes);

  // Appends merge number `rank` (ranks are given in increasing order). A pair given twice keeps
  // the later rank and result, as HF's and GPT-2's loaders (a dict built in order) do.
  void add(TokenId left, TokenId right, TokenId merged);
  // Call once all merges are added: checks whether every merge ranks after the merges that make
  // its parts (true of GPT-2's and of any learned merge list); huge words rely on it.
  void finish();
  size_t size() const { return count_; }
  TokenId byte_id(unsigned char b) const { return byte_ids_[b]; }
  const std::vector<std::string>& token_bytes() const { return token_bytes_; }

  // Appends the ids of `word` (raw bytes, non-empty) to out. The algorithm is picked by length
  // unless a test asks for one (buckets only when finish() found the ranks ordered).
  enum class Algorithm { by_length, scan, heap, buckets };
  void merge(std::string_view word, std::vector<TokenId>& out, Algorithm algorithm = Algorithm::by_length) const;
  std::vector<TokenId> reference_merge(std::string_view word) const;

  struct Slot {
    uint64_t key;  // left << 32 | right; kEmpty when free
    int32_t rank;
    TokenId merged;
  };

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static constexpr int32_t kNoRank = INT32_MAX;

  static uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const Slot* find(TokenId left, TokenId right) const {
    uint64_t key = pair_key(left, right);
    size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    for (;;) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s;
      if (s.key == kEmpty) return nullptr;
      i = (i + 1) & (slots_.size() - 1);
    }
  }
  int32_t rank_of(TokenId left, TokenId right) const {
    const Slot* s = find(left, right);
    return s ? s->rank : kNoRank;
  }
  void grow();
  void merge_short(std::vector<TokenId>& symbols, std::vector<TokenId>& out) const;
  void merge_long(std::vector<TokenId>& symbols, std::vector<TokenId>& out) const;
  void merge_huge(std::vector<TokenId>& symbols, std::vector<TokenId>& out) const;

  std::array<TokenId, 256> byte_ids_;
  std::vector<std::string> token_bytes_;
  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  size_t count_ = 0;
  int32_t next_rank_ = 0;
  bool parts_rank_first_ = false;  // see finish()

  // The merges in rank order, and the reference's own tables built from them on first use.
  struct Rule {
    TokenId left, right, merged;
  };
  std::vector<Rule> merge_list_;
  mutable std::once_flag reference_once_;
  mutable std::map<std::pair<std::string, std::string>, int32_t> reference_ranks_;
  mutable std::unordered_map<std::string, TokenId> reference_ids_;
};

}  // namespace pretrain
