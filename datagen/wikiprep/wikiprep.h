// wikiprep: a MediaWiki dump (.xml.bz2 single- or multistream, plain .xml, or "-" for stdin) →
// clean documents in size-rotated shards with a manifest (docs/architecture.md, "Documents").
//
//   format jsonl:      docs-00000.jsonl.zst …  {"id","url","title","text"} per line (DocShardWriter)
//   format sentences:  sentences-00000.txt …   Google BERT's input: one sentence per line, a blank
//                      line after each document (ICU sentence breaks, see tokenizer/sentences.h),
//                      written by SentenceTextWriter (formats/sentence_text.h)
//
// This is the tool's entry point; run_wikiprep() (wikiprep.cpp) checks the options and runs one
// process, or under mpirun the ranks' driver. Each stage is a module of its own:
//
//   page_pipeline.h          the dump → pages → clean documents, in parallel, into a sink in order
//                            (xml_pages.h reads the XML, wikitext.h cleans it)
//   document_shard_sinks.h   the documents → the format's shards, rotated at --shard-bytes
//   document_shard_names.h   the shards' names, and the removal of those a run writes again
//   wikiprep_manifest.h      manifest.json: the input and options, the counts, the checkpoint
//   resume_point.h           --resume: the kept shards and where the pages go on
//   wikiprep_ranks.h         mpirun: each rank's share of the dump into a part (rank_parts.h,
//                            page_range.h), the shards planned over the parts (rank_shard_plan.h)
//                            and written by the ranks they start in
//
// Output depends only on the dump's pages, never on thread or rank count or timing, so any
// --threads and any mpirun -np give byte-identical shards.
//
// Interruption and resume: after every committed shard, manifest.json is rewritten with
// complete=false and extra.resume = {pages_seen, shards}: the kept shards hold exactly the
// documents of the first pages_seen pages. `resume` verifies those shards (xxh3), checks the input
// and options are the ones recorded, re-reads the input skipping those pages without cleaning them,
// and goes on from shard index `shards`; shard rotation depends only on content, so the result
// equals an uninterrupted run. An error (corrupt bz2, malformed XML, truncated page) commits what
// was written before it, leaves complete=false, and throws. Under mpirun the ranks' finished parts
// are the checkpoints instead (wikiprep_ranks.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "datagen/wikiprep/document_shard_names.h"
#include "formats/doc_shards.h"

namespace pretrain {

struct WikiprepOptions {
  std::string input;       // dump path, or "-" for stdin
  std::string output_dir;  // created when missing
  WikiprepFormat format = WikiprepFormat::jsonl;
  uint64_t shard_bytes = DocShardOptions{}.shard_bytes;  // uncompressed bytes per shard
  std::vector<int64_t> namespaces = {0};       // pages in other namespaces are skipped
  bool keep_redirects = false;  // written with empty text, as wikiextractor writes them
  uint64_t min_chars = 0;       // articles whose clean text has fewer code points are dropped
  bool resume = false;
  int zstd_level = DocShardOptions{}.zstd_level;  // its comment says why
  std::vector<std::string> args;  // the command line, for the manifest
  // Tests only: after this many shards are committed (and the manifest says so), stop as a kill
  // would: throw WikiprepInterrupted without committing anything more. 0: never.
  uint64_t stop_after_shards = 0;
};

// What a run counts page by page, in page order; the manifest's checkpoint stores them, so a
// resumed run carries on from the counts of the shards it keeps.
struct WikiprepCounts {
  uint64_t pages_seen = 0;          // <page>s read (on resume: including the ones skipped)
  uint64_t articles_written = 0;    // documents in the shards
  uint64_t redirects_skipped = 0;   // redirects in a wanted namespace, without --keep-redirects
  uint64_t namespaces_skipped = 0;  // pages outside --namespaces
  uint64_t short_skipped = 0;       // articles under --min-chars
  uint64_t sentences = 0;           // --format sentences: lines written
  uint64_t text_bytes = 0;          // uncompressed output (JSON lines or sentence text)
  uint64_t invalid_utf8_replaced = 0;
};

struct WikiprepStats : WikiprepCounts {
  uint64_t bytes_in = 0;            // input bytes read (compressed, for bz2)
  uint64_t xml_bytes = 0;           // decoded XML bytes
  uint64_t bytes_out = 0;           // shard files on disk
  uint64_t shards = 0;
  uint64_t resumed_pages = 0;       // pages a resumed run found already written
  double seconds = 0;
  bool complete = false;
};

// The error a stop_after_shards run ends with (a stand-in for kill -9).
struct WikiprepInterrupted : Error {
  using Error::Error;
};

// Runs the whole conversion. Throws pretrain::Error on bad input (after committing what came
// before it) and UsageError on options that cannot work (a resume that does not match).
WikiprepStats run_wikiprep(const WikiprepOptions& options);

}  // namespace pretrain
