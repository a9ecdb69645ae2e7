// dedup's inputs: any number of sources (-i), each a directory of document shards with
// manifest.json (formats/doc_shards.h), another directory (wikiextractor's AA/wiki_00 …, every file
// in it, sorted), files or globs. A source is cut into its files, the unit of work of every stage:
// one signature file, one output shard and one report part each. Documents are numbered in input
// order: sources in the order given, then their files (manifest order, else sorted), then records.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pretrain {

struct DedupInputFile {
  int source = 0;            // index into the sources as given
  std::string source_name;   // the -i argument as given
  std::string path;
  uint64_t bytes = 0;        // its size: from its manifest, else when planned
  int64_t expected_records = -1;  // from a manifest; -1: unknown
  std::string manifest_xxh3;      // from a manifest; "": none
};

// The files of the sources, in input order. Throws Error naming a manifest that cannot be read
// or is not of document shards, and UsageError for a source that matches nothing.
std::vector<DedupInputFile> plan_dedup_inputs(const std::vector<std::string>& sources);

// Checks a file against its manifest (size, xxh3) and returns its identity for checkpoints:
// xxh3 of its path, size and content hash. Throws Error naming the file and what differs.
uint64_t verify_dedup_input(const DedupInputFile& file);

}  // namespace pretrain
