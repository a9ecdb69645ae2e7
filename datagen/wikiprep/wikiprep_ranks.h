// wikiprep under mpirun: the ranks share the dump and write the shards one process would.
//
// 1. Rank r reads bytes [r·size/N, (r+1)·size/N) of the dump (a bz2 range from its first block;
//    page_range.h says which pages are its own) through the usual pipeline (page_pipeline.h), and
//    writes its documents into its part files (rank_parts.h), the summary last to mark the part
//    done (a --resume at the same N keeps done parts).
// 2. The --shard-bytes rule runs over the documents' sizes from rank to rank (rank_shard_plan.h),
//    so every rank knows where the shards start; each rank writes the shards that start in its
//    part (reading on into the next parts for the last one) with the same sink and rule as one
//    process.
// 3. Rank 0 gathers the counts and shard lists and writes the manifest, as one process would.
// A rank that fails ends the job (wikiprep_main aborts it); the manifest says complete=false
// until the end, and shards are always written again (the parts are the checkpoints).
#pragma once
#include "common/communicator.h"
#include "datagen/wikiprep/wikiprep.h"

namespace pretrain {

// The stats on rank 0 (the other ranks': empty). The options are checked (run_wikiprep).
WikiprepStats run_wikiprep_ranks(const WikiprepOptions& o, const Communicator& world);

}  // namespace pretrain
