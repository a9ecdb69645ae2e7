#include "datagen/dedup/union_find.h"

#include <numeric>

#include "common/error.h"

namespace pretrain {

UnionFind::UnionFind(uint64_t size) : parent_(size) { std::iota(parent_.begin(), parent_.end(), uint64_t{0}); }

uint64_t UnionFind::find(uint64_t x) {
  if (x >= parent_.size()) throw Error(cat("union-find: element ", x, " of ", parent_.size()));
  while (parent_[x] != x) {
    parent_[x] = parent_[parent_[x]];
    x = parent_[x];
  }
  return x;
}

bool UnionFind::unite(uint64_t x, uint64_t y) {
  uint64_t rx = find(x), ry = find(y);
  if (rx == ry) return false;
  // The larger root joins the smaller: a root is always its set's smallest index.
  if (rx < ry) parent_[ry] = rx;
  else parent_[rx] = ry;
  return true;
}

std::vector<uint64_t> UnionFind::roots() {
  // A parent is never larger than its child, so one pass in index order resolves every chain.
  for (uint64_t x = 0; x < parent_.size(); ++x) parent_[x] = parent_[parent_[x]];
  return parent_;
}

}  // namespace pretrain
