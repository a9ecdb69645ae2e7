#include "datagen/shards/packing.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace pretrain {

namespace {

// Free token room per pack (−1: not opened, or holding max_pack instances) under a max-tree, so
// that the leftmost pack with at least some room is found without visiting the others.
class RoomTree {
 public:
  static constexpr size_t npos = ~size_t{0};

  explicit RoomTree(size_t n) {
    while (leaves_ < n) leaves_ *= 2;
    max_.assign(2 * leaves_, -1);
  }
  void set(size_t i, int64_t room) {
    size_t k = leaves_ + i;
    max_[k] = room;
    for (k /= 2; k >= 1; k /= 2) max_[k] = std::max(max_[2 * k], max_[2 * k + 1]);
  }
  // The leftmost pack at or after `from` with room ≥ need, or npos.
  size_t leftmost(size_t from, int64_t need) const { return find(1, 0, leaves_, from, need); }

 private:
  size_t find(size_t node, size_t lo, size_t hi, size_t from, int64_t need) const {
    if (hi <= from || max_[node] < need) return npos;
    if (hi - lo == 1) return lo;
    const size_t mid = lo + (hi - lo) / 2;
    const size_t left = find(2 * node, lo, mid, from, need);
    return left != npos ? left : find(2 * node + 1, mid, hi, from, need);
  }

  size_t leaves_ = 1;
  std::vector<int64_t> max_;
};

}  // namespace

Packs pack_first_fit_decreasing(std::span<const PackItem> items, const PackLimits& limits) {
  std::vector<uint32_t> order(items.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return items[a].tokens > items[b].tokens; });

  struct Open {
    int64_t tokens_left, predictions_left;
    uint32_t count;
  };
  std::vector<Open> open;
  std::vector<uint32_t> pack_of(items.size());
  RoomTree tree(std::max<size_t>(1, items.size()));
  for (uint32_t i : order) {
    const PackItem& it = items[i];
    if (it.tokens < 1 || it.tokens > limits.seq_len || it.predictions > limits.max_predictions)
      throw Error(cat("internal: an instance of ", it.tokens, " tokens and ", it.predictions,
                      " predictions fits no pack of seq_len ", limits.seq_len, " and max_predictions ",
                      limits.max_predictions));
    size_t p = tree.leftmost(0, it.tokens);
    while (p != RoomTree::npos && open[p].predictions_left < it.predictions) p = tree.leftmost(p + 1, it.tokens);
    if (p == RoomTree::npos) {
      p = open.size();
      open.push_back({limits.seq_len, limits.max_predictions, 0});
    }
    Open& o = open[p];
    o.tokens_left -= it.tokens;
    o.predictions_left -= it.predictions;
    ++o.count;
    tree.set(p, o.count < limits.max_pack ? o.tokens_left : -1);
    pack_of[i] = uint32_t(p);
  }
  // Each pack's items in placement order: a counting sort of the placements by pack.
  Packs packs;
  packs.starts.assign(open.size() + 1, 0);
  for (size_t p = 0; p < open.size(); ++p) packs.starts[p + 1] = packs.starts[p] + open[p].count;
  std::vector<size_t> next(packs.starts.begin(), packs.starts.end() - 1);
  packs.items.resize(items.size());
  for (uint32_t i : order) packs.items[next[pack_of[i]]++] = i;
  return packs;
}

}  // namespace pretrain
