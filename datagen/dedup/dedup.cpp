#include "datagen/dedup/dedup.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>

#include "common/cli.h"
#include "common/communicator.h"
#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/progress.h"
#include "datagen/dedup/clusters_file.h"
#include "datagen/dedup/dedup_output.h"
#include "datagen/dedup/lsh_buckets.h"
#include "formats/doc_shards.h"

namespace pretrain {

nlohmann::json DedupStats::to_json() const {
  return {{"input_files", input_files},         {"documents", documents},
          {"kept", kept},                       {"removed_exact", removed_exact},
          {"removed_near", removed_near},       {"clusters", clusters},
          {"input_bytes", input_bytes},         {"output_shards", output_shards},
          {"output_bytes", output_bytes},       {"candidate_pairs", candidate_pairs},
          {"checked_pairs", checked_pairs},     {"resumed_signatures", resumed_signatures},
          {"resumed_parts", resumed_parts},     {"seconds", seconds}};
}

namespace {

constexpr const char* kWorkDir = ".work";

std::string numbered(const char* prefix, uint64_t index, const char* suffix) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%05llu", static_cast<unsigned long long>(index));
  return cat(prefix, digits, suffix);
}

bool is_output_shard_name(std::string_view name) {
  static const std::regex shard(R"(docs-\d{5,}\.jsonl\.zst)");
  return std::regex_match(name.begin(), name.end(), shard);
}

bool is_our_output_name(std::string_view name) {
  return name == kManifestName || name == kDedupReportName || is_output_shard_name(name);
}

bool is_our_work_name(std::string_view name) {
  static const std::regex work(R"((sig-\d+\.bin|report-\d+\.jsonl|out-\d+\.json|clusters\.bin))");
  return std::regex_match(name.begin(), name.end(), work);
}

void check_options(const DedupOptions& o) {
  if (o.inputs.empty()) throw UsageError("expected at least one input (-i)");
  if (o.output_dir.empty()) throw UsageError("expected an output directory (-o)");
  o.sign.minhash.check();
  if (!(o.jaccard_threshold >= 0 && o.jaccard_threshold <= 1))
    throw UsageError(cat("--jaccard-threshold: expected 0..1, found ", o.jaccard_threshold));
  if (o.jaccard_threshold > 0 && !o.sign.near) throw UsageError("--jaccard-threshold needs the near-duplicate stage (not with --no-near)");
  if (o.zstd_level < 1 || o.zstd_level > 19) throw UsageError(cat("--zstd-level: expected 1..19, found ", o.zstd_level));
}

// What the signatures depend on besides the file itself.
std::string options_key(const SignOptions& s) {
  return cat("dedup-signatures-1 nfc=", s.exact.nfc, " whitespace=", s.exact.fold_whitespace, " case=", s.exact.fold_case,
             " near=", s.near, " ngram=", s.minhash.ngram, " bands=", s.minhash.bands, " rows=", s.minhash.rows,
             " seed=", s.minhash.seed);
}

uint64_t hash_string(const std::string& s) { return xxh3_bytes(s.data(), s.size()); }

// The files rank r works on: those whose first byte lies in its share of all input bytes.
std::vector<size_t> files_of_rank(const std::vector<DedupInputFile>& files, int rank, int ranks) {
  uint64_t total = 0;
  for (const auto& f : files) total += f.bytes;
  std::vector<size_t> mine;
  const uint64_t share = std::max<uint64_t>(1, (total + static_cast<uint64_t>(ranks) - 1) / static_cast<uint64_t>(ranks));
  uint64_t start = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    int owner = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(ranks) - 1, start / share));
    if (owner == rank) mine.push_back(i);
    start += files[i].bytes;
  }
  return mine;
}

void refuse_output_among_inputs(const std::vector<DedupInputFile>& files, const std::string& output_dir) {
  std::error_code ec;
  auto out = std::filesystem::weakly_canonical(output_dir, ec);
  if (ec) return;
  for (const auto& f : files) {
    auto dir = std::filesystem::weakly_canonical(f.path, ec).parent_path();
    if (!ec && dir == out)
      throw UsageError(cat("-o ", output_dir, ": the output directory holds input ", f.path, "; write elsewhere"));
  }
}

