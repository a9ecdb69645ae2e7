#include "datagen/wikiprep/wikiprep_ranks.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <numeric>
#include <optional>

#include "common/cli.h"
#include "common/comm_watchdog.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "datagen/wikiprep/document_shard_names.h"
#include "datagen/wikiprep/document_shard_sinks.h"
#include "datagen/wikiprep/page_pipeline.h"
#include "datagen/wikiprep/page_range.h"
#include "datagen/wikiprep/rank_parts.h"
#include "datagen/wikiprep/rank_shard_plan.h"
#include "datagen/wikiprep/resume_point.h"
#include "datagen/wikiprep/wikiprep_manifest.h"
#include "datagen/wikiprep/xml_pages.h"
#include "formats/bz2_parallel.h"

namespace pretrain {
namespace {

using nlohmann::json;

// The dump's <siteinfo>, from its head alone.
SiteInfo site_of(const std::string& path) {
  std::string head = dump_head(path);
  if (head.empty()) return {};
  XmlPageReader xml(path, [](Page&&) {});
  xml.feed(head);
  xml.feed("</mediawiki>\n");
  xml.finish();
  return xml.siteinfo();
}

// Phase 1 of one rank: its share of the dump through the pipeline into its part. Returns the
// part's summary (also written as <part>.json, which marks the part done); `site`: the dump's, if
// the share had a page.
json make_part(const WikiprepOptions& o, const std::string& part, const json& key, const DumpShare& share,
               std::vector<uint64_t>& sizes, SiteInfo& site) {
  Bz2ReaderOptions reader_options;
  reader_options.threads = std::max(1, max_threads());
  reader_options.read_size = 4u << 20;
  reader_options.start_byte = share.begin;
  Bz2Reader reader(o.input, reader_options);
  RankPartSink sink(part, o.format);
  PipelineSetup setup;
  setup.share = &share;
  PipelineResult result;  // a dump without pages: the ranks after the first have none to read
  if (share.begin == 0 || !share.head.empty()) result = run_page_pipeline(o, reader, sink, setup);
  if (result.read_error || result.write_error)
    std::rethrow_exception(result.write_error ? result.write_error : result.read_error);
  sink.commit();
  sizes = sink.sizes();
  json summary = {{"key", key},
                  {"counts", counts_to_json(result.totals.counts)},
                  {"xml_bytes", result.totals.xml_bytes},
                  {"documents", sizes.size()},
                  {"data_bytes", sink.data_bytes()},
                  {"warnings", result.totals.warnings}};
  write_part_summary(part, summary);
  site = result.totals.site;
  return summary;
}

// Phase 2 of one rank: the shards that start in its part, from `first` on; the last of them goes
// on into the next parts (the documents `all` says finish it: 3 numbers per rank, documents,
// documents before its first shard start, their bytes).
void write_shards(const WikiprepOptions& o, ShardSink& sink, const std::string& part, const std::vector<uint64_t>& sizes,
                  const ShardStart& first, int rank, int ranks, const std::vector<uint64_t>& all) {
  {
    RankPartReader reader(part);
    reader.skip(first.byte);
    for (uint64_t i = first.doc; i < sizes.size(); ++i) sink.add_serialized(reader.next(sizes[i]), 0);
  }
  for (int r = rank + 1; r < ranks; ++r) {
    const uint64_t docs = all[3 * size_t(r)], prefix = all[3 * size_t(r) + 1];
    if (prefix > 0) {
      std::string next = rank_part_path(o.output_dir, r, ranks);
      std::vector<uint64_t> next_sizes = read_part_sizes(next);
      if (next_sizes.size() < prefix) throw Error(Where{next + ".sizes"}, cat("expected ", prefix, " documents or more"));
      RankPartReader reader(next);
      for (uint64_t i = 0; i < prefix; ++i) sink.add_serialized(reader.next(next_sizes[i]), 0);
    }
    if (prefix < docs) break;  // a shard starts in that part: ours ends here
  }
}

}  // namespace

WikiprepStats run_wikiprep_ranks(const WikiprepOptions& o, const Communicator& world) {
  auto start = std::chrono::steady_clock::now();
  if (o.input == "-") throw UsageError("under mpirun every rank reads the dump itself: give a file, not stdin");
  if (o.stop_after_shards) throw UsageError("--stop-after-shards is for one process, not under mpirun");
  const int rank = world.rank(), ranks = world.size();
  CommWatchdog& watchdog = comm_watchdog();  // names the stage a stalled collective waited in
  watchdog.set_stage("start");
  const auto lock = lock_dir_for_job(o.output_dir, world);  // one job per directory; its ranks share it
  const uint64_t size = file_size(o.input);
  Manifest base;
  bool bz2 = false;
  {
    Bz2Reader probe(o.input);
    base = wikiprep_base_manifest(o, probe.compressed_size());
    auto piece = probe.next_piece();  // the first bytes say whether it is bz2
    bz2 = probe.is_bz2();
  }
  std::optional<WikiprepStats> done;
  if (rank == 0) {
    make_dirs(o.output_dir);
    ResumePoint resume;
    if (o.resume) {
      resume = load_resume_point(o, base);
      done = resume.finished;
    }
    if (!done) {
      if (!resume.kept.empty()) log_info("under mpirun the shards are written again from the ranks' parts");
      remove_wikiprep_shards_from(o.output_dir, o.format, 0);
      write_checkpoint(o.output_dir, base, {}, {}, WikiprepCounts());
      make_dirs(rank_parts_dir(o.output_dir));
    }
  }
  uint8_t complete = done.has_value();
  world.broadcast(&complete, 1, 0);
  if (complete) return done ? *done : WikiprepStats{};

  // 1. This rank's part, or a done one of the run resumed.
  const std::string part = rank_part_path(o.output_dir, rank, ranks);
  const json key = {{"input", base.extra["input"]}, {"options", wikiprep_options_json(o)}, {"part", {rank, ranks}}};
  json summary;
  std::vector<uint64_t> sizes;
  SiteInfo site;
  watchdog.set_stage("part");
  fault_point("part");
  if (o.resume && load_done_part(part, key, summary, sizes)) {
    log_info("--resume: rank ", rank, "'s part is done: ", sizes.size(), " documents");
  } else {
    const uint64_t begin = size * uint64_t(rank) / uint64_t(ranks), end = size * uint64_t(rank + 1) / uint64_t(ranks);
    const DumpShare share{rank, begin, end, begin == 0 ? std::string() : dump_head(o.input), size, bz2};
    summary = make_part(o, part, key, share, sizes, site);
  }

  // 2. Where shards start: the rule handed down the ranks, then everyone's part sizes. Every
  // part is done first, so a job that fails from here on leaves them all for --resume.
  world.barrier();
  watchdog.set_stage("shards");
  fault_point("shards");
  ShardCursor cursor;
  if (rank > 0) world.recv(&cursor, sizeof cursor, rank - 1, 7001);
  const std::vector<ShardStart> starts = plan_shard_starts(sizes, o.format, o.shard_bytes, cursor);
  if (rank + 1 < ranks) world.send(&cursor, sizeof cursor, rank + 1, 7001);
  // Per rank: documents, and how many of them (and bytes) finish the shard open at its start.
  const uint64_t prefix_docs = starts.empty() ? sizes.size() : starts.front().doc;
  const uint64_t prefix_bytes = starts.empty() ? std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}) : starts.front().byte;
  std::vector<uint64_t> mine = {sizes.size(), prefix_docs, prefix_bytes}, all(3 * size_t(ranks));
  world.all_gather(mine.data(), all.data(), mine.size() * sizeof(uint64_t));

  // Rank 0 keeps its sink for the manifest (format-specific parts of it), as one process does.
  std::unique_ptr<ShardSink> sink;
  if (!starts.empty() || rank == 0) sink = open_shard_sink(o, starts.empty() ? 0 : starts.front().index);
  if (!starts.empty()) write_shards(o, *sink, part, sizes, starts.front(), rank, ranks, all);
  std::vector<ShardEntry> written;
  if (sink) {
    sink->close_shard();
    written = sink->shards();
    if (written.size() != starts.size())
      throw Error(Where{o.output_dir}, cat("rank ", rank, " wrote ", written.size(), " shards where the plan has ",
                                           starts.size(), " (the parts changed while they were read?)"));
  }
  json entries = json::array();
  for (const ShardEntry& e : written) entries.push_back({e.file, e.records, e.bytes, e.xxh3});
  summary["shards"] = entries;
  watchdog.set_stage("manifest");
  std::vector<std::string> summaries = world.all_gather_strings(summary.dump());
  world.barrier();  // every shard is committed
  if (rank != 0) return WikiprepStats{};

  // 3. The manifest: the counts add up to one process's, the shards in dump order.
  WikiprepTotals totals;
  std::vector<ShardEntry> later;
  for (int r = 0; r < ranks; ++r) {
    json j = json::parse(summaries[size_t(r)]);
    add_counts(totals.counts, counts_from_json(j["counts"], part));
    totals.xml_bytes += json_integer<uint64_t>(j["xml_bytes"]);
    for (const auto& w : j["warnings"]) totals.warnings.push_back(w.get<std::string>());
    if (r > 0)
      for (const auto& e : j["shards"]) later.push_back(ShardEntry{e[0], e[1], e[2], e[3], {}});
  }
  totals.bytes_in = size;
  totals.site = site.present ? site : site_of(o.input);  // a resumed part leaves it unread
  Manifest m = sink->finish(base_with_kept_shards(base, {}, WikiprepCounts()));
  m.shards.insert(m.shards.end(), later.begin(), later.end());  // the other ranks' shards follow rank 0's
  m.stats["documents"] = m.total_records();
  if (o.format == WikiprepFormat::jsonl) m.stats["jsonl_bytes"] = totals.counts.text_bytes;
  WikiprepStats stats = write_complete_manifest(o.output_dir, std::move(m), totals, 0, bz2, start);
  remove_rank_parts(o.output_dir);
  log_wikiprep_summary(stats, o.min_chars);
  return stats;
}

}  // namespace pretrain
