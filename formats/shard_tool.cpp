// shard-tool: look at, check and convert the files every stage writes.
//   inspect FILE|DIR…          kind, counts, dtypes, sizes, the first records
//   verify DIR…                every shard against manifest.json (size, xxh3, records); every bin of a
//                              binned split; every row of a packed BERT shard
//   convert --to megatron|llmc IN OUT
//   import-docs INPUT… -o DIR  wikiextractor output / JSON lines → our zstd document shards
//   stats SET                  corpus statistics of one set of shards (shard_stats.h): tables, JSON
#include "formats/shard_tool.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>

#include "common/common.h"
#include "common/json_integer.h"
#include "formats/bert_hdf5.h"
#include "formats/doc_shards.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "formats/shard_stats.h"

namespace pretrain {

enum class ShardKind { bert_hdf5, megatron, llmc, docs, manifest };

static const char* kind_name(ShardKind k) {
  switch (k) {
    case ShardKind::bert_hdf5: return kFormatBertHdf5;
    case ShardKind::megatron: return kFormatMegatron;
    case ShardKind::llmc: return kFormatLlmc;
    case ShardKind::docs: return kFormatDocs;
    case ShardKind::manifest: return "manifest";
  }
  return "?";
}

// By content, not name: HDF5 signature, MMIDIDX, llm.c magic; else documents (the doc reader
// recognises plain, zstd and bz2 itself and reports what it cannot read).
static ShardKind detect_kind(const std::string& path) {
  if (base_name(path) == kManifestName) return ShardKind::manifest;
  std::string head;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      // A Megatron prefix names no file itself.
      if (file_exists(megatron_idx_path(path))) return ShardKind::megatron;
      throw Error(Where{path}, "cannot open");
    }
    head.resize(16);
    in.read(head.data(), 16);
    head.resize(static_cast<size_t>(in.gcount()));
  }
  if (head.rfind("\x89HDF\r\n\x1a\n", 0) == 0) return ShardKind::bert_hdf5;
  if (head.size() >= 9 && std::memcmp(head.data(), kMegatronMagic, 9) == 0) return ShardKind::megatron;
  if (head.size() >= 4) {  // before the .bin-with-.idx test: llm.c shards end in .bin too
    int32_t magic;
    std::memcpy(&magic, head.data(), 4);
    if (magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3) return ShardKind::llmc;
  }
  if (path.ends_with(".bin") && file_exists(megatron_idx_path(megatron_prefix(path)))) return ShardKind::megatron;
  return ShardKind::docs;
}

static ShardKind kind_of_format(const std::string& format, const std::string& manifest) {
  if (format == kFormatBertHdf5) return ShardKind::bert_hdf5;
  if (format == kFormatMegatron) return ShardKind::megatron;
  if (format == kFormatLlmc) return ShardKind::llmc;
  if (format == kFormatDocs) return ShardKind::docs;
  throw Error(Where{manifest}, cat("unknown format '", format, "'"));
}

static uint64_t count_records(ShardKind kind, const std::string& path) {
  switch (kind) {
    case ShardKind::bert_hdf5: return count_bert_records(path);
    case ShardKind::megatron: return count_megatron_records(path);
    case ShardKind::llmc: return count_llmc_tokens(path);
    case ShardKind::docs: return count_doc_records(path);
    case ShardKind::manifest: break;
  }
  throw Error(Where{path}, "not a shard");
}

// A BERT shard's records, and for a packed one (the manifest's extra.max_pack) every row's
// invariants: a trainer would attend across instances or score the wrong [CLS] without a word.
static uint64_t verify_bert_records(const std::string& path, int64_t max_pack) {
  BertShardReader reader(path);
  if (reader.max_pack() != max_pack)
    throw Error(Where{path}, cat("shard has max_pack ", reader.max_pack(), ", the manifest's extra.max_pack says ",
                                 max_pack, " (0: not packed)"));
  if (max_pack == 0) return static_cast<uint64_t>(reader.size());
  constexpr int64_t kRows = 4096;
  BertBatch batch;
  for (int64_t begin = 0; begin < reader.size(); begin += kRows) {
    reader.read_range(begin, std::min(kRows, reader.size() - begin), batch);
    for (int64_t i = 0; i < batch.size; ++i)
      if (std::string why = packed_row_problem(batch, i); !why.empty())
        throw Error(Where::at_record(path, begin + i), cat("packed row: ", why));
  }
  return static_cast<uint64_t>(reader.size());
}

