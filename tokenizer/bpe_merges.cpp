#include "tokenizer/bpe_merges.h"

#include <algorithm>
#include <functional>

namespace pretrain {
namespace {

// Words up to this many bytes use the plain scan (like tiktoken's byte_pair_merge): for the short
// words that make up real text it beats a heap; longer ones go through the heap.
constexpr size_t kShortWord = 64;
// Words past this many bytes use a bucket per rank instead of the heap: with millions of symbols
// the heap's cache misses dominate, while buckets are visited in rank order and mostly filled in
// position order.
constexpr size_t kHugeWord = 1 << 14;

// Per-thread scratch, reused by every word this thread merges.
struct Scratch {
  std::vector<TokenId> symbols;
  std::vector<const BpeMerges::Slot*> pairs;  // short words: the slot of (symbols[k], symbols[k+1])
  std::vector<int32_t> prev, next;  // long words: the linked list
  std::vector<uint64_t> heap;       // long words: rank << 32 | position, smallest first
  std::vector<std::vector<int32_t>> buckets;  // huge words: positions by pair rank
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

BpeMerges::BpeMerges(const std::array<TokenId, 256>& byte_ids, std::vector<std::string> token_bytes)
    : byte_ids_(byte_ids), token_bytes_(std::move(token_bytes)) {
  slots_.assign(1024, Slot{kEmpty, 0, 0});
  shift_ = 64 - 10;
}

void BpeMerges::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{kEmpty, 0, 0});
  --shift_;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = (s.key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[i].key != kEmpty) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = s;
  }
}

void BpeMerges::add(TokenId left, TokenId right, TokenId merged) {
  int32_t rank = next_rank_++;
  merge_list_.push_back({left, right, merged});
  if (const Slot* s = find(left, right)) {
    *const_cast<Slot*>(s) = Slot{s->key, rank, merged};
    return;
  }
  if ((count_ + 1) * 2 > slots_.size()) grow();  // load factor at most 1/2
  uint64_t key = pair_key(left, right);
  size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
  while (slots_[i].key != kEmpty) i = (i + 1) & (slots_.size() - 1);
  slots_[i] = Slot{key, rank, merged};
  ++count_;
}

void BpeMerges::merge(std::string_view word, std::vector<TokenId>& out, Algorithm algorithm) const {
  Scratch& s = scratch();
  s.symbols.clear();
  for (unsigned char b : word) s.symbols.push_back(byte_ids_[b]);
  if (algorithm == Algorithm::by_length)
    algorithm = s.symbols.size() <= kShortWord ? Algorithm::scan
                : s.symbols.size() <= kHugeWord ? Algorithm::heap
                                                : Algorithm::buckets;
  if (algorithm == Algorithm::buckets && !parts_rank_first_) algorithm = Algorithm::heap;
  if (algorithm == Algorithm::scan)
    merge_short(s.symbols, out);
  else if (algorithm == Algorithm::heap)
    merge_long(s.symbols, out);
  else
    merge_huge(s.symbols, out);
}

void BpeMerges::finish() {
  // made_at[t]: the highest rank of a merge that makes token t (-1: only a byte token or none).
  TokenId max_id = 0;
  for (const Rule& r : merge_list_) max_id = std::max({max_id, r.left, r.right, r.merged});
  std::vector<int32_t> made_at(static_cast<size_t>(max_id) + 1, -1);
  auto effective = [&](size_t rank) { return rank_of(merge_list_[rank].left, merge_list_[rank].right) == static_cast<int32_t>(rank); };
  for (size_t r = 0; r < merge_list_.size(); ++r)
    if (effective(r)) made_at[merge_list_[r].merged] = static_cast<int32_t>(r);
  parts_rank_first_ = true;
  for (size_t r = 0; r < merge_list_.size(); ++r) {
    const Rule& m = merge_list_[r];
    if (effective(r) && (made_at[m.left] >= static_cast<int32_t>(r) || made_at[m.right] >= static_cast<int32_t>(r)))
      parts_rank_first_ = false;
  }
}

