// dedup: exact and near-duplicate removal over document shards. The work is in the stages dedup.h
// lists; this maps the command line onto DedupOptions. Under mpirun the ranks share the stages; a
// rank that fails ends the job, naming itself.
#include <cstdio>

#include "common/cli.h"
#include "common/communicator.h"
#include "common/log.h"
#include "datagen/dedup/dedup.h"

int main(int argc, char** argv) {
  using namespace pretrain;
  CLI::App app{"Exact and near-duplicate (MinHash LSH) removal over document shards: the kept documents as "
               "document shards with a manifest, and a report of every removed document and the one it duplicates",
               "dedup"};
  ToolOptions common(app);
  DedupOptions o;
  bool nfc = true, fold_whitespace = true, near = true;
  app.add_option("-i,--input", o.inputs,
                 "sources, in the order that numbers documents: document shard directories (manifest.json), "
                 "wikiextractor output, .jsonl[.zst|.bz2] files or globs")
      ->required();
  app.add_option("-o,--output", o.output_dir, "output directory: docs-NNNNN.jsonl.zst, manifest.json, dedup-report.jsonl")
      ->required();
  app.add_flag("--nfc,!--no-nfc", nfc, "exact: NFC-normalize the text before hashing (default: on)");
  app.add_flag("--fold-whitespace,!--no-fold-whitespace", fold_whitespace,
               "exact: each run of whitespace becomes one space, none at the ends (default: on)");
  app.add_flag("--fold-case", o.sign.exact.fold_case, "exact: Unicode case folding before hashing (default: off)");
  app.add_flag("--near,!--no-near", near, "near duplicates by MinHash LSH (default: on; --no-near: exact only)");
  app.add_option("--ngram", o.sign.minhash.ngram, "words per shingle")->capture_default_str();
  app.add_option("--bands", o.sign.minhash.bands, "LSH bands (datatrove's num_buckets)")->capture_default_str();
  app.add_option("--rows", o.sign.minhash.rows, "hashes per band (datatrove's hashes_per_bucket)")->capture_default_str();
  app.add_option("--seed", o.sign.minhash.seed, "seed of the MinHash functions")->capture_default_str();
  app.add_option("--jaccard-threshold", o.jaccard_threshold,
                 "join a candidate pair only when its signatures estimate at least this Jaccard similarity (0: join "
                 "every candidate, as datatrove does)")
      ->capture_default_str();
  app.add_option("--zstd-level", o.zstd_level, "zstd level of the output shards, 1-19")->capture_default_str();
  app.add_flag("--resume", o.resume, "continue an interrupted run in the output directory (same inputs and options)");
  app.add_flag("--keep-work", o.keep_work, "keep <output>/.work (signatures, clusters, report parts)");
  app.add_option("--kill-after-checkpoints", o.kill_after_checkpoints)->group("");  // tests: SIGKILL after N checkpoints
  for (int i = 1; i < argc; ++i) o.args.emplace_back(argv[i]);
  return run_tool(app, argc, argv, [&] {
    o.sign.exact.nfc = nfc;
    o.sign.exact.fold_whitespace = fold_whitespace;
    o.sign.near = near;
    const Communicator& world = Communicator::world();
    if (world.rank() != 0) set_log_level(LogLevel::warn);
    DedupStats s;
    try {
      s = run_dedup(o);
    } catch (const std::exception& e) {
      if (!world.distributed()) throw;
      // The others would wait for this rank in their next collective forever.
      std::fprintf(stderr, "error: rank %d of %d: %s\n", world.rank(), world.size(), e.what());
      world.abort(dynamic_cast<const UsageError*>(&e) ? 2 : 1);
    }
    if (world.rank() != 0) return 0;
    log_info(cat("kept ", s.kept, " of ", s.documents, " documents (removed ", s.removed_exact, " exact and ",
                 s.removed_near, " near duplicates in ", s.clusters, " clusters) into ", s.output_shards,
                 " shard(s) in ", o.output_dir, " in ", s.seconds, " s"));
    std::printf("%s\n", s.to_json().dump(2).c_str());
    return 0;
  });
}
