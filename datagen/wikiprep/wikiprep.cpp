// The orchestrator: checks the options and runs the stages (wikiprep.h lists them) in one process,
// or hands the run to the ranks' driver under mpirun.
#include "datagen/wikiprep/wikiprep.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>

#include "common/cli.h"
#include "common/communicator.h"
#include "common/file.h"
#include "common/log.h"
#include "common/manifest.h"
#include "datagen/wikiprep/document_shard_names.h"
#include "datagen/wikiprep/document_shard_sinks.h"
#include "datagen/wikiprep/page_pipeline.h"
#include "datagen/wikiprep/rank_parts.h"
#include "datagen/wikiprep/resume_point.h"
#include "datagen/wikiprep/wikiprep_manifest.h"
#include "datagen/wikiprep/wikiprep_ranks.h"
#include "formats/bz2_parallel.h"

namespace pretrain {
namespace {

void check_options(const WikiprepOptions& o) {
  if (o.input.empty()) throw UsageError("no input dump given");
  if (o.output_dir.empty()) throw UsageError("no output directory given (-o DIR)");
  if (o.shard_bytes == 0) throw UsageError("--shard-bytes must be positive");
  if (o.namespaces.empty()) throw UsageError("--namespaces needs at least one namespace");
}

// A run that ends in an error: bad input leaves what came before the damage whole, so it is
// committed (the open shard, and a checkpoint that says how far the run got, complete=false), and
// --resume goes on from there. A failure to write (a full disk, a file-size limit) is not the
// input's: the open shard is left as a kill leaves it, and the last checkpoint stays the resume
// point. Committing it would put a part of a shard under its finished name, and if the manifest
// then fit, --resume would go on after that short shard with the shards cut apart from where the
// uninterrupted run cuts them. An interruption (WikiprepInterrupted) commits nothing, as a kill.
[[noreturn]] void end_with_error(const WikiprepOptions& o, const PipelineResult& result, ShardSink& sink,
                                 const Manifest& base, const ResumePoint& resume) {
  std::exception_ptr error = result.write_error ? result.write_error : result.read_error;
  bool interrupted = false;
  try {
    std::rethrow_exception(error);
  } catch (const WikiprepInterrupted&) {
    interrupted = true;
  } catch (...) {
  }
  if (!interrupted && !result.write_error) {
    const WikiprepCounts& counts = result.totals.counts;
    try {
      sink.close_shard();
      write_checkpoint(o.output_dir, base, resume.kept, sink.shards(), counts);
      if (counts.pages_seen > 0)
        log_warn("wrote ", counts.articles_written, " articles from the ", counts.pages_seen,
                 " pages before the error; ", o.output_dir, "/", kManifestName, " says complete=false");
    } catch (const std::exception& e) {
      log_error("could not commit the last shard after the error: ", e.what());
    }
  }
  std::rethrow_exception(error);
}

// One process: the whole dump through the pipeline into the shards, a checkpoint after each.
WikiprepStats run_one_process(const WikiprepOptions& o) {
  auto start = std::chrono::steady_clock::now();
  const DirLock lock(o.output_dir);  // one run per directory, for all of it
  Bz2ReaderOptions reader_options;
  reader_options.threads = std::max(1, max_threads());
  reader_options.read_size = 4u << 20;  // plain input: 4 MB pieces keep batches small
  Bz2Reader reader(o.input, reader_options);
  const Manifest base = wikiprep_base_manifest(o, reader.compressed_size());
  ResumePoint resume;
  if (o.resume) {
    resume = load_resume_point(o, base);
    if (resume.finished) return *resume.finished;
  } else {
    remove_wikiprep_shards_from(o.output_dir, o.format, 0);
  }

  std::unique_ptr<ShardSink> sink = open_shard_sink(o, resume.kept.size());
  write_checkpoint(o.output_dir, base, resume.kept, sink->shards(), resume.baseline);
  PipelineSetup setup;
  setup.baseline = resume.baseline;
  setup.skip_pages = resume.skip_pages;
  setup.shard_committed = [&](const WikiprepCounts& at) {
    write_checkpoint(o.output_dir, base, resume.kept, sink->shards(), at);
    uint64_t shards = resume.kept.size() + sink->shards().size();
    if (o.stop_after_shards && shards >= o.stop_after_shards)
      throw WikiprepInterrupted(cat("stopped after ", shards, " shards (--stop-after-shards)"));
  };
  const PipelineResult result = run_page_pipeline(o, reader, *sink, setup);
  if (result.read_error || result.write_error) end_with_error(o, result, *sink, base, resume);

  Manifest m = sink->finish(base_with_kept_shards(base, resume.kept, resume.baseline));
  WikiprepStats stats = write_complete_manifest(o.output_dir, std::move(m), result.totals, resume.skip_pages,
                                                reader.is_bz2(), start);
  remove_rank_parts(o.output_dir);  // an interrupted mpirun run's, now of no use
  log_wikiprep_summary(stats, o.min_chars);
  return stats;
}

}  // namespace

WikiprepStats run_wikiprep(const WikiprepOptions& options) {
  check_options(options);
  const Communicator& world = Communicator::world();
  return world.distributed() ? run_wikiprep_ranks(options, world) : run_one_process(options);
}

}  // namespace pretrain
