#include "datagen/dedup/lsh_buckets.h"

#include <tbb/parallel_sort.h>

#include <algorithm>

#include "common/error.h"
#include "datagen/dedup/minhash.h"

namespace pretrain {

SignatureSet::SignatureSet(std::vector<SignatureFile> files) : files_(std::move(files)) {
  first_.push_back(0);
  for (size_t f = 0; f < files_.size(); ++f) {
    if (f > 0 && (files_[f].hashes() != files_[0].hashes() || files_[f].bands() != files_[0].bands()))
      throw Error(Where{files_[f].path()}, cat("expected ", files_[0].hashes(), " hashes in ", files_[0].bands(),
                                               " bands as in ", files_[0].path(), ", found ", files_[f].hashes(), " in ",
                                               files_[f].bands()));
    first_.push_back(first_.back() + files_[f].documents());
    std::vector<uint8_t> flags = files_[f].flags();
    has_minhash_.insert(has_minhash_.end(), flags.begin(), flags.end());
  }
}

int SignatureSet::hashes() const { return files_.empty() ? 0 : files_[0].hashes(); }
int SignatureSet::bands() const { return files_.empty() ? 0 : files_[0].bands(); }

std::pair<size_t, uint64_t> SignatureSet::locate(uint64_t doc) const {
  if (doc >= documents()) throw Error(cat("document ", doc, " of ", documents()));
  auto it = std::upper_bound(first_.begin(), first_.end(), doc);
  size_t f = static_cast<size_t>(it - first_.begin()) - 1;
  return {f, doc - first_[f]};
}

void SignatureSet::signature(uint64_t doc, uint32_t* out) const {
  auto [f, record] = locate(doc);
  files_[f].signature(record, out);
}

namespace {

void record(UnionFind& sets, uint64_t x, uint64_t y, std::vector<DocPair>* merged, JoinStats& stats) {
  if (sets.unite(x, y)) {
    ++stats.joined;
    if (merged) merged->emplace_back(x, y);
  }
}

}  // namespace

void join_exact(const SignatureSet& set, UnionFind& sets, std::vector<DocPair>* merged, JoinStats& stats) {
  // An empty text (after normalization: a redirect page, a text of only whitespace) carries
  // nothing to duplicate: such documents are kept, each for itself.
  const Hash128 empty = xxh3_128("");
  std::vector<std::pair<Hash128, uint64_t>> keys;
  keys.reserve(set.documents());
  for (size_t f = 0; f < set.files(); ++f) {
    std::vector<Hash128> exact = set.file(f).exact();
    for (uint64_t r = 0; r < exact.size(); ++r)
      if (exact[r] != empty) keys.emplace_back(exact[r], set.first_document(f) + r);
  }
  tbb::parallel_sort(keys.begin(), keys.end());
  for (size_t i = 1; i < keys.size(); ++i) {
    size_t head = i - 1;
    while (i < keys.size() && keys[i].first == keys[head].first) {
      ++stats.candidate_pairs;
      record(sets, keys[head].second, keys[i].second, merged, stats);
      ++i;
    }
  }
}

void join_band(const SignatureSet& set, int band, double threshold, UnionFind& sets, std::vector<DocPair>* merged,
               JoinStats& stats) {
  std::vector<std::pair<uint64_t, uint64_t>> keys;
  std::vector<uint64_t> file_keys;
  for (size_t f = 0; f < set.files(); ++f) {
    const SignatureFile& file = set.file(f);
    file_keys.resize(file.documents());
    file.band_keys(band, file_keys.data());
    const uint64_t first = set.first_document(f);
    for (uint64_t r = 0; r < file_keys.size(); ++r)
      if (set.has_minhash(first + r)) keys.emplace_back(file_keys[r], first + r);
  }
  tbb::parallel_sort(keys.begin(), keys.end());
  const int k = set.hashes();
  std::vector<uint32_t> head_sig(static_cast<size_t>(k)), sig(static_cast<size_t>(k)), previous_sig(static_cast<size_t>(k));
  auto similar = [&](const uint32_t* x_sig, const uint32_t* y_sig) {
    ++stats.checked;
    return estimated_jaccard(x_sig, y_sig, k) >= threshold;
  };
  for (size_t i = 0; i < keys.size();) {
    size_t end = i + 1;
    while (end < keys.size() && keys[end].first == keys[i].first) ++end;
    const uint64_t head = keys[i].second;
    bool head_read = false, previous_read = false;
    for (size_t m = i + 1; m < end; ++m) {
      const uint64_t doc = keys[m].second, previous = keys[m - 1].second;
      ++stats.candidate_pairs;
      if (threshold <= 0) {
        record(sets, head, doc, merged, stats);
        continue;
      }
      bool sig_read = false;
      auto read_sig = [&] {
        if (!sig_read) set.signature(doc, sig.data());
        sig_read = true;
      };
      if (sets.find(head) != sets.find(doc)) {
        if (!head_read) set.signature(head, head_sig.data());
        head_read = true;
        read_sig();
        if (similar(head_sig.data(), sig.data())) record(sets, head, doc, merged, stats);
      }
      if (m - 1 > i && sets.find(previous) != sets.find(doc)) {
        if (!previous_read) set.signature(previous, previous_sig.data());
        read_sig();
        if (similar(previous_sig.data(), sig.data())) record(sets, previous, doc, merged, stats);
      }
      // This member is the next one's predecessor.
      if (sig_read) std::swap(previous_sig, sig);
      previous_read = sig_read;
    }
    i = end;
  }
}

}  // namespace pretrain
