// Document shards (docs/architecture.md, "Documents"): zstd-compressed JSON Lines, one document per line with
// the string fields of wikiextractor's `--json` output (`id`, `url`, `title`, `text`), split by size
// into docs-00000.jsonl.zst, docs-00001.jsonl.zst, … and listed in manifest.json (kFormatDocs).
// wikiprep writes them; make-pretraining-shards and train-tokenizer read them, and also read
// wikiextractor's own outputs (JSON lines or <doc> blocks, plain or bz2) through the same DocReader.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/manifest.h"
#include "formats/doc_json.h"

namespace pretrain {

struct DocShardOptions {
  // Uncompressed JSON-lines bytes per shard. A shard is closed before a document would take it past
  // this size (a lone larger document gets a shard of its own). 128 MiB ≈ 50 MB of zstd output: an
  // English Wikipedia (~20 GB of text) makes ~160 shards, enough for the later stages to keep many
  // cores busy shard by shard, while a resumed run redoes at most one shard of work.
  uint64_t shard_bytes = uint64_t{128} << 20;
  // Level 1: documents are an intermediate that the next stage reads once. On English pages it is
  // ~2.5x smaller than the JSON, ~11% larger than level 3, and takes ~40% of level 3's CPU, which
  // was nearly half of wikiprep's CPU on plain XML (scripts/bench/wikiprep.sh).
  int zstd_level = 1;
  std::string prefix = "docs";  // shard names: <prefix>-00000.jsonl.zst
  // zstd compression workers. Compression always runs in zstd's multi-threaded mode (>= 1 worker,
  // a fixed job size), whose output is the same for every worker count, so shards are
  // byte-identical whatever `threads` is. The caller's thread escapes JSON meanwhile.
  int threads = 1;
  // Index of the first shard this writer makes: wikiprep --resume keeps shards 0..K-1 and goes on.
  uint64_t first_shard_index = 0;
};

// Writes documents into size-limited shards in `dir`. Each shard is written as <name>.tmp-<pid>
// and renamed when closed; a writer destroyed without finish() removes its unfinished temp file
// and leaves the committed shards (so a resumable run can restart from them).
class DocShardWriter {
 public:
  explicit DocShardWriter(std::string dir, DocShardOptions options = {});
  ~DocShardWriter();
  DocShardWriter(const DocShardWriter&) = delete;
  DocShardWriter& operator=(const DocShardWriter&) = delete;

  // Invalid UTF-8 in any field is written as U+FFFD (one per maximal invalid subpart) and counted.
  void add(const Document& doc);
  // One document already serialized by append_doc_json_line (its line, newline included), with the
  // invalid UTF-8 that serializing it replaced: mpirun wikiprep's ranks serialize their documents
  // and the ranks that write a shard add them. Shards are cut as add() cuts them.
  void add_serialized(std::string_view line, uint64_t replaced = 0);
  // Closes the current shard now (if it holds any document); the next add() starts a new one.
  void close_shard();
  // Closes the last shard and writes manifest.json. The manifest is `base` (tool, args, stats …)
  // with format kFormatDocs, base.shards (shards kept from an earlier run) followed by this
  // writer's shards, and stats documents / jsonl_bytes / invalid_utf8_replaced. Returns it.
  Manifest finish(Manifest base = {});
  // The same without writing manifest.json: for a caller that adds fields of its own and writes
  // the manifest once (wikiprep: its counts and resume point), so that a manifest without them
  // never lands on disk, not even when the final write fails (a full disk) or a kill comes between.
  Manifest finish_manifest(Manifest base = {});

  // Shards committed so far (file relative to dir, records, compressed bytes, xxh3).
  const std::vector<ShardEntry>& shards() const { return shards_; }
  uint64_t documents() const { return documents_; }
  uint64_t jsonl_bytes() const { return jsonl_bytes_; }  // uncompressed, all shards
  uint64_t invalid_utf8_replaced() const { return invalid_utf8_replaced_; }
  // True when libzstd has no multi-threading and compression runs single-threaded.
  bool single_threaded_fallback() const;

