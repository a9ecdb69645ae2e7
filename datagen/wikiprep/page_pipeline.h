// wikiprep's pipeline, one oneTBB parallel_pipeline: bz2 blocks decoded in parallel (Bz2Reader)
// → pages parsed in order (XmlPageReader; a batch is the pages one decoded piece completes) →
// pages cleaned in parallel (one shared WikitextCleaner; --format sentences: a SentenceSplitter
// per thread) → documents handed to a shard sink and counted, page by page in dump order. Output
// depends only on the dump's pages, never on thread count or timing, so any --threads gives
// byte-identical shards. Memory is bounded by the pipeline's tokens, whatever the dump's size.
//
// An error does not escape: bad input (corrupt bz2, malformed XML, a dump cut inside a page) ends
// the reading, and what was read before it is still cleaned and handed over; a failure to write
// (or a checkpoint's WikiprepInterrupted) stops everything. The result says which, and the
// drivers (wikiprep.cpp, wikiprep_ranks.h) decide what is committed.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include "datagen/wikiprep/document_shard_sinks.h"
#include "datagen/wikiprep/wikiprep.h"
#include "datagen/wikiprep/wikiprep_manifest.h"
#include "formats/bz2_parallel.h"

namespace pretrain {

// mpirun: one rank's share of the dump (page_range.h says which pages are its own).
struct DumpShare {
  int rank = 0;
  uint64_t begin = 0, end = 0;  // the share's bytes of the dump file: [begin, end)
  std::string head;             // the dump's head (dump_head()), for every rank but the first
  uint64_t dump_size = 0;       // the whole file's
  bool bz2 = false;             // whether the dump is bz2
};

struct PipelineSetup {
  WikiprepCounts baseline;  // --resume: the counts at the end of the kept shards
  uint64_t skip_pages = 0;  // --resume: the pages those shards hold, read again but not cleaned
  // After each shard the sink commits, in dump order, with the counts at its end (every page
  // before the document that started the next shard): the checkpoint. What it throws stops the
  // run as a failure to write does.
  std::function<void(const WikiprepCounts&)> shard_committed;
  const DumpShare* share = nullptr;  // mpirun: this rank's share; null: the whole input
};

struct PipelineResult {
  // The counts go on from the baseline; the bytes and warnings are this run's. xml_bytes under
  // mpirun: the decoded bytes of the share's range (PageRangeFeeder::range_bytes).
  WikiprepTotals totals;
  std::exception_ptr read_error;   // bad input: the pages before it were all handed over
  std::exception_ptr write_error;  // the sink's or shard_committed's: the run stopped there
};

// Reads `reader` to its end (a share: to the end of its pages) into `sink`.
PipelineResult run_page_pipeline(const WikiprepOptions& o, Bz2Reader& reader, ShardSink& sink, const PipelineSetup& setup);

}  // namespace pretrain
