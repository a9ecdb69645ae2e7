// make-pretraining-shards: documents → BERT HDF5 or GPT Megatron/llm.c shards. The work is in the
// stages make_shards.h lists; this maps the command line onto MakeShardsOptions. Under mpirun the
// ranks share the stages (make_shards.h); a rank that fails ends the job, naming itself.
#include <cstdio>

#include "common/cli.h"
#include "common/comm_watchdog.h"
#include "common/communicator.h"
#include "common/log.h"
#include "datagen/shards/make_shards.h"

int main(int argc, char** argv) {
  using namespace pretrain;
  CLI::App app{"Tokenized, masked pretraining shards from documents: BERT (NSP + masked LM, NVIDIA's HDF5 "
               "layout, Google's algorithm) or GPT (Megatron .bin/.idx or llm.c .bin)",
               "make-pretraining-shards"};
  ToolOptions common(app);
  MakeShardsOptions o;
  std::string model = "bert", rng = "counter", format = "megatron";
  bool lowercase = false;
  app.add_option("--model", model, "bert or gpt")->check(CLI::IsMember({"bert", "gpt"}))->capture_default_str();
  app.add_option("-i,--input", o.inputs,
                 "document shards (directory with manifest.json, .jsonl[.gz|.zst|.bz2], wikiextractor output) or "
                 "Google's text format (*.txt[.gz|.zst|.bz2]: one sentence per line, blank line between documents); "
                 "globs allowed")
      ->required();
  app.add_option("--tokenizer", o.tokenizer, "vocab.txt, GPT-2 encoder.json/vocab.bpe, .model or tokenizer.json")
      ->required();
  app.add_option("-o,--output", o.output_dir, "output directory (valid split in <output>/valid)")->required();
  app.add_option("--seq-len", o.bert.seq_len, "BERT: max_seq_length")->capture_default_str();
  app.add_option("--max-predictions", o.bert.max_predictions, "BERT: max_predictions_per_seq")->capture_default_str();
  app.add_option("--masked-lm-prob", o.bert.masked_lm_prob, "BERT: masked LM probability")->capture_default_str();
  app.add_option("--short-seq-prob", o.bert.short_seq_prob, "BERT: probability of a shorter target length")
      ->capture_default_str();
  app.add_option("--dupe-factor", o.dupe_factor, "BERT: passes over the data, each with other masks")
      ->capture_default_str();
  app.add_option("--compression-level", o.compression_level,
                 "BERT: gzip level of the HDF5 chunks, 0-9, on zlib's scale (deflated by libdeflate at the same level: "
                 "1 makes files about NVIDIA's size, zlib's level 4, at a third of zlib's CPU time; 6 a few % smaller "
                 "for ~3x the time); the records are the same at any level")
      ->check(CLI::Range(0, 9))
      ->capture_default_str();
  app.add_flag("--whole-word-mask", o.bert.whole_word_mask, "BERT: mask whole words (all ## pieces together)");
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  app.add_option("--rng", rng,
                 "counter: per-document streams, parallel, same bytes at any --threads; python: CPython's "
                 "Mersenne Twister, sequential, equal to create_pretraining_data.py")
      ->check(CLI::IsMember({"counter", "python"}))
      ->capture_default_str();
  app.add_option("--num-shards", o.num_shards, "output shards (equal record counts ±1); with --bin-size, per bin")
      ->capture_default_str();
  app.add_option("--bin-size", o.bin_size,
                 "BERT: LDDL's sequence-length bins of this width (must divide --seq-len): bin-NN/ shard sets "
                 "padded to each bin's upper length; 0: no bins")
      ->capture_default_str();
  app.add_flag("--pack", o.pack,
               "BERT: pack several instances into each --seq-len row, first-fit decreasing (extra datasets say "
               "where each instance is; not with --bin-size)");
  app.add_option("--max-pack", o.max_pack,
                 cat("BERT --pack: at most this many instances per row, 1-127 (default ", kDefaultMaxPack, ")"));
  app.add_option("--valid-fraction", o.valid_fraction, "share of documents held out into <output>/valid")
      ->capture_default_str();
  app.add_option("--format", format, "GPT: megatron (.bin/.idx) or llmc (llm.c .bin)")
      ->check(CLI::IsMember({"megatron", "llmc"}))
      ->capture_default_str();
  app.add_option("--lang", o.lang, "language for sentence splitting of document inputs")->capture_default_str();
  // A plain bool and count(): CLI11 sets an absent flag's std::optional<bool> to false.
  auto* lowercase_flag =
      app.add_flag("--lowercase,!--no-lowercase", lowercase, "WordPiece: lowercase (default: from the vocabulary)");
  app.add_flag("--python-compat", o.tokenizer_options.python_compat,
               "WordPiece: tokenize as Google's Python tokenizer where it differs from HF's fast one");
  app.add_flag("--resume", o.resume, "continue an interrupted run in the output directory (same inputs and options)");
  app.add_flag("--keep-work", o.keep_work,
               "keep <output>/.work (token store, spill and GPT buckets) whole; by default each work file is freed "
               "once the stages after it are done, so the disk holds about the output at its peak");
  double comm_timeout = kCommTimeoutDatagen;
  add_comm_timeout_option(app, comm_timeout);
  app.add_option("--stop-after-shards", o.stop_after_shards)->group("");  // tests: stop as a kill would
  app.add_option("--checkpoint-bytes", o.checkpoint_bytes)->group("");    // tests: tokenize checkpoints this often
  app.add_option("--store-budget-bytes", o.store_resident_budget)->group("");  // tests: the store's RSS budget
  app.add_option("--piece-bytes", o.piece_bytes)->group("");            // tests: the input's pieces
  app.add_option("--move-chunk-bytes", o.move_chunk_bytes)->group("");  // tests: chunks moved between work files
  for (int i = 1; i < argc; ++i) o.args.emplace_back(argv[i]);
  return run_tool(app, argc, argv, [&] {
    o.model = parse_model_kind(model, "--model");
    o.rng = rng == "python" ? ShardRng::python : ShardRng::counter;
    o.gpt_format = format == "llmc" ? GptFormat::llmc : GptFormat::megatron;
    if (lowercase_flag->count() > 0) o.tokenizer_options.lowercase = lowercase;
    comm_watchdog().set_timeout(comm_timeout);
    const Communicator& world = Communicator::world();
    if (world.rank() != 0) set_log_level(LogLevel::warn);
    MakeShardsStats s;
    try {
      s = run_make_shards(o);
    } catch (const std::exception& e) {
      if (!world.distributed()) throw;
      // The others would wait for this rank in their next collective forever.
      std::fprintf(stderr, "error: rank %d of %d: %s\n", world.rank(), world.size(), e.what());
      world.abort(dynamic_cast<const UsageError*>(&e) ? 2 : 1);
    }
    if (world.rank() != 0) return 0;
    log_info(cat("wrote ", s.shards, " shard(s) to ", o.output_dir, ": ", s.instances, " train and ",
                 s.valid_instances, " valid ", o.model == ModelKind::bert ? "instances" : "documents", " in ",
                 s.seconds, " s"));
    std::printf("%s\n", s.to_json(o.model == ModelKind::bert ? o.bert.seq_len : 0).dump(2).c_str());
    return 0;
  });
}
