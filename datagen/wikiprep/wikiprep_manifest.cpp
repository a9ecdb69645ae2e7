#include "datagen/wikiprep/wikiprep_manifest.h"

#include <algorithm>

#include "common/cli.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/log.h"

namespace pretrain {

using nlohmann::json;

json wikiprep_options_json(const WikiprepOptions& o) {
  return {{"format", wikiprep_manifest_format(o.format)}, {"shard_bytes", o.shard_bytes},
          {"namespaces", o.namespaces},                   {"keep_redirects", o.keep_redirects},
          {"min_chars", o.min_chars},                     {"zstd_level", o.zstd_level}};
}

Manifest wikiprep_base_manifest(const WikiprepOptions& o, uint64_t input_size) {
  Manifest m;
  m.format = wikiprep_manifest_format(o.format);
  m.tool = cat("wikiprep ", version_string());
  m.args = o.args;
  m.extra["input"] = {{"path", o.input}, {"size", input_size}};
  m.extra["options"] = wikiprep_options_json(o);
  return m;
}

namespace {

using Counts = WikiprepCounts;

// Every count by its name in stats, in one place for both directions and the sum.
constexpr std::pair<const char*, uint64_t Counts::*> kCountFields[] = {
    {"pages_seen", &Counts::pages_seen},
    {"articles_written", &Counts::articles_written},
    {"redirects_skipped", &Counts::redirects_skipped},
    {"namespaces_skipped", &Counts::namespaces_skipped},
    {"short_skipped", &Counts::short_skipped},
    {"sentences", &Counts::sentences},
    {"text_bytes", &Counts::text_bytes},
    {"invalid_utf8_replaced", &Counts::invalid_utf8_replaced}};

}  // namespace

json counts_to_json(const Counts& c) {
  json j = json::object();
  for (auto [key, field] : kCountFields) j[key] = c.*field;
  return j;
}

Counts counts_from_json(const json& j, const std::string& source) {
  Counts c;
  for (auto [key, field] : kCountFields) {
    if (!j.contains(key) || !j[key].is_number_unsigned())
      throw Error(Where{source}, cat("stats.", key, ": expected an unsigned number"));
    c.*field = json_integer<uint64_t>(j[key]);
  }
  return c;
}

void add_counts(Counts& sum, const Counts& c) {
  for (auto [key, field] : kCountFields) sum.*field += c.*field;
}

void write_checkpoint(const std::string& output_dir, const Manifest& base, const std::vector<ShardEntry>& kept,
                      const std::vector<ShardEntry>& written, const Counts& at) {
  Manifest m = base;
  m.complete = false;
  m.shards = kept;
  m.shards.insert(m.shards.end(), written.begin(), written.end());
  m.stats = counts_to_json(at);
  m.extra["resume"] = {{"pages_seen", at.pages_seen}, {"shards", m.shards.size()}};
  m.write(path_join(output_dir, kManifestName));
}

Manifest base_with_kept_shards(const Manifest& base, const std::vector<ShardEntry>& kept, const Counts& baseline) {
  Manifest m = base;
  m.shards = kept;
  m.stats = {{"jsonl_bytes", baseline.text_bytes}, {"invalid_utf8_replaced", baseline.invalid_utf8_replaced}};
  return m;
}

WikiprepStats write_complete_manifest(const std::string& output_dir, Manifest m, const WikiprepTotals& totals,
                                      uint64_t resumed_pages, bool bz2, std::chrono::steady_clock::time_point start) {
  WikiprepStats s;
  static_cast<Counts&>(s) = totals.counts;
  s.bytes_in = totals.bytes_in;
  s.xml_bytes = totals.xml_bytes;
  for (const ShardEntry& e : m.shards) s.bytes_out += e.bytes;
  s.shards = m.shards.size();
  s.resumed_pages = resumed_pages;
  s.complete = true;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.stats.update(counts_to_json(totals.counts));
  m.stats.update(json{{"bytes_in", s.bytes_in}, {"xml_bytes", s.xml_bytes}, {"bytes_out", s.bytes_out},
                      {"seconds", s.seconds}});
  const SiteInfo& site = totals.site;
  m.extra["site"] = {{"dbname", site.dbname}, {"lang", site.lang}, {"base", site.base},
                     {"siteinfo", site.present}, {"bz2", bz2}};
  if (!totals.warnings.empty()) m.extra["warnings"] = totals.warnings;
  m.complete = true;
  m.write(path_join(output_dir, kManifestName));
  return s;
}

void log_wikiprep_summary(const WikiprepStats& s, uint64_t min_chars) {
  double secs = std::max(s.seconds, 1e-9);
  log_info("wikiprep: ", s.pages_seen, " pages seen, ", s.articles_written, " articles written, ",
           s.redirects_skipped, " redirects and ", s.namespaces_skipped, " pages of other namespaces skipped",
           min_chars ? cat(", ", s.short_skipped, " under ", min_chars, " chars") : std::string(),
           s.resumed_pages ? cat(" (", s.resumed_pages, " pages were already written)") : std::string());
  log_info("wikiprep: ", human_bytes(static_cast<double>(s.bytes_in)), " in (",
           human_bytes(static_cast<double>(s.xml_bytes)), " XML), ", human_bytes(static_cast<double>(s.text_bytes)),
           " of text in ", s.shards, " shards (", human_bytes(static_cast<double>(s.bytes_out)), " on disk), ",
           s.invalid_utf8_replaced, " invalid UTF-8 replaced, ", human_duration(s.seconds), ", ",
           human_count(static_cast<double>(s.pages_seen) / secs), " pages/s, ",
           human_bytes(static_cast<double>(s.xml_bytes) / secs), "/s of XML");
}

}  // namespace pretrain
