// --resume of one process: where an interrupted run goes on. The manifest's checkpoint
// (wikiprep_manifest.h: complete=false, extra.resume) lists the shards that hold exactly the
// documents of the dump's first pages_seen pages; a resumed run checks that the input and options
// are the ones recorded and that those shards verify (xxh3), keeps them, removes any later shard
// file, and goes on after those pages from the next shard number. Shard rotation depends only on
// content, so the result equals an uninterrupted run.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "common/manifest.h"
#include "datagen/wikiprep/wikiprep.h"

namespace pretrain {

struct ResumePoint {
  std::optional<WikiprepStats> finished;  // the run is already complete: its counts (shards verified)
  std::vector<ShardEntry> kept;           // the shards of the run resumed
  WikiprepCounts baseline;                // the counts at their end
  uint64_t skip_pages = 0;                // the pages they hold
};

// Reads o.output_dir's manifest (none: a start from the beginning, with this format's shard files
// removed). `base`: the manifest this run would write (wikiprep_base_manifest), whose input it
// compares. Throws UsageError when the format, the options or the input differ from the run's
// that wrote it, and Error naming the shard when a kept one does not verify.
ResumePoint load_resume_point(const WikiprepOptions& o, const Manifest& base);

}  // namespace pretrain
