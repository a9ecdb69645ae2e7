// Union-find over documents by their index in input order (dedup's clusters). The keep rule lives
// here: a set's root is always its smallest index, so the document a cluster keeps is its first in
// input order (sources in the order given, then shards, then records), whatever order the pairs
// were joined in. Path halving keeps finds short.
#pragma once
#include <cstdint>
#include <vector>

namespace pretrain {

class UnionFind {
 public:
  explicit UnionFind(uint64_t size);
  uint64_t size() const { return parent_.size(); }
  // The root: the smallest index of x's set.
  uint64_t find(uint64_t x);
  // Joins the sets of x and y; false when they were one set already.
  bool unite(uint64_t x, uint64_t y);
  // Every element's root, as one array (finds all, so later finds are one step).
  std::vector<uint64_t> roots();

 private:
  std::vector<uint64_t> parent_;
};

}  // namespace pretrain