  static std::string shard_name(const std::string& prefix, uint64_t index);  // docs-00007.jsonl.zst

 private:
  struct Shard;
  void open_shard();
  void add_pending_line(size_t before, uint64_t replaced);
  void compress(const char* data, size_t n, bool end);
  void flush_pending(bool end);

  std::string dir_;
  DocShardOptions options_;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  bool zstd_mt_ = true;
  std::unique_ptr<Shard> shard_;  // the open shard, if any
  uint64_t next_index_;
  std::string pending_;  // JSON lines not yet handed to zstd
  std::vector<char> out_buffer_;
  std::vector<ShardEntry> shards_;
  uint64_t documents_ = 0, jsonl_bytes_ = 0, invalid_utf8_replaced_ = 0;
  bool finished_ = false;
};

struct DocReaderOptions {
  bool verify_checksums = true;  // xxh3 of each manifest shard before it is read
};

// Streams documents, in constant memory, from any mix of:
//  - a directory with manifest.json (its shards, in manifest order, each checked against the
//    manifest's size, xxh3 and record count),
//  - any other directory (every file in it, recursively, sorted: wikiextractor's AA/wiki_00 …),
//  - files or glob patterns,
// where each file is plain, zstd or bz2 (recognised by its magic bytes, not its name) and holds
// JSON lines or wikiextractor's <doc id="…" url="…" title="…"> blocks (recognised by its first
// non-space byte). Unknown JSON fields are ignored; `text` is required, the others default to "".
// In <doc> blocks, the title line wikiextractor repeats at the top of the text is dropped, so both
// of its formats give the same documents.
class DocReader {
 public:
  explicit DocReader(const std::vector<std::string>& inputs, DocReaderOptions options = {});
  explicit DocReader(const std::string& input, DocReaderOptions options = {});
  ~DocReader();
  DocReader(const DocReader&) = delete;
  DocReader& operator=(const DocReader&) = delete;

  // The next document, or false at the end of the last input. Throws Error naming the file and
  // line (malformed record) or compressed byte offset (truncated or corrupt stream).
  bool next(Document& doc);

  uint64_t documents_read() const { return documents_read_; }  // skipped ones included
  // Skips the files not yet begun whose documents, by their manifest counts, all come before
  // document `needed` (in documents_read()'s count), without decoding them: an mpirun rank that
  // tokenizes only some documents passes over files it has none of. A file whose count is unknown
  // or 0 stops the skipping (reading it checks the count; a wrong count of a skipped file fails
  // on the rank that reads it). Returns the documents skipped.
  uint64_t skip_files_before(uint64_t needed);
  uint64_t files_skipped() const { return files_skipped_; }
  // Bytes read from the input files so far (compressed bytes for compressed files; a little ahead
  // of the documents returned): progress against the files' sizes.
  uint64_t bytes_read() const;
  uint64_t invalid_utf8_replaced() const { return invalid_utf8_replaced_; }
  const std::string& current_file() const;
  int64_t current_line() const;  // 1-based line of the last record read in current_file()
  // "jsonl.zst", "doc.bz2", … for the current file ("" before the first read or when empty).
  std::string current_kind() const;
  const std::vector<std::string>& files() const { return files_; }

 private:
  struct Input;
  bool open_next_file();
  void finish_file();
  bool finish_counted_file();

  DocReaderOptions options_;
  std::vector<std::string> files_;
  std::vector<int64_t> expected_records_;  // per file, from a manifest; -1: unknown
  size_t next_file_ = 0;
  std::unique_ptr<Input> input_;
  uint64_t documents_read_ = 0, invalid_utf8_replaced_ = 0, files_skipped_ = 0;
  uint64_t done_bytes_ = 0;  // of the files finished
};

// Documents in a file or input (for verify_manifest and shard-tool).
uint64_t count_doc_records(const std::string& path);
// shard-tool inspect: kind, documents, bytes, and the first max_records titles with the start of
// their text.
void inspect_docs(const std::string& path, std::ostream& out, int max_records = 3);

}  // namespace pretrain
