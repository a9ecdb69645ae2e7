#include "datagen/wikiprep/resume_point.h"

#include "common/file.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "datagen/wikiprep/wikiprep_manifest.h"

namespace pretrain {
namespace {

using nlohmann::json;

void check_same_input(const WikiprepOptions& o, const Manifest& base, const Manifest& m, const std::string& path) {
  const json& input = m.extra.value("input", json());
  std::string was = input.value("path", std::string());
  uint64_t was_size = json_integer_or<uint64_t>(input, "size", 0), size = json_integer<uint64_t>(base.extra["input"]["size"]);
  if (was == "-" || o.input == "-") {
    log_warn("--resume with stdin: cannot check that the input is the one the manifest was made from");
    return;
  }
  if (base_name(was) != base_name(o.input) || (was_size && size && was_size != size))
    throw UsageError(cat(path, ": --resume on another input: it was made from ", was, " (", was_size,
                         " bytes), not ", o.input, " (", size, " bytes)"));
}

}  // namespace

ResumePoint load_resume_point(const WikiprepOptions& o, const Manifest& base) {
  ResumePoint point;
  std::string path = path_join(o.output_dir, kManifestName);
  if (!file_exists(path)) {
    log_info("--resume: no ", path, " yet, starting from the beginning");
    remove_wikiprep_shards_from(o.output_dir, o.format, 0);
    return point;
  }
  Manifest m = Manifest::read(path);
  const char* format = wikiprep_manifest_format(o.format);
  if (m.format != format) throw UsageError(cat(path, ": --resume of format ", m.format, " with --format ", format));
  if (m.extra.value("options", json()) != wikiprep_options_json(o))
    throw UsageError(cat(path, ": --resume with other options than the run it continues: it had ",
                         m.extra.value("options", json()).dump(), ", now ", wikiprep_options_json(o).dump()));
  check_same_input(o, base, m, path);
  Manifest shards_only = m;
  shards_only.complete = true;  // unfinished is what we know: check the shards
  std::vector<VerifyProblem> problems = verify_manifest(shards_only, o.output_dir);
  if (!problems.empty())
    throw Error(Where{path_join(o.output_dir, problems[0].file)},
                cat("--resume: a kept shard does not match the manifest: ", problems[0].message));
  if (m.complete) {
    log_info(o.output_dir, " is already complete (", m.shards.size(), " shards verified)");
    WikiprepStats s;
    static_cast<WikiprepCounts&>(s) = counts_from_json(m.stats, path);
    s.shards = m.shards.size();
    s.complete = true;
    point.finished = s;
    return point;
  }
  const json& resume = m.extra.value("resume", json());
  if (!resume.is_object() || !resume.value("pages_seen", json()).is_number_unsigned() ||
      resume.value("shards", json()) != m.shards.size())
    throw Error(Where{path}, "extra.resume: expected {pages_seen, shards} matching the shard list");
  point.skip_pages = json_integer<uint64_t>(resume["pages_seen"]);
  point.baseline = counts_from_json(m.stats, path);
  point.kept = m.shards;
  remove_wikiprep_shards_from(o.output_dir, o.format, point.kept.size());
  log_info("resuming after ", point.skip_pages, " pages and ", point.kept.size(), " shards");
  return point;
}

}  // namespace pretrain
