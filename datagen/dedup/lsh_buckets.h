// dedup's stage 2: which documents are duplicates of which. The documents of every signature file
// are numbered in input order (SignatureSet). Exact duplicates are found by sorting the pairs
// (exact hash, document) and joining each run of equal hashes; near duplicates band by band, by
// sorting (band key, document) over the documents that have a signature and joining each run of
// equal keys: every member with the run's first document (the smallest index), as datatrove joins
// neighbours in its sorted buckets. With a Jaccard threshold t > 0 a pair is joined only when the
// similarity its signatures estimate is at least t; a member failing that check against the run's
// first document is also checked against the member before it, so a run of near-copies that drift
// still chains. A pair already in one set is not checked again: that changes no set, so the sets
// do not depend on the order the bands are taken in or on which rank takes which band.
//
// Memory: one band at a time, 16 bytes per document (the exact stage 24), plus the union-find.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "datagen/dedup/signature_file.h"
#include "datagen/dedup/union_find.h"

namespace pretrain {

class SignatureSet {
 public:
  explicit SignatureSet(std::vector<SignatureFile> files);
  uint64_t documents() const { return first_.back(); }
  size_t files() const { return files_.size(); }
  const SignatureFile& file(size_t f) const { return files_[f]; }
  uint64_t first_document(size_t f) const { return first_[f]; }
  // The file and record of document `doc`.
  std::pair<size_t, uint64_t> locate(uint64_t doc) const;
  void signature(uint64_t doc, uint32_t* out) const;
  bool has_minhash(uint64_t doc) const { return has_minhash_[doc] != 0; }
  int hashes() const;
  int bands() const;

 private:
  std::vector<SignatureFile> files_;
  std::vector<uint64_t> first_;  // per file, then the total
  std::vector<uint8_t> has_minhash_;
};

struct JoinStats {
  uint64_t candidate_pairs = 0;  // members of runs but their first: the same at any rank count
  uint64_t checked = 0;          // Jaccard estimates computed (fewer when pairs were already joined)
  uint64_t joined = 0;           // unions that merged two sets
};

using DocPair = std::pair<uint64_t, uint64_t>;

// Joins the runs of equal exact hashes (documents whose normalized text is empty are never joined). `merged`, when given, receives the pairs that merged two
// sets (a forest that spans the same sets), for other ranks to replay.
void join_exact(const SignatureSet& set, UnionFind& sets, std::vector<DocPair>* merged, JoinStats& stats);
// Joins the runs of equal keys of one band (threshold 0: no check).
void join_band(const SignatureSet& set, int band, double threshold, UnionFind& sets, std::vector<DocPair>* merged,
               JoinStats& stats);

}  // namespace pretrain
