#include "datagen/shards/document_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/counter_rng.h"
#include "common/error.h"
#include "datagen/shards/rng_streams.h"

namespace pretrain {

namespace {

bool is_valid_document(const DocumentSplitOptions& o, uint32_t d) {
  if (o.valid_fraction <= 0) return false;
  CounterRng rng(o.seed, d, kValidStream);
  return rng.random() < o.valid_fraction;
}

}  // namespace

void DocumentSplitOptions::check() const {
  if (!(valid_fraction >= 0 && valid_fraction < 1)) throw UsageError("--valid-fraction must be in [0, 1)");
}

DocumentSplit split_documents(uint32_t num_documents, const DocumentSplitOptions& o) {
  o.check();
  std::vector<uint32_t> order(num_documents);
  std::iota(order.begin(), order.end(), 0u);
  if (o.shuffle) {
    CounterRng rng(o.seed, 0, kOrderStream);
    rng.shuffle(order);
  }
  DocumentSplit split;
  for (uint32_t d : order) (is_valid_document(o, d) ? split.valid : split.train).push_back(d);
  return split;
}

int valid_shard_count(int num_shards, double valid_fraction) {
  return std::max(1, int(std::ceil(num_shards * valid_fraction)));
}

}  // namespace pretrain