// Find the lowest-ranked pair (leftmost among equals), merge it, update the two pairs around it,
// repeat. Quadratic in the word's length, but with no setup: the fastest for short words.
void BpeMerges::merge_short(std::vector<TokenId>& symbols, std::vector<TokenId>& out) const {
  std::vector<const Slot*>& pairs = scratch().pairs;
  pairs.clear();
  for (size_t k = 0; k + 1 < symbols.size(); ++k) pairs.push_back(find(symbols[k], symbols[k + 1]));
  while (!pairs.empty()) {
    size_t best = 0;
    int32_t best_rank = kNoRank;
    for (size_t k = 0; k < pairs.size(); ++k) {
      const Slot* p = pairs[k];
      if (p && p->rank < best_rank) {
        best_rank = p->rank;
        best = k;
      }
    }
    if (best_rank == kNoRank) break;
    symbols[best] = pairs[best]->merged;
    symbols.erase(symbols.begin() + static_cast<ptrdiff_t>(best) + 1);
    pairs.erase(pairs.begin() + static_cast<ptrdiff_t>(best));
    if (best > 0) pairs[best - 1] = find(symbols[best - 1], symbols[best]);
    if (best < pairs.size()) pairs[best] = find(symbols[best], symbols[best + 1]);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

// The same order of merges with a min-heap of (rank, position) over a doubly linked list of
// symbols. Positions are the original byte indices, so "leftmost among equal ranks" is the
// smallest position. An entry is stale when its left symbol died or the pair there changed; it
// is then skipped (re-looking the pair up tells: one rank belongs to one pair).
void BpeMerges::merge_long(std::vector<TokenId>& symbols, std::vector<TokenId>& out) const {
  Scratch& s = scratch();
  const size_t n = symbols.size();
  s.prev.resize(n);
  s.next.resize(n);
  s.heap.clear();
  for (size_t k = 0; k < n; ++k) {
    s.prev[k] = static_cast<int32_t>(k) - 1;
    s.next[k] = k + 1 < n ? static_cast<int32_t>(k + 1) : -1;
  }
  auto push = [&](int32_t pos) {
    int32_t r = rank_of(symbols[pos], symbols[s.next[pos]]);
    if (r == kNoRank) return;
    s.heap.push_back(static_cast<uint64_t>(r) << 32 | static_cast<uint32_t>(pos));
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>());
  };
  for (size_t k = 0; k + 1 < n; ++k) push(static_cast<int32_t>(k));
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>());
    uint64_t top = s.heap.back();
    s.heap.pop_back();
    int32_t rank = static_cast<int32_t>(top >> 32);
    int32_t pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    int32_t right = s.next[pos];
    if (right < 0 || s.prev[pos] == -2) continue;  // pos died or has no right neighbour now
    const Slot* slot = find(symbols[pos], symbols[right]);
    if (!slot || slot->rank != rank) continue;
    symbols[pos] = slot->merged;
    s.next[pos] = s.next[right];
    if (s.next[right] >= 0) s.prev[s.next[right]] = pos;
    s.prev[right] = -2;  // dead
    if (s.prev[pos] >= 0) push(s.prev[pos]);
    if (s.next[pos] >= 0) push(pos);
  }
  for (int32_t k = 0; k >= 0; k = s.next[k]) out.push_back(symbols[k]);
}

// The heap's order of merges with a bucket queue: when every merge ranks after the merges making
// its parts, a merge at rank r only creates pairs of higher rank, so the ranks can be visited in
// increasing order, each bucket once, its positions in increasing order (leftmost first).
void BpeMerges::merge_huge(std::vector<TokenId>& symbols, std::vector<TokenId>& out) const {
  Scratch& s = scratch();
  const size_t n = symbols.size();
  s.prev.resize(n);
  s.next.resize(n);
  if (s.buckets.size() < static_cast<size_t>(next_rank_)) s.buckets.resize(next_rank_);
  for (size_t k = 0; k < n; ++k) {
    s.prev[k] = static_cast<int32_t>(k) - 1;
    s.next[k] = k + 1 < n ? static_cast<int32_t>(k + 1) : -1;
  }
  int32_t lowest = kNoRank;
  auto push = [&](int32_t pos) {
    int32_t r = rank_of(symbols[pos], symbols[s.next[pos]]);
    if (r == kNoRank) return;
    s.buckets[r].push_back(pos);
    lowest = std::min(lowest, r);
  };
  for (size_t k = 0; k + 1 < n; ++k) push(static_cast<int32_t>(k));
  for (int32_t rank = lowest; rank < next_rank_; ++rank) {
    std::vector<int32_t>& bucket = s.buckets[rank];
    if (bucket.empty()) continue;
    if (!std::is_sorted(bucket.begin(), bucket.end())) std::sort(bucket.begin(), bucket.end());
    for (int32_t pos : bucket) {  // merging at `rank` only pushes to higher ranks: no reallocation here
      int32_t right = s.next[pos];
      if (right < 0 || s.prev[pos] == -2) continue;
      const Slot* slot = find(symbols[pos], symbols[right]);
      if (!slot || slot->rank != rank) continue;
      symbols[pos] = slot->merged;
      s.next[pos] = s.next[right];
      if (s.next[right] >= 0) s.prev[s.next[right]] = pos;
      s.prev[right] = -2;
      if (s.prev[pos] >= 0) push(s.prev[pos]);
      if (s.next[pos] >= 0) push(pos);
    }
    bucket.clear();
  }
  for (int32_t k = 0; k >= 0; k = s.next[k]) out.push_back(symbols[k]);
}

// The textbook algorithm over byte strings, sharing nothing with the fast path but the merge list:
// find the lowest-ranked adjacent pair, join its leftmost occurrence, repeat.
std::vector<TokenId> BpeMerges::reference_merge(std::string_view word) const {
  std::call_once(reference_once_, [&] {
    for (size_t r = 0; r < merge_list_.size(); ++r) {
      const auto& m = merge_list_[r];
      reference_ranks_[{token_bytes_[m.left], token_bytes_[m.right]}] = static_cast<int32_t>(r);
    }
    for (size_t id = 0; id < token_bytes_.size(); ++id)
      reference_ids_.emplace(token_bytes_[id], static_cast<TokenId>(id));
    for (int b = 0; b < 256; ++b) reference_ids_[std::string(1, static_cast<char>(b))] = byte_ids_[b];
  });
  std::vector<std::string> symbols;
  for (char c : word) symbols.emplace_back(1, c);
  for (;;) {
    size_t best = 0;
    int32_t best_rank = kNoRank;
    for (size_t k = 0; k + 1 < symbols.size(); ++k) {
      auto it = reference_ranks_.find({symbols[k], symbols[k + 1]});
      if (it != reference_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = k;
      }
    }
    if (best_rank == kNoRank) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<ptrdiff_t>(best) + 1);
  }
  std::vector<TokenId> ids;
  for (const auto& sym : symbols) ids.push_back(reference_ids_.at(sym));
  return ids;
}

}  // namespace pretrain
