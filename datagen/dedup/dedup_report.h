// dedup's report (<output>/dedup-report.jsonl): one JSON object per removed document, in input
// order, with the document it duplicates (the one its cluster keeps):
//
//   {"index":7,"id":"12","source":"wiki-b/","file":"wiki-b/docs-00000.jsonl.zst","record":3,
//    "cluster":2,"kind":"near","jaccard":0.9375,
//    "kept":{"index":2,"id":"5","source":"wiki-a/","file":"wiki-a/docs-00000.jsonl.zst","record":2}}
//
// index: the document's position in input order (all sources, from 0); source: the -i argument it
// came from; file and record: where it is (record from 0); cluster: the index of the kept document,
// which names the cluster; kind: "exact" when its normalized text hashes as the kept document's,
// else "near"; jaccard: the similarity the two signatures estimate (null without signatures: a
// document of fewer than --ngram words, or --no-near). A cluster's members can be joined through
// others (A~B, B~C), so a removed document's own estimate against the kept one may be below the
// threshold.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace pretrain {

struct ReportDocument {
  uint64_t index = 0;
  std::string id, source, file;
  uint64_t record = 0;
};

struct RemovedDocument {
  ReportDocument removed, kept;
  bool exact = false;
  std::optional<double> jaccard;
};

// The report's line for one removed document, '\n' included.
std::string report_line(const RemovedDocument& doc);

}  // namespace pretrain
