// wikiprep: a MediaWiki dump → clean document shards (or BERT sentence text). The work is in
// run_wikiprep() (wikiprep.h lists its stages); this maps the command line onto WikiprepOptions.
#include <cstdio>

#include "common/cli.h"
#include "common/comm_watchdog.h"
#include "common/communicator.h"
#include "common/log.h"
#include "datagen/wikiprep/wikiprep.h"

int main(int argc, char** argv) {
  using namespace pretrain;
  CLI::App app{"Wikipedia/MediaWiki XML dump (.xml.bz2 single or multistream, .xml, or - for stdin) → "
               "clean documents in docs-NNNNN.jsonl.zst shards with manifest.json, or Google BERT's "
               "one-sentence-per-line text (--format sentences)",
               "wikiprep"};
  ToolOptions common(app);
  WikiprepOptions options;
  std::string format = "jsonl";
  app.add_option("dump", options.input, "the dump: .xml.bz2, .xml, or - for stdin")->required();
  app.add_option("-o,--output", options.output_dir, "output directory (created when missing)")->required();
  app.add_option("--format", format, "jsonl: {id,url,title,text} JSON lines, zstd; sentences: plain text, "
                                     "one sentence per line, a blank line between documents")
      ->check(CLI::IsMember({"jsonl", "sentences"}))
      ->capture_default_str();
  app.add_option("--shard-bytes", options.shard_bytes, "uncompressed bytes per shard")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--namespaces", options.namespaces, "namespaces to keep, comma-separated (0: articles)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag("--keep-redirects", options.keep_redirects, "write redirect pages too (with empty text)");
  app.add_option("--min-chars", options.min_chars, "drop articles whose clean text has fewer characters")
      ->capture_default_str();
  app.add_option("--zstd-level", options.zstd_level, "zstd level of jsonl shards")
      ->check(CLI::Range(1, 19))
      ->capture_default_str();
  app.add_flag("--resume", options.resume,
               "continue an interrupted run in the output directory (same input and options)");
  double comm_timeout = kCommTimeoutDatagen;
  add_comm_timeout_option(app, comm_timeout);
  // For tests: exit as a kill would once this many shards are committed.
  app.add_option("--stop-after-shards", options.stop_after_shards)->group("");
  for (int i = 1; i < argc; ++i) options.args.emplace_back(argv[i]);
  return run_tool(app, argc, argv, [&] {
    options.format = format == "sentences" ? WikiprepFormat::sentences : WikiprepFormat::jsonl;
    // Under mpirun the ranks share the dump (wikiprep_ranks.h); rank 0 speaks for them.
    comm_watchdog().set_timeout(comm_timeout);
    const Communicator& world = Communicator::world();
    if (world.rank() != 0) set_log_level(LogLevel::warn);
    try {
      run_wikiprep(options);
    } catch (const std::exception& e) {
      if (!world.distributed()) throw;
      // The others would wait for this rank in their next collective forever.
      std::fprintf(stderr, "error: rank %d of %d: %s\n", world.rank(), world.size(), e.what());
      world.abort(dynamic_cast<const UsageError*>(&e) ? 2 : 1);
    }
    return 0;
  });
}
