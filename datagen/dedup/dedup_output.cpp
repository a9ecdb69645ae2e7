#include "datagen/dedup/dedup_output.h"

#include <limits>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/json_integer.h"
#include "common/progress.h"
#include "datagen/dedup/dedup_report.h"
#include "datagen/dedup/minhash.h"
#include "formats/doc_shards.h"

namespace pretrain {

nlohmann::json OutputPart::to_json(uint64_t key) const {
  nlohmann::json j = {{"key", hex64(key)},          {"documents", documents},       {"kept", kept},
                      {"removed_exact", removed_exact}, {"removed_near", removed_near}, {"jsonl_bytes", jsonl_bytes},
                      {"report_bytes", report_bytes}};
  if (shard) j["shard"] = {{"file", shard->file}, {"records", shard->records}, {"bytes", shard->bytes}, {"xxh3", shard->xxh3}};
  else j["shard"] = nullptr;
  return j;
}

std::optional<OutputPart> OutputPart::from_json(const nlohmann::json& j, uint64_t key) {
  try {
    if (!j.is_object() || j.at("key").get<std::string>() != hex64(key)) return std::nullopt;
    OutputPart p;
    p.documents = json_integer<uint64_t>(j.at("documents"));
    p.kept = json_integer<uint64_t>(j.at("kept"));
    p.removed_exact = json_integer<uint64_t>(j.at("removed_exact"));
    p.removed_near = json_integer<uint64_t>(j.at("removed_near"));
    p.jsonl_bytes = json_integer<uint64_t>(j.at("jsonl_bytes"));
    p.report_bytes = json_integer<uint64_t>(j.at("report_bytes"));
    const nlohmann::json& s = j.at("shard");
    if (!s.is_null())
      p.shard = ShardEntry{s.at("file").get<std::string>(), json_integer<uint64_t>(s.at("records")),
                           json_integer<uint64_t>(s.at("bytes")), s.at("xxh3").get<std::string>(), {}};
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<OutputPart> committed_output_part(const OutputFileJob& job) {
  if (!file_exists(job.record_path) || !file_exists(job.report_path)) return std::nullopt;
  std::optional<OutputPart> part;
  try {
    part = OutputPart::from_json(nlohmann::json::parse(read_file(job.record_path)), job.key);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!part || file_size(job.report_path) != part->report_bytes) return std::nullopt;
  if (part->shard) {
    if (!file_exists(job.shard_path) || file_size(job.shard_path) != part->shard->bytes ||
        hex64(xxh3_file(job.shard_path)) != part->shard->xxh3)
      return std::nullopt;
  }
  return part;
}

OutputPart write_output_part(const OutputFileJob& job, const std::vector<uint64_t>& roots, const SignatureSet& set,
                             const std::vector<DedupInputFile>& inputs, Progress* progress) {
  const DedupInputFile& file = *job.file;
  const SignatureFile& signatures = set.file(job.file_index);
  if (signatures.key() != job.key)
    throw Error(Where{file.path}, cat("changed since its signatures were made (", signatures.path(), ")"));
  const uint64_t first = set.first_document(job.file_index);
  const std::vector<Hash128> exact = signatures.exact();
  const int k = set.hashes();
  std::vector<uint32_t> sig(static_cast<size_t>(k)), kept_sig(static_cast<size_t>(k));

  DocShardOptions shard_options;
  shard_options.shard_bytes = std::numeric_limits<uint64_t>::max();  // one shard per input file
  shard_options.zstd_level = job.zstd_level;
  shard_options.threads = 1;  // files are written side by side; one zstd worker each
  shard_options.prefix = kDedupShardPrefix;
  shard_options.first_shard_index = job.shard_index;
  DocShardWriter writer(job.output_dir, shard_options);

  OutputPart part;
  AtomicFile report(job.report_path);
  DocReader reader(file.path);
  Document doc;
  uint64_t reported = 0;
  for (uint64_t record = 0; reader.next(doc); ++record) {
    if (record >= signatures.documents())
      throw Error(Where::at_line(file.path, reader.current_line()),
                  cat("expected ", signatures.documents(), " documents (as signed), found more"));
    const uint64_t index = first + record;
    const uint64_t root = roots[index];
    if (root == index) {
      writer.add(doc);
      ++part.kept;
    } else {
      auto [kept_file, kept_record] = set.locate(root);
      const DedupInputFile& kept_input = inputs[kept_file];
      const SignatureFile& kept_signatures = set.file(kept_file);
      RemovedDocument removed;
      removed.removed = {index, doc.id, file.source_name, file.path, record};
      removed.kept = {root, kept_signatures.id(kept_record), kept_input.source_name, kept_input.path, kept_record};
      removed.exact = kept_signatures.exact_hash(kept_record) == exact[record];
      if (set.has_minhash(index) && set.has_minhash(root)) {
        signatures.signature(record, sig.data());
        kept_signatures.signature(kept_record, kept_sig.data());
        removed.jaccard = estimated_jaccard(sig.data(), kept_sig.data(), k);
      }
      ++(removed.exact ? part.removed_exact : part.removed_near);
      report.write(report_line(removed));
    }
    ++part.documents;
    if (progress && (record & 255) == 255) {
      progress->add(reader.bytes_read() - reported);
      reported = reader.bytes_read();
    }
  }
  if (part.documents != signatures.documents())
    throw Error(Where{file.path}, cat("expected ", signatures.documents(), " documents (as signed), found ", part.documents));
  if (progress && file.bytes > reported) progress->add(file.bytes - reported);
  part.report_bytes = report.bytes_written();
  report.commit();
  writer.close_shard();
  if (!writer.shards().empty()) part.shard = writer.shards().front();
  part.jsonl_bytes = writer.jsonl_bytes();
  write_file_atomic(job.record_path, part.to_json(job.key).dump() + "\n");
  return part;
}

}  // namespace pretrain
