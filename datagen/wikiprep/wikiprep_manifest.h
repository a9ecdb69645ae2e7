// What wikiprep writes into manifest.json beside its shards (docs/architecture.md, "Documents"),
// and says in its log at the end:
//
//   created_by          the tool and its command line
//   extra.input         the dump's path and size; extra.options: the options that shape the
//                       shards (a --resume must give the same ones)
//   stats               the run's counts (WikiprepCounts), with input and output bytes once complete
//   extra.resume        while unfinished (complete=false): {pages_seen, shards}, the point a
//                       --resume goes on from: the listed shards hold exactly the documents of the
//                       first pages_seen pages (wikiprep.h)
//   extra.site          once complete: the dump's <siteinfo> and whether it was bz2
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/manifest.h"
#include "datagen/wikiprep/wikiprep.h"
#include "datagen/wikiprep/xml_pages.h"

namespace pretrain {

// extra.options: what must match for a --resume to go on with the shards.
nlohmann::json wikiprep_options_json(const WikiprepOptions& o);

// The manifest every other starts from: format, tool, args, the input (`input_size`: its
// compressed size) and the options.
Manifest wikiprep_base_manifest(const WikiprepOptions& o, uint64_t input_size);

// stats' counts, and back (throws naming `source` and the field when one is missing).
nlohmann::json counts_to_json(const WikiprepCounts& c);
WikiprepCounts counts_from_json(const nlohmann::json& j, const std::string& source);
void add_counts(WikiprepCounts& sum, const WikiprepCounts& c);

// The manifest of an unfinished run: `base` with the shards kept from the run it resumes and
// those written since, the counts at their end and the resume point.
void write_checkpoint(const std::string& output_dir, const Manifest& base, const std::vector<ShardEntry>& kept,
                      const std::vector<ShardEntry>& written, const WikiprepCounts& at);

// What a shard sink's finish() completes: `base` with the kept shards and the bytes and repairs
// of their documents (DocShardWriter::finish_manifest adds its own to these).
Manifest base_with_kept_shards(const Manifest& base, const std::vector<ShardEntry>& kept, const WikiprepCounts& baseline);

// What a run read and found, for the complete manifest.
struct WikiprepTotals {
  WikiprepCounts counts;
  uint64_t bytes_in = 0, xml_bytes = 0;
  SiteInfo site;
  std::vector<std::string> warnings;  // the XML reader's
};

// Completes `m` (a sink's finished manifest, every shard listed) with the totals, the site and the
// warnings, writes it with complete=true and returns the run's stats.
WikiprepStats write_complete_manifest(const std::string& output_dir, Manifest m, const WikiprepTotals& totals,
                                      uint64_t resumed_pages, bool bz2, std::chrono::steady_clock::time_point start);

// The stats in the log: two lines of info.
void log_wikiprep_summary(const WikiprepStats& s, uint64_t min_chars);

}  // namespace pretrain