// Rank 0, before any rank writes: a fresh run clears what an earlier run left (our names only).
void prepare_output(const DedupOptions& o) {
  const std::string work = path_join(o.output_dir, kWorkDir);
  if (!o.resume) {
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
    for (const auto& entry : std::filesystem::directory_iterator(o.output_dir)) {
      std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && is_our_output_name(name)) std::filesystem::remove(entry.path());
    }
  }
  make_dirs(work);
  for (const std::string& gone : remove_stale_temp_files(o.output_dir, is_our_output_name))
    log_info("removed ", gone, " (left by a killed run)");
  for (const std::string& gone : remove_stale_temp_files(work, is_our_work_name))
    log_info("removed ", gone, " (left by a killed run)");
}

class Checkpoints {
 public:
  explicit Checkpoints(int kill_after) : kill_after_(kill_after) {}
  void committed() {
    std::lock_guard lock(mutex_);
    if (kill_after_ > 0 && ++count_ >= kill_after_) std::raise(SIGKILL);
  }

 private:
  std::mutex mutex_;
  int kill_after_, count_ = 0;
};

std::string serialize_pairs(const std::vector<DocPair>& pairs) {
  std::vector<uint64_t> ends;
  ends.reserve(2 * pairs.size());
  for (const auto& [x, y] : pairs) ends.push_back(x), ends.push_back(y);
  return std::string(reinterpret_cast<const char*>(ends.data()), ends.size() * sizeof(uint64_t));
}

Clusters find_clusters(const SignatureSet& set, const DedupOptions& o, const Communicator& world) {
  const int bands = o.sign.near ? set.bands() : 0;
  const int tasks = 1 + bands;  // the exact stage, then the bands
  UnionFind sets(set.documents());
  std::vector<DocPair> merged;
  JoinStats stats;
  int my_tasks = 0;
  for (int t = world.rank(); t < tasks; t += world.size()) ++my_tasks;
  Progress progress("clusters", static_cast<uint64_t>(my_tasks));
  for (int t = world.rank(); t < tasks; t += world.size()) {
    std::vector<DocPair>* record = world.distributed() ? &merged : nullptr;
    if (t == 0) join_exact(set, sets, record, stats);
    else join_band(set, t - 1, o.jaccard_threshold, sets, record, stats);
    progress.add(1);
  }
  progress.finish();
  Clusters c;
  if (world.distributed()) {
    // Every rank replays every rank's merging pairs: the same sets everywhere.
    std::vector<std::string> all = world.all_gather_strings(serialize_pairs(merged));
    UnionFind joined(set.documents());
    for (const std::string& bytes : all) {
      std::vector<uint64_t> ends(bytes.size() / sizeof(uint64_t));
      std::memcpy(ends.data(), bytes.data(), ends.size() * sizeof(uint64_t));
      for (size_t i = 0; i + 1 < ends.size(); i += 2) joined.unite(ends[i], ends[i + 1]);
    }
    int64_t counts[2] = {static_cast<int64_t>(stats.candidate_pairs), static_cast<int64_t>(stats.checked)};
    world.all_reduce_sum(counts, 2);
    c.roots = joined.roots();
    c.candidate_pairs = static_cast<uint64_t>(counts[0]);
    c.checked_pairs = static_cast<uint64_t>(counts[1]);
  } else {
    c.roots = sets.roots();
    c.candidate_pairs = stats.candidate_pairs;
    c.checked_pairs = stats.checked;
  }
  return c;
}