static void inspect_manifest(const std::string& path, std::ostream& out) {
  Manifest m = Manifest::read(path);
  out << path << ": manifest, format " << m.format << " v" << m.version << (m.complete ? "" : " (INCOMPLETE)")
      << ", " << m.shards.size() << " shards, " << m.total_records() << " records\n";
  if (!m.tool.empty()) out << "  made by: " << m.tool << (m.seed ? cat(", seed ", *m.seed) : "") << "\n";
  if (!m.tokenizer.kind.empty())
    out << "  tokenizer: " << m.tokenizer.kind << ", vocab " << m.tokenizer.vocab_size << ", hash "
        << m.tokenizer.vocab_hash << "\n";
  if (m.seq_len) out << "  seq_len: " << m.seq_len << "\n";
  uint64_t bytes = 0;
  for (const ShardEntry& s : m.shards) bytes += s.bytes;
  out << "  bytes: " << bytes << " (" << human_bytes(static_cast<double>(bytes)) << ")\n";
  size_t shown = 0;
  for (const ShardEntry& s : m.shards) {
    if (++shown > 10) {
      out << "  … " << m.shards.size() - 10 << " more\n";
      break;
    }
    out << "  " << s.file << "  records " << s.records << "  bytes " << s.bytes << "  xxh3 " << s.xxh3 << "\n";
  }
  if (!m.stats.empty()) out << "  stats: " << m.stats.dump() << "\n";
}

static void inspect_one(const std::string& path, int records, std::ostream& out) {
  std::string target = path;
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    target = path_join(path, kManifestName);
    if (!file_exists(target)) throw Error(Where{path}, "a directory without manifest.json: name a file to inspect");
  }
  switch (detect_kind(target)) {
    case ShardKind::manifest: inspect_manifest(target, out); break;
    case ShardKind::bert_hdf5: inspect_bert_shard(target, out, records); break;
    case ShardKind::megatron: inspect_megatron(target, out, records); break;
    case ShardKind::llmc: inspect_llmc(target, out, records); break;
    case ShardKind::docs: inspect_docs(target, out, records); break;
  }
}

// Returns the number of bad files (0: all good).
static int verify_dir(const std::string& dir, std::ostream& out);

// A binned BERT split (make-pretraining-shards --bin-size): each bin it lists is a shard set of
// its own, which must verify and hold the records and length the split's manifest gives it.
static int verify_bins(const Manifest& m, const std::string& manifest_path, std::ostream& out) {
  const std::string root = dir_name(manifest_path);
  if (!m.complete) {
    out << "BAD " << manifest_path << ": the run that wrote these bins did not finish (complete = false)\n";
    return 1;
  }
  int bad = 0;
  uint64_t records = 0;
  const std::vector<ManifestBin> bins = manifest_bins(m, manifest_path);
  for (const ManifestBin& bin : bins) {
    const std::string bin_dir = path_join(root, bin.dir);
    bad += verify_dir(bin_dir, out);
    const Manifest b = Manifest::read(path_join(bin_dir, kManifestName));
    if (const std::string why = bin.mismatch(b); !why.empty()) {
      out << "BAD " << bin_dir << ": " << why << " (" << manifest_path << ")\n";
      ++bad;
    }
    records += b.total_records();
  }
  if (bad == 0) out << "ok " << manifest_path << ": " << bins.size() << " length bins of BERT shards, " << records << " records\n";
  return bad;
}

static int verify_dir(const std::string& dir, std::ostream& out) {
  std::string manifest_path = path_join(dir, kManifestName);
  if (std::error_code ec; !std::filesystem::is_directory(dir, ec) && base_name(dir) == kManifestName) {
    manifest_path = dir;
  }
  std::string root = dir_name(manifest_path);
  Manifest m = Manifest::read(manifest_path);
  if (m.format == kFormatBertHdf5Binned) return verify_bins(m, manifest_path, out);
  ShardKind kind = kind_of_format(m.format, manifest_path);
  const int64_t max_pack = json_integer_or<int64_t>(m.extra, "max_pack", 0);
  std::vector<VerifyProblem> problems = verify_manifest(m, root, [&](const std::string& p) {
    return kind == ShardKind::bert_hdf5 ? verify_bert_records(p, max_pack) : count_records(kind, p);
  });
  for (const VerifyProblem& p : problems) out << "BAD " << path_join(root, p.file) << ": " << p.message << "\n";
  if (problems.empty())
    out << "ok " << manifest_path << ": " << m.shards.size() << " " << kind_name(kind) << " shards, "
        << m.total_records() << " records, sizes, xxh3 and record counts match"
        << (max_pack > 0 ? cat(", packed rows (up to ", max_pack, " instances) consistent") : "") << "\n";
  return static_cast<int>(problems.size());
}

