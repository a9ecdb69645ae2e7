#include "datagen/shards/input_pieces.h"

#include <algorithm>

#include "common/error.h"

namespace pretrain {

nlohmann::json InputPiece::to_json() const {
  return {begin.unit, begin.document, end.unit, end.document};
}

std::vector<InputPiece> plan_input_pieces(const std::vector<TextDocumentReader::Unit>& units, uint64_t piece_bytes) {
  if (piece_bytes == 0) throw UsageError("the piece size must be positive");
  // Atoms: where a piece may begin, with the bytes up to the next one. A counted unit's file of
  // several pieces' bytes gives several atoms, its documents shared out evenly.
  struct Atom {
    InputPosition at;
    uint64_t bytes;
  };
  std::vector<Atom> atoms;
  for (uint64_t u = 0; u < units.size(); ++u) {
    const TextDocumentReader::Unit& unit = units[u];
    if (!unit.counted) {
      atoms.push_back({{u, 0}, unit.bytes});
      continue;
    }
    uint64_t first = 0;
    for (const ShardEntry& s : unit.shards) {
      const uint64_t cuts = std::max<uint64_t>(1, std::min(s.records, (s.bytes + piece_bytes - 1) / piece_bytes));
      for (uint64_t k = 0; k < cuts; ++k) {
        const uint64_t at = first + s.records * k / cuts;
        const uint64_t bytes = s.bytes * (k + 1) / cuts - s.bytes * k / cuts;
        if (!atoms.empty() && atoms.back().at == InputPosition{u, at}) {
          atoms.back().bytes += bytes;  // an empty file: part of the atom it is in
        } else {
          atoms.push_back({{u, at}, bytes});
        }
      }
      first += s.records;
    }
    if (unit.shards.empty()) atoms.push_back({{u, 0}, 0});
  }
  std::vector<InputPiece> pieces;
  for (const Atom& a : atoms) {
    if (pieces.empty() || pieces.back().bytes >= piece_bytes) {
      if (!pieces.empty()) pieces.back().end = a.at;
      pieces.push_back({.begin = a.at});
    }
    pieces.back().bytes += a.bytes;
  }
  if (!pieces.empty()) pieces.back().end = {units.size(), 0};
  return pieces;
}

std::pair<size_t, size_t> pieces_of_rank(const std::vector<InputPiece>& pieces, int rank, int ranks) {
  uint64_t total = 0;
  for (const InputPiece& p : pieces) total += p.bytes;
  if (total == 0) {  // nothing weighs anything: by count
    return {pieces.size() * size_t(rank) / size_t(ranks), pieces.size() * size_t(rank + 1) / size_t(ranks)};
  }
  // Rank r's share begins at twice-byte 2·total·r/ranks (a·b/c without overflow: a = q·c + m).
  const uint64_t q = 2 * total / uint64_t(ranks), m = 2 * total % uint64_t(ranks);
  auto share_begin = [&](uint64_t r) { return q * r + m * r / uint64_t(ranks); };
  size_t first = pieces.size(), end = pieces.size();
  uint64_t before = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const uint64_t middle = 2 * before + pieces[p].bytes;  // twice the piece's middle byte
    if (first == pieces.size() && middle >= share_begin(uint64_t(rank))) first = p;
    if (rank + 1 < ranks && middle >= share_begin(uint64_t(rank) + 1)) {
      end = p;
      break;
    }
    before += pieces[p].bytes;
  }
  return {std::min(first, end), end};
}

}  // namespace pretrain