Manifest output_manifest(const DedupOptions& o, const std::vector<OutputPart>& parts,
                         const DedupStats& stats) {
  Manifest m;
  m.format = kFormatDocs;
  m.tool = cat("dedup ", version_string());
  m.args = o.args;
  m.seed = o.sign.minhash.seed;
  uint64_t jsonl_bytes = 0;
  for (const OutputPart& p : parts) {
    if (p.shard) m.shards.push_back(*p.shard);
    jsonl_bytes += p.jsonl_bytes;
  }
  // What the output is, not how this run went (time, resumed checkpoints, the estimates computed,
  // which depend on the rank count): the manifest is the same bytes however the run was made.
  m.stats = {{"documents", stats.kept},
             {"jsonl_bytes", jsonl_bytes},
             {"input_files", stats.input_files},
             {"input_documents", stats.documents},
             {"input_bytes", stats.input_bytes},
             {"removed_exact", stats.removed_exact},
             {"removed_near", stats.removed_near},
             {"clusters", stats.clusters},
             {"candidate_pairs", stats.candidate_pairs}};
  nlohmann::json sources = nlohmann::json::array();
  for (const std::string& s : o.inputs) sources.push_back(s);
  m.extra["docs"] = {{"prefix", kDedupShardPrefix}, {"zstd_level", o.zstd_level}};
  m.extra["dedup"] = {{"sources", sources},
                      {"report", kDedupReportName},
                      {"keep", "the first document of each cluster in input order (sources as given, then files, then records)"},
                      {"order", "input order; one shard per input file with a kept document"},
                      {"exact", {{"hash", "xxh3-128"}, {"nfc", o.sign.exact.nfc}, {"fold_whitespace", o.sign.exact.fold_whitespace},
                                 {"fold_case", o.sign.exact.fold_case}}},
                      {"near", o.sign.near},
                      {"ngram", o.sign.minhash.ngram},
                      {"bands", o.sign.minhash.bands},
                      {"rows", o.sign.minhash.rows},
                      {"jaccard_threshold", o.jaccard_threshold}};
  return m;
}

}  // namespace

