#include "datagen/wikiprep/document_shard_sinks.h"

#include <algorithm>

#include "common/cli.h"
#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

uint64_t serialize_document(WikiprepFormat format, const CleanDocument& document, std::string& out) {
  if (format == WikiprepFormat::jsonl) return append_doc_json_line(document.doc, out);
  out.append(document.sentences);
  return document.repaired;
}

uint64_t shard_bytes_of(WikiprepFormat format, uint64_t size) { return format == WikiprepFormat::jsonl ? size : size + 1; }

void SentencesShardSink::add_serialized(std::string_view lines, uint64_t replaced) {
  uint64_t bytes = SentenceTextWriter::document_bytes(lines);
  if (file_ && file_->documents() > 0 && file_->bytes_written() + bytes > shard_bytes_) close_shard();
  if (!file_)
    file_ = std::make_unique<SentenceTextWriter>(path_join(dir_, wikiprep_shard_name(WikiprepFormat::sentences, next_index_++)));
  file_->add_document(lines);
  text_bytes_ += bytes;
  invalid_ += replaced;
}

void SentencesShardSink::close_shard() {
  if (!file_) return;
  uint64_t bytes = file_->bytes_written();
  file_->commit();
  shards_.push_back(ShardEntry{base_name(file_->path()), file_->documents(), bytes, hex64(file_->xxh3()), {}});
  file_.reset();
}

Manifest SentencesShardSink::finish(Manifest base) {
  close_shard();
  Manifest m = std::move(base);
  m.format = kFormatSentences;
  m.shards.insert(m.shards.end(), shards_.begin(), shards_.end());
  m.stats["documents"] = m.total_records();
  return m;
}

std::unique_ptr<ShardSink> open_shard_sink(const WikiprepOptions& o, uint64_t first_index) {
  if (o.format == WikiprepFormat::sentences)
    return std::make_unique<SentencesShardSink>(o.output_dir, o.shard_bytes, first_index);
  DocShardOptions d;
  d.shard_bytes = o.shard_bytes;
  d.zstd_level = o.zstd_level;
  d.first_shard_index = first_index;
  // zstd's own workers (the shards' bytes are the same for any count). Level 3 takes about 0.6x
  // the CPU of reading, parsing, cleaning and escaping (0.37 vs 0.64 s per 150 MB of the bench's
  // XML), so one worker per two pipeline threads keeps compression off the critical path;
  // workers with nothing to compress just wait.
  d.threads = std::max(1, max_threads() / 2);
  return std::make_unique<DocsShardSink>(o.output_dir, d);
}

}  // namespace pretrain
