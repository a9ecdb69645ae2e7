// Where wikiprep's clean documents go, one at a time in dump order (page_pipeline.h's writing
// stage hands them over):
//
//   DocsShardSink       docs-00000.jsonl.zst …  zstd JSON lines (formats/doc_shards.h, DocShardWriter)
//   SentencesShardSink  sentences-00000.txt …   Google BERT's sentence text (formats/sentence_text.h)
//
// Both close a shard before a document would take it past --shard-bytes (a lone larger document
// gets a shard of its own), so where shards end depends on the documents alone, and commit it
// under its finished name: a shard on disk is always whole. The mpirun ranks' part files
// (rank_parts.h) are a third kind of sink.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/manifest.h"
#include "datagen/wikiprep/wikiprep.h"
#include "formats/doc_shards.h"
#include "formats/sentence_text.h"

namespace pretrain {

// One page's clean text, in the form its format writes it.
struct CleanDocument {
  Document doc;             // id, url, title; jsonl: and the text
  std::string sentences;    // sentences: the text's sentence lines (the blank line after them is the writer's)
  uint64_t sentence_count = 0;
  uint64_t repaired = 0;    // invalid UTF-8 replaced in `sentences`
};

// A document as its shard holds it: a JSON line, or the sentence lines. Appends it to `out` and
// returns the invalid UTF-8 that replaced. mpirun ranks keep documents so in their parts.
uint64_t serialize_document(WikiprepFormat format, const CleanDocument& document, std::string& out);

// The bytes a serialized document of `size` bytes takes in a shard: what --shard-bytes counts
// (sentence text adds the blank line after each document: SentenceTextWriter::document_bytes).
uint64_t shard_bytes_of(WikiprepFormat format, uint64_t size);

class ShardSink {
 public:
  virtual ~ShardSink() = default;
  virtual void add(const CleanDocument& document) = 0;  // may commit the shard before it
  // The same for a document serialize_document() made (with the invalid UTF-8 that replaced).
  virtual void add_serialized(std::string_view serialized, uint64_t replaced) = 0;
  virtual void close_shard() = 0;                              // commits the open shard, if any
  virtual const std::vector<ShardEntry>& shards() const = 0;  // committed by this sink
  virtual uint64_t text_bytes() const = 0;                    // added to this sink, uncompressed
  virtual uint64_t invalid_utf8_replaced() const = 0;
  // Closes the last shard; the manifest is `base` plus this sink's shards.
  virtual Manifest finish(Manifest base) = 0;
};

class DocsShardSink final : public ShardSink {
 public:
  DocsShardSink(const std::string& dir, DocShardOptions options) : writer_(dir, std::move(options)) {}
  void add(const CleanDocument& document) override { writer_.add(document.doc); }
  void add_serialized(std::string_view line, uint64_t replaced) override { writer_.add_serialized(line, replaced); }
  void close_shard() override { writer_.close_shard(); }
  const std::vector<ShardEntry>& shards() const override { return writer_.shards(); }
  uint64_t text_bytes() const override { return writer_.jsonl_bytes(); }
  uint64_t invalid_utf8_replaced() const override { return writer_.invalid_utf8_replaced(); }
  // The drivers write the manifest once, with wikiprep's counts and complete=true.
  Manifest finish(Manifest base) override { return writer_.finish_manifest(std::move(base)); }

 private:
  DocShardWriter writer_;
};

class SentencesShardSink final : public ShardSink {
 public:
  SentencesShardSink(std::string dir, uint64_t shard_bytes, uint64_t first_index)
      : dir_(std::move(dir)), shard_bytes_(shard_bytes), next_index_(first_index) {}
  void add(const CleanDocument& document) override { add_serialized(document.sentences, document.repaired); }
  void add_serialized(std::string_view lines, uint64_t replaced) override;
  void close_shard() override;
  const std::vector<ShardEntry>& shards() const override { return shards_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t invalid_utf8_replaced() const override { return invalid_; }
  Manifest finish(Manifest base) override;

 private:
  std::string dir_;
  uint64_t shard_bytes_, next_index_;
  std::unique_ptr<SentenceTextWriter> file_;
  uint64_t text_bytes_ = 0, invalid_ = 0;
  std::vector<ShardEntry> shards_;
};

// The sink of o.format in o.output_dir with o.shard_bytes (and o.zstd_level); its first shard is
// numbered `first_index` (a resumed run's kept shards come before it).
std::unique_ptr<ShardSink> open_shard_sink(const WikiprepOptions& o, uint64_t first_index);

}  // namespace pretrain