DedupStats run_dedup(const DedupOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  check_options(o);
  const Communicator& world = Communicator::world();
  const bool root = world.rank() == 0;
  std::vector<DedupInputFile> inputs = plan_dedup_inputs(o.inputs);
  if (inputs.empty()) throw UsageError("the inputs hold no files");
  make_dirs(o.output_dir);
  refuse_output_among_inputs(inputs, o.output_dir);
  std::optional<DirLock> lock = lock_dir_for_job(o.output_dir, world);
  if (root) prepare_output(o);
  world.barrier();
  const std::string work = path_join(o.output_dir, kWorkDir);
  const std::vector<size_t> mine = files_of_rank(inputs, world.rank(), world.size());
  const std::string sign_key = options_key(o.sign);
  Checkpoints checkpoints(o.kill_after_checkpoints);
  DedupStats stats;
  stats.input_files = inputs.size();
  for (const auto& f : inputs) stats.input_bytes += f.bytes;

  // Stage 1: signatures of this rank's files.
  std::vector<uint64_t> identity(inputs.size()), key(inputs.size());
  auto sig_path = [&](size_t f) { return path_join(work, numbered("sig-", f, ".bin")); };
  {
    uint64_t my_bytes = 0;
    for (size_t f : mine) my_bytes += inputs[f].bytes;
    Progress progress("signatures", my_bytes, Progress::Unit::bytes);
    uint64_t resumed = 0;
    for (size_t f : mine) {
      identity[f] = verify_dedup_input(inputs[f]);
      key[f] = hash_string(cat(sign_key, '\n', hex64(identity[f])));
      if (o.resume && file_exists(sig_path(f))) {
        SignatureFile existing(sig_path(f));
        if (existing.key() == key[f] && existing.verify()) {
          ++resumed;
          progress.add(inputs[f].bytes);
          continue;
        }
      }
      sign_input_file(inputs[f], key[f], o.sign, sig_path(f), &progress);
      checkpoints.committed();
    }
    progress.finish();
    // The barrier sleeps while it waits for the slowest rank; MPI's reduction would spin.
    world.barrier();
    int64_t r = static_cast<int64_t>(resumed);
    world.all_reduce_sum(&r, 1);
    stats.resumed_signatures = static_cast<uint64_t>(r);
  }

  // Stage 2: clusters.
  std::vector<SignatureFile> files;
  files.reserve(inputs.size());
  for (size_t f = 0; f < inputs.size(); ++f) files.emplace_back(sig_path(f));
  SignatureSet set(std::move(files));
  std::string clusters_identity = cat("dedup-clusters-1 threshold=", o.jaccard_threshold);
  for (size_t f = 0; f < set.files(); ++f) clusters_identity += cat(' ', hex64(set.file(f).key()));
  const uint64_t clusters_key = hash_string(clusters_identity);
  const std::string clusters_path = path_join(work, "clusters.bin");
  std::optional<Clusters> clusters;
  if (o.resume) clusters = read_clusters(clusters_path, clusters_key);
  // Every rank decides alike: a file one rank reads whole is read whole by all (shared filesystem).
  if (!clusters) {
    clusters = find_clusters(set, o, world);
    if (root) write_clusters(clusters_path, clusters_key, *clusters);
  }
  world.barrier();
  const std::vector<uint64_t>& roots = clusters->roots;
  stats.documents = roots.size();
  stats.candidate_pairs = clusters->candidate_pairs;
  stats.checked_pairs = clusters->checked_pairs;

  // Stage 3: the kept documents and the report parts.
  std::vector<uint64_t> kept_in_file(inputs.size(), 0);
  for (size_t f = 0; f < set.files(); ++f) {
    const uint64_t first = set.first_document(f);
    for (uint64_t d = first; d < first + set.file(f).documents(); ++d) kept_in_file[f] += roots[d] == d;
  }
  std::vector<OutputFileJob> jobs(inputs.size());
  uint64_t shard_index = 0;
  for (size_t f = 0; f < inputs.size(); ++f) {
    OutputFileJob& job = jobs[f];
    job.file = &inputs[f];
    job.file_index = f;
    job.key = set.file(f).key();
    job.output_dir = o.output_dir;
    job.shard_index = shard_index;
    job.shard_path = path_join(o.output_dir, DocShardWriter::shard_name(kDedupShardPrefix, shard_index));
    job.report_path = path_join(work, numbered("report-", f, ".jsonl"));
    job.record_path = path_join(work, numbered("out-", f, ".json"));
    job.zstd_level = o.zstd_level;
    if (kept_in_file[f] > 0) ++shard_index;
  }
  {
    uint64_t my_bytes = 0;
    for (size_t f : mine) my_bytes += inputs[f].bytes;
    Progress progress("output", my_bytes, Progress::Unit::bytes);
    std::atomic<uint64_t> resumed{0};
    FirstError error;
    tbb::parallel_for(size_t{0}, mine.size(), [&](size_t i) {
      if (error.failed()) return;
      error.keep([&] {
        const size_t f = mine[i];
        if (o.resume && committed_output_part(jobs[f])) {
          ++resumed;
          progress.add(inputs[f].bytes);
          return;
        }
        if (verify_dedup_input(inputs[f]) != identity[f])
          throw Error(Where{inputs[f].path}, "changed since its signatures were made");
        write_output_part(jobs[f], roots, set, inputs, &progress);
        checkpoints.committed();
      });
    });
    error.rethrow();
    progress.finish();
    world.barrier();
    int64_t r = static_cast<int64_t>(resumed.load());
    world.all_reduce_sum(&r, 1);
    stats.resumed_parts = static_cast<uint64_t>(r);
  }

  // Rank 0: the report, the manifest, and the work files gone.
  if (root) {
    std::vector<OutputPart> parts;
    AtomicFile report(path_join(o.output_dir, kDedupReportName));
    for (size_t f = 0; f < inputs.size(); ++f) {
      std::optional<OutputPart> part = committed_output_part(jobs[f]);
      if (!part) throw Error(Where{jobs[f].record_path}, "expected the committed output part of this input file");
      report.write(read_file(jobs[f].report_path));
      stats.kept += part->kept;
      stats.removed_exact += part->removed_exact;
      stats.removed_near += part->removed_near;
      if (part->shard) {
        ++stats.output_shards;
        stats.output_bytes += part->shard->bytes;
      }
      parts.push_back(std::move(*part));
    }
    report.commit();
    std::vector<uint8_t> has_members(roots.size(), 0);
    for (uint64_t d = 0; d < roots.size(); ++d)
      if (roots[d] != d) has_members[roots[d]] = 1;
    for (uint8_t m : has_members) stats.clusters += m;
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Manifest m = output_manifest(o, parts, stats);
    m.write(path_join(o.output_dir, kManifestName));
    // Shards an earlier run wrote that this one did not (a resumed run into other inputs).
    for (const auto& entry : std::filesystem::directory_iterator(o.output_dir)) {
      std::string name = entry.path().filename().string();
      if (is_output_shard_name(name) && std::none_of(m.shards.begin(), m.shards.end(), [&](const ShardEntry& s) { return s.file == name; }))
        std::filesystem::remove(entry.path());
    }
    if (!o.keep_work) std::filesystem::remove_all(work);
  }
  world.barrier();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace pretrain