// stats' one set: a directory with manifest.json, the manifest, or shard files (globs) of one kind.
static StatsInput stats_input(const std::vector<std::string>& given) {
  StatsInput in;
  for (const std::string& g : given) in.given += (in.given.empty() ? "" : " ") + g;
  if (given.size() == 1) {
    std::string manifest;
    if (std::error_code ec; std::filesystem::is_directory(given[0], ec)) {
      manifest = path_join(given[0], kManifestName);
      if (!file_exists(manifest)) throw Error(Where{given[0]}, "a directory without manifest.json: name its shard files");
    } else if (base_name(given[0]) == kManifestName) {
      manifest = given[0];
    }
    if (!manifest.empty()) {
      in.manifest = Manifest::read(manifest);
      in.manifest_path = manifest;
      in.format = in.manifest->format;
      return in;
    }
  }
  std::optional<ShardKind> kind;
  for (const std::string& g : given) {
    const bool exists = file_exists(g) || file_exists(megatron_idx_path(megatron_prefix(g)));
    for (const std::string& f : exists ? std::vector<std::string>{g} : expand_inputs({g})) {
      const ShardKind k = detect_kind(f);
      if (k == ShardKind::manifest) throw UsageError(Where{f}, "a manifest names a set of its own: give it alone");
      if (kind && k != *kind)
        throw UsageError(Where{f}, cat("a ", kind_name(k), " shard among ", kind_name(*kind), " ones: stats counts one kind at a time"));
      kind = k;
      // A Megatron shard once, whichever of its files or its prefix is named.
      const std::string file = k == ShardKind::megatron ? megatron_bin_path(megatron_prefix(f)) : f;
      if (std::find(in.files.begin(), in.files.end(), file) == in.files.end()) in.files.push_back(file);
    }
  }
  in.format = kind_name(*kind);
  return in;
}

