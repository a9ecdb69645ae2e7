// The input cut into pieces for tokenizing (datagen/shards/input_pieces.h): counted document
// files cut at file boundaries and, past a piece's size, at document boundaries in proportion;
// other inputs only at their start; every document in exactly one piece, in order; each rank a
// contiguous run of pieces, about its share of the bytes, whatever the number of ranks.
#include "datagen/shards/input_pieces.h"

#include <gtest/gtest.h>

#include <numeric>

#include "common/error.h"

namespace pretrain::input_pieces_test {
namespace {

using Unit = TextDocumentReader::Unit;

Unit counted(std::vector<std::pair<uint64_t, uint64_t>> files) {  // (bytes, documents) each
  Unit u{.counted = true};
  for (const auto& [bytes, records] : files) {
    u.shards.push_back({.file = "f", .records = records, .bytes = bytes});
    u.bytes += bytes;
  }
  return u;
}

Unit file(uint64_t bytes) { return {.path = "x.jsonl", .bytes = bytes}; }

// Pieces that follow one another from the input's start to its end, bytes adding up.
void expect_covering(const std::vector<InputPiece>& pieces, const std::vector<Unit>& units) {
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.front().begin, (InputPosition{0, 0}));
  EXPECT_EQ(pieces.back().end, (InputPosition{units.size(), 0}));
  uint64_t bytes = 0, total = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    EXPECT_LT(pieces[p].begin, pieces[p].end) << p;
    if (p > 0) {
      EXPECT_EQ(pieces[p].begin, pieces[p - 1].end) << p;
    }
    bytes += pieces[p].bytes;
  }
  for (const Unit& u : units) total += u.bytes;
  EXPECT_EQ(bytes, total);
}

TEST(InputPieces, CountedFilesAreCutAtFilesAndLargeOnesAtDocuments) {
  // A manifest of three files: 30 bytes (3 documents), 250 (10), 40 (4); then a JSON lines file
  // of 500 bytes, which no manifest counts.
  const std::vector<Unit> units = {counted({{30, 3}, {250, 10}, {40, 4}}), file(500), file(10)};
  const std::vector<InputPiece> pieces = plan_input_pieces(units, 100);
  expect_covering(pieces, units);
  std::vector<InputPosition> begins;
  for (const InputPiece& p : pieces) begins.push_back(p.begin);
  // The 250-byte file in thirds of ~83 bytes, at documents 3, 6 and 9. A piece is closed once it
  // holds 100 bytes: the 30-byte file and the first third (113), the other two thirds (167), the
  // 40-byte file and the 500-byte one, which is not cut (540), the last file.
  EXPECT_EQ(begins, (std::vector<InputPosition>{{0, 0}, {0, 6}, {0, 13}, {2, 0}}));
  EXPECT_EQ(pieces[2].bytes, 540u);
}

TEST(InputPieces, AnUncountedFileIsOnePieceHoweverLarge) {
  const std::vector<Unit> units = {file(1000)};
  const auto pieces = plan_input_pieces(units, 10);
  ASSERT_EQ(pieces.size(), 1u);
  expect_covering(pieces, units);
}

TEST(InputPieces, EmptyFilesAndUnitsArePartOfAPiece) {
  const std::vector<Unit> units = {counted({{0, 0}, {50, 5}, {0, 0}}), counted({}), file(0), file(60)};
  const auto pieces = plan_input_pieces(units, 40);
  expect_covering(pieces, units);
  EXPECT_THROW(plan_input_pieces(units, 0), UsageError);
}

// Each rank a contiguous run; together every piece once; a rank's bytes within a piece of its
// share; the same pieces whatever the number of ranks (the plan does not see it).
TEST(InputPieces, EachRankTakesAContiguousRunOfAboutItsShare) {
  std::vector<Unit> units;
  for (uint64_t k = 1; k <= 40; ++k) units.push_back(file(1000 + 37 * k % 500));
  const std::vector<InputPiece> pieces = plan_input_pieces(units, 1);
  ASSERT_EQ(pieces.size(), 40u);
  uint64_t total = 0, largest = 0;
  for (const InputPiece& p : pieces) total += p.bytes, largest = std::max(largest, p.bytes);
  for (int ranks : {1, 2, 3, 7, 40, 64}) {
    size_t next = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto [first, end] = pieces_of_rank(pieces, r, ranks);
      EXPECT_EQ(first, next) << r << " of " << ranks;
      EXPECT_LE(first, end);
      uint64_t bytes = 0;
      for (size_t p = first; p < end; ++p) bytes += pieces[p].bytes;
      EXPECT_LE(bytes, total / uint64_t(ranks) + largest) << r << " of " << ranks;
      if (ranks <= 7) {
        EXPECT_GE(bytes + largest, total / uint64_t(ranks)) << r << " of " << ranks;
      }
      next = end;
    }
    EXPECT_EQ(next, pieces.size()) << ranks << " ranks";
  }
  // Pieces of no bytes are shared by count.
  const std::vector<InputPiece> empty(5, InputPiece{});
  EXPECT_EQ(pieces_of_rank(empty, 1, 2), (std::pair<size_t, size_t>{2, 5}));
}

}  // namespace
}  // namespace pretrain::input_pieces_test
