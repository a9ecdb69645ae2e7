// make-pretraining-shards' input cut into pieces, each tokenized into a token store of its own
// (tokenize_documents.h) and then moved into the one store in order. The cut depends only on the
// inputs (their files, sizes and manifest counts) and the piece size, never on the number of ranks:
// under mpirun each rank takes a contiguous run of pieces and reads only their files, and a
// resumed run, at any rank count, keeps every piece finished before and continues the others from
// their checkpoints.
//
// A piece is about `piece_bytes` of input as stored (compressed files count as they are on disk).
// A document-shard directory whose manifest counts each file's documents is cut at file
// boundaries, and a file larger than a piece at document boundaries in proportion (documents are
// assumed about equally long); any other input (a JSON lines or wikiextractor file, a text-format
// file) is cut only at its start, so a single uncounted file is one piece (shard it first, e.g.
// `shard-tool import-docs`, to spread it over ranks).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "datagen/shards/text_documents.h"

namespace pretrain {

struct InputPiece {
  InputPosition begin, end;  // the documents that begin in [begin, end)
  uint64_t bytes = 0;        // of input, about
  nlohmann::json to_json() const;
};

inline constexpr uint64_t kDefaultPieceBytes = uint64_t{64} << 20;

// The pieces of the reader's units, in input order, covering every document once.
std::vector<InputPiece> plan_input_pieces(const std::vector<TextDocumentReader::Unit>& units, uint64_t piece_bytes);

// The pieces [first, second) that rank `rank` of `ranks` tokenizes: those whose middle byte falls
// in its 1/ranks of the input, so that the runs are contiguous and about equally large.
std::pair<size_t, size_t> pieces_of_rank(const std::vector<InputPiece>& pieces, int rank, int ranks);

}  // namespace pretrain