int shard_tool_main(int argc, char** argv, const StatsTextTools& text_tools) {
  CLI::App app{"Inspect, verify, convert and count pretraining shards (BERT HDF5, Megatron .bin/.idx, llm.c .bin, "
               "document .jsonl.zst)",
               "shard-tool"};
  ToolOptions options(app);
  app.require_subcommand(1);

  std::vector<std::string> inspect_paths;
  int inspect_records = 3;
  CLI::App* inspect = app.add_subcommand("inspect", "kind, counts, dtypes, sizes and the first records of each file");
  inspect->add_option("files", inspect_paths, "shard files, Megatron prefixes, manifest.json or shard directories")->required();
  inspect->add_option("-n,--records", inspect_records, "records to show per file")->check(CLI::NonNegativeNumber);

  std::vector<std::string> verify_dirs;
  CLI::App* verify = app.add_subcommand("verify", "check every shard against its manifest: size, xxh3, record count");
  verify->add_option("dirs", verify_dirs, "directories holding manifest.json (or the manifest files)")->required();

  std::string convert_to, convert_in, convert_out;
  int64_t eot_id = kGpt2EotId, tokens_per_sequence = 0;
  bool trailing_eod = false;
  CLI::App* convert = app.add_subcommand("convert", "convert token shards between llm.c .bin and Megatron .bin/.idx");
  convert->add_option("--to", convert_to, "output kind")->required()->check(CLI::IsMember({"megatron", "llmc"}));
  convert->add_option("input", convert_in, "llm.c .bin file, or Megatron prefix (.bin/.idx)")->required();
  convert->add_option("output", convert_out, "Megatron output prefix, or llm.c output file")->required();
  convert->add_option("--eot", eot_id, "end-of-text id that starts each llm.c document (-1: none)");
  convert->add_option("--tokens-per-sequence", tokens_per_sequence,
                      "to megatron: cut documents into sequences of at most N tokens (0: one per document)");
  convert->add_flag("--trailing-eod", trailing_eod, "to llmc: Megatron documents end with EOD (preprocess_data.py --append-eod)");

  std::vector<std::string> import_inputs;
  std::string import_out;
  DocShardOptions doc_options;
  CLI::App* import_docs = app.add_subcommand(
      "import-docs", "read JSON lines / wikiextractor output (plain, zstd or bz2) and write zstd document shards + manifest");
  import_docs->add_option("inputs", import_inputs, "files, globs or directories")->required();
  import_docs->add_option("-o,--output", import_out, "output directory")->required();
  import_docs->add_option("--shard-bytes", doc_options.shard_bytes, "uncompressed bytes per shard");
  import_docs->add_option("--zstd-level", doc_options.zstd_level, "zstd level")->check(CLI::Range(1, 19));

  std::vector<std::string> stats_paths;
  ShardStatsOptions stats_options;
  std::string stats_json, stats_format = "table";
  CLI::App* stats = app.add_subcommand(
      "stats", "corpus statistics of one set of shards: counts, length histograms, [UNK] share or bytes per token, "
               "padding and what --bin-size or --pack would save; a table, or JSON (scripts/plot_stats.py plots it)");
  stats->add_option("set", stats_paths, "a directory with manifest.json, the manifest, or shard files of one kind")->required();
  stats->add_option("--json", stats_json, "write the statistics as JSON to this file too");
  stats->add_option("--format", stats_format, "what goes to stdout")->check(CLI::IsMember({"table", "json"}));
  stats->add_option("--bin-size", stats_options.bin_sizes,
                    "BERT: --bin-size cases to reckon, each dividing seq_len (default: 64 and 32 where they divide it)");
  stats->add_option("--max-pack", stats_options.max_pack, "BERT: the --pack case's instances per row")->check(CLI::Range(1, 127));
  stats->add_option("--dedup-report", stats_options.dedup_report,
                    "dedup's report (JSON Lines of removed documents): the duplicated share");
  stats->add_flag("!--no-sentences", stats_options.sentences, "documents: do not count sentences (the slowest statistic)");
  stats->add_option("--lang", stats_options.lang, "documents: the language of the sentence rules (default: the manifest's, else en)");
  stats->add_option("--tokenizer", stats_options.tokenizer,
                    "GPT: the tokenizer that made the shards, for bytes per token (default: the manifest's record)");
  stats->add_flag("!--no-verify", stats_options.verify, "skip the xxh3 of each shard (sizes and record counts are still checked)");

  return run_tool(app, argc, argv, [&]() -> int {
    if (*inspect) {
      bool first = true;
      for (const std::string& p : inspect_paths) {
        if (!first) std::cout << "\n";
        first = false;
        inspect_one(p, inspect_records, std::cout);
      }
      return 0;
    }
    if (*verify) {
      int bad = 0;
      for (const std::string& d : verify_dirs) bad += verify_dir(d, std::cout);
      if (bad) std::cerr << "error: " << bad << " bad file(s)\n";
      return bad ? 1 : 0;
    }
    if (*convert) {
      ConvertStats s;
      if (convert_to == "megatron") {
        LlmcToMegatronOptions o;
        o.eot_id = eot_id;
        o.tokens_per_sequence = tokens_per_sequence;
        s = convert_llmc_to_megatron(convert_in, convert_out, o);
      } else {
        MegatronToLlmcOptions o;
        o.eot_id = eot_id;
        o.trailing_eod = trailing_eod;
        s = convert_megatron_to_llmc(convert_in, convert_out, o);
      }
      log_info("converted ", s.tokens, " tokens, ", s.documents, " documents, ", s.sequences, " sequences -> ",
               convert_out);
      return 0;
    }
    if (*stats) {
      const nlohmann::ordered_json result = shard_stats(stats_input(stats_paths), stats_options, text_tools);
      if (!stats_json.empty()) write_file_atomic(stats_json, result.dump(1) + "\n");
      if (stats_format == "json") std::cout << result.dump(1) << "\n";
      else print_shard_stats(result, std::cout);
      return 0;
    }
    if (*import_docs) {
      doc_options.threads = std::max(1, max_threads());
      make_dirs(import_out);
      DocReader reader(import_inputs);
      DocShardWriter writer(import_out, doc_options);
      Progress progress("documents", 0);
      Document doc;
      while (reader.next(doc)) {
        writer.add(doc);
        progress.add(1);
      }
      progress.finish();
      Manifest base;
      base.tool = cat("shard-tool import-docs ", version_string());
      base.args.assign(argv + 1, argv + argc);
      base.stats["invalid_utf8_replaced_on_read"] = reader.invalid_utf8_replaced();
      Manifest m = writer.finish(base);
      log_info("wrote ", writer.documents(), " documents in ", m.shards.size(), " shard(s) to ", import_out);
      return 0;
    }
    return 2;
  });
}

}  // namespace pretrain
