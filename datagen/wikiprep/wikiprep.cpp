#include "datagen/wikiprep/wikiprep.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/cli.h"
#include "common/communicator.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/progress.h"
#include "common/utf8.h"
#include "datagen/wikiprep/page_range.h"
#include "datagen/wikiprep/wikitext.h"
#include "datagen/wikiprep/xml_pages.h"
#include "formats/bz2_parallel.h"
#include "formats/doc_shards.h"
#include "formats/sentence_text.h"
#include "tokenizer/sentences.h"

namespace pretrain {
namespace {

using nlohmann::json;

const char* format_name(WikiprepFormat f) { return f == WikiprepFormat::jsonl ? kFormatDocs : kFormatSentences; }
const char* shard_prefix(WikiprepFormat f) { return f == WikiprepFormat::jsonl ? "docs" : "sentences"; }
const char* shard_suffix(WikiprepFormat f) { return f == WikiprepFormat::jsonl ? ".jsonl.zst" : ".txt"; }

// What became of one page. Decided in order by the XML stage (namespace, redirect) or by the
// cleaning stage (too short); counted in order by the writing stage.
enum class Outcome : uint8_t { article, redirect_kept, redirect_skipped, namespace_skipped, short_skipped };

struct Item {
  uint64_t ordinal = 0;  // the page's position in the dump
  Outcome outcome = Outcome::article;
  Page page;             // articles only: their wikitext until cleaned
  Document doc;          // filled by the cleaning stage
  std::string sentences;  // --format sentences: the document's lines
  uint64_t sentence_count = 0;
  uint64_t repaired = 0;  // invalid UTF-8 replaced in `sentences`
};

// The pages one decoded piece of input completed (about 1-4 MB of wikitext), in dump order.
struct Batch {
  std::vector<Item> items;
};

using Counts = WikiprepCounts;

json counts_to_json(const Counts& c) {
  return {{"pages_seen", c.pages_seen},           {"articles_written", c.articles_written},
          {"redirects_skipped", c.redirects_skipped}, {"namespaces_skipped", c.namespaces_skipped},
          {"short_skipped", c.short_skipped},     {"sentences", c.sentences},
          {"text_bytes", c.text_bytes},           {"invalid_utf8_replaced", c.invalid_utf8_replaced}};
}

Counts counts_from_json(const json& j, const std::string& source) {
  Counts c;
  for (auto [key, field] : {std::pair{"pages_seen", &Counts::pages_seen}, {"articles_written", &Counts::articles_written},
                            {"redirects_skipped", &Counts::redirects_skipped},
                            {"namespaces_skipped", &Counts::namespaces_skipped},
                            {"short_skipped", &Counts::short_skipped}, {"sentences", &Counts::sentences},
                            {"text_bytes", &Counts::text_bytes},
                            {"invalid_utf8_replaced", &Counts::invalid_utf8_replaced}}) {
    if (!j.contains(key) || !j[key].is_number_unsigned())
      throw Error(Where{source}, cat("stats.", key, ": expected an unsigned number"));
    c.*field = json_integer<uint64_t>(j[key]);
  }
  return c;
}

uint64_t code_points(std::string_view s) {
  uint64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// A document as its shard holds it: a JSON line, or the sentence lines (the writer adds the blank
// line after them). Returns the invalid UTF-8 replaced. mpirun ranks keep documents so in parts.
uint64_t serialize(WikiprepFormat format, const Item& item, std::string& out) {
  if (format == WikiprepFormat::jsonl) return append_doc_json_line(item.doc, out);
  out.append(item.sentences);
  return item.repaired;
}

// The bytes a serialized document takes in a shard: what the size rule of --shard-bytes counts.
uint64_t shard_bytes_of(WikiprepFormat format, std::string_view serialized) {
  return format == WikiprepFormat::jsonl ? serialized.size() : SentenceTextWriter::document_bytes(serialized);
}

// Where documents go: the zstd JSON-lines shards, or Google's sentence text.
class ShardOutput {
 public:
  virtual ~ShardOutput() = default;
  virtual void add(const Item& item) = 0;  // may commit the shard before it
  // The same for a document serialize() made (with the invalid UTF-8 that replaced).
  virtual void add_serialized(std::string_view serialized, uint64_t replaced) = 0;
  virtual void close_shard() = 0;
  virtual const std::vector<ShardEntry>& shards() const = 0;  // committed by this run
  virtual uint64_t text_bytes() const = 0;                    // by this run, uncompressed
  virtual uint64_t invalid_utf8_replaced() const = 0;
  // Closes the last shard; the manifest is `base` plus this run's shards.
  virtual Manifest finish(Manifest base) = 0;
};

class DocsOutput final : public ShardOutput {
 public:
  DocsOutput(const std::string& dir, DocShardOptions options) : writer_(dir, std::move(options)) {}
  void add(const Item& item) override { writer_.add(item.doc); }
  void add_serialized(std::string_view line, uint64_t replaced) override { writer_.add_serialized(line, replaced); }
  void close_shard() override { writer_.close_shard(); }
  const std::vector<ShardEntry>& shards() const override { return writer_.shards(); }
  uint64_t text_bytes() const override { return writer_.jsonl_bytes(); }
  uint64_t invalid_utf8_replaced() const override { return writer_.invalid_utf8_replaced(); }
  // Wikiprep::finish writes the manifest once, with its counts and complete=true.
  Manifest finish(Manifest base) override { return writer_.finish_manifest(std::move(base)); }

 private:
  DocShardWriter writer_;
};

// sentences-00000.txt …: Google's sentence text (SentenceTextWriter), a shard closed before a
// document would take it past shard_bytes (a lone larger document gets a shard of its own).
class SentencesOutput final : public ShardOutput {
 public:
  SentencesOutput(std::string dir, uint64_t shard_bytes, uint64_t first_index)
      : dir_(std::move(dir)), shard_bytes_(shard_bytes), next_index_(first_index) {}

  void add(const Item& item) override { add_serialized(item.sentences, item.repaired); }
  void add_serialized(std::string_view lines, uint64_t replaced) override {
    uint64_t bytes = SentenceTextWriter::document_bytes(lines);
    if (file_ && file_->documents() > 0 && file_->bytes_written() + bytes > shard_bytes_) close_shard();
    if (!file_)
      file_ = std::make_unique<SentenceTextWriter>(
          path_join(dir_, wikiprep_shard_name(WikiprepFormat::sentences, next_index_++)));
    file_->add_document(lines);
    text_bytes_ += bytes;
    invalid_ += replaced;
  }
  void close_shard() override {
    if (!file_) return;
    uint64_t bytes = file_->bytes_written();
    file_->commit();
    shards_.push_back(ShardEntry{base_name(file_->path()), file_->documents(), bytes, hex64(file_->xxh3()), {}});
    file_.reset();
  }
  const std::vector<ShardEntry>& shards() const override { return shards_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t invalid_utf8_replaced() const override { return invalid_; }
  Manifest finish(Manifest base) override {
    close_shard();
    Manifest m = std::move(base);
    m.format = kFormatSentences;
    m.shards.insert(m.shards.end(), shards_.begin(), shards_.end());
    m.stats["documents"] = m.total_records();
    return m;
  }

 private:
  std::string dir_;
  uint64_t shard_bytes_, next_index_;
  std::unique_ptr<SentenceTextWriter> file_;
  uint64_t text_bytes_ = 0, invalid_ = 0;
  std::vector<ShardEntry> shards_;
};

// An mpirun rank's documents, serialized into one file of its own (`<part>.data`) with each one's
// size (`<part>.sizes`, little-endian uint64): the ranks that write the shards read them back. No
// shard is committed while parts are written, so the pipeline never checkpoints.
class PartOutput final : public ShardOutput {
 public:
  PartOutput(const std::string& part, WikiprepFormat format) : data_(part + ".data"), format_(format) {}
  void add(const Item& item) override {
    line_.clear();
    invalid_ += serialize(format_, item, line_);
    data_.write(line_);
    sizes_.push_back(line_.size());
    text_bytes_ += shard_bytes_of(format_, line_);
  }
  void add_serialized(std::string_view, uint64_t) override { throw std::logic_error("PartOutput::add_serialized"); }
  void close_shard() override {}
  const std::vector<ShardEntry>& shards() const override { return none_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t invalid_utf8_replaced() const override { return invalid_; }
  Manifest finish(Manifest base) override { return base; }

  const std::vector<uint64_t>& sizes() const { return sizes_; }
  uint64_t data_bytes() const { return data_.bytes_written(); }
  void commit(const std::string& part) {
    data_.commit();
    AtomicFile sizes(part + ".sizes");
    sizes.write(sizes_.data(), sizes_.size() * sizeof(uint64_t));
    sizes.commit();
  }

 private:
  AtomicFile data_;
  WikiprepFormat format_;
  std::string line_;
  std::vector<uint64_t> sizes_;
  uint64_t text_bytes_ = 0, invalid_ = 0;
  std::vector<ShardEntry> none_;
};

// Reads a part's documents back in order, from its data file and their sizes.
class PartReader {
 public:
  PartReader(const std::string& part) : path_(part + ".data"), file_(std::fopen(path_.c_str(), "rb")) {
    if (!file_) throw_errno("cannot open", path_);
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~PartReader() { std::fclose(file_); }
  PartReader(const PartReader&) = delete;
  PartReader& operator=(const PartReader&) = delete;
  void skip(uint64_t bytes) {
    if (::fseeko(file_, static_cast<off_t>(bytes), SEEK_CUR) != 0) throw_errno("cannot seek in", path_);
  }
  std::string_view next(uint64_t size) {
    doc_.resize(size);
    if (std::fread(doc_.data(), 1, size, file_) != size)
      throw Error(Where{path_}, cat("expected ", size, " more bytes of a document (the part is shorter than its sizes say)"));
    return doc_;
  }

 private:
  std::string path_;
  std::FILE* file_;
  std::string doc_;
};

std::vector<uint64_t> read_sizes(const std::string& part) {
  std::string bytes = read_file(part + ".sizes");
  if (bytes.size() % sizeof(uint64_t) != 0)
    throw Error(Where{part + ".sizes"}, "expected a whole number of 8-byte sizes");
  std::vector<uint64_t> sizes(bytes.size() / sizeof(uint64_t));
  std::memcpy(sizes.data(), bytes.data(), bytes.size());
  return sizes;
}

// Where shards start in the documents of the ranks' parts, in dump order: the --shard-bytes rule
// run over the document sizes, handed from rank to rank (the shard open at the end of a part goes
// on in the next).
struct ShardCursor {
  uint64_t index = 0;  // of the open shard, or of the next one when none is open
  uint64_t open_docs = 0, open_bytes = 0;
};

struct ShardStart {
  uint64_t index = 0, doc = 0, byte = 0;  // shard index; the part's document and byte it starts at
};

// "docs-00012.jsonl.zst" → 12 when it is one of this format's shard names.
std::optional<uint64_t> shard_index(WikiprepFormat format, const std::string& name) {
  std::string prefix = std::string(shard_prefix(format)) + "-", suffix = shard_suffix(format);
  if (name.size() != prefix.size() + 5 + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return std::nullopt;
  uint64_t index = 0;
  for (size_t i = prefix.size(); i < prefix.size() + 5; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    index = index * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return index;
}

class Wikiprep {
 public:
  explicit Wikiprep(const WikiprepOptions& options) : o_(options) {}

  WikiprepStats run() {
    if (Communicator::world().distributed()) return run_ranks(Communicator::world());
    auto start = std::chrono::steady_clock::now();
    check_options();
    const DirLock lock(o_.output_dir);  // one run per directory, for all of run()
    Bz2ReaderOptions reader_options;
    reader_options.threads = std::max(1, max_threads());
    reader_options.read_size = 4u << 20;  // plain input: 4 MB pieces keep batches small
    Bz2Reader reader(o_.input, reader_options);
    base_ = base_manifest(reader);
    if (o_.resume) {
      if (auto done = load_resume_point()) return *done;
    } else {
      remove_outputs_from(0);
    }
    counts_ = baseline_;
    open_output(kept_.size());
    checkpoint(counts_);
    process(reader);
    WikiprepStats stats = finish(reader, start);
    remove_parts();  // an interrupted mpirun run's, now of no use
    log_summary(stats);
    return stats;
  }

 private:
  // The ranks' parts (.work/wikiprep-part-*) and .work itself once empty.
  void remove_parts() const {
    const std::string work = path_join(o_.output_dir, ".work");
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(work, ec))
      if (entry.path().filename().string().starts_with("wikiprep-part-")) std::filesystem::remove(entry.path(), ec);
    if (std::filesystem::is_empty(work, ec) && !ec) std::filesystem::remove(work, ec);
  }

  // ---- mpirun: the ranks share the dump --------------------------------------------------------
  //
  // 1. Rank r reads bytes [r·size/N, (r+1)·size/N) of the dump (a bz2 range from its first block;
  //    PageRangeFeeder says which pages are its own) through the usual pipeline, and writes its
  //    documents serialized into .work/wikiprep-part-R-of-N.{data,sizes} and a .json that marks
  //    the part done (a --resume at the same N keeps done parts).
  // 2. The --shard-bytes rule runs over the documents' sizes from rank to rank, so every rank
  //    knows where the shards start; each rank writes the shards that start in its part (reading
  //    on into the next parts for the last one) with the same writer and rule as one process.
  // 3. Rank 0 gathers the counts and shard lists and writes the manifest, as one process would.
  // A rank that fails ends the job (wikiprep_main aborts it); the manifest says complete=false
  // until the end, and shards are always rewritten (parts are the checkpoints).
  WikiprepStats run_ranks(const Communicator& world) {
    auto start = std::chrono::steady_clock::now();
    check_options();
    if (o_.input == "-") throw UsageError("under mpirun every rank reads the dump itself: give a file, not stdin");
    if (o_.stop_after_shards) throw UsageError("--stop-after-shards is for one process, not under mpirun");
    const int rank = world.rank(), ranks = world.size();
    const auto lock = lock_dir_for_job(o_.output_dir, world);  // one job per directory; its ranks share it
    const uint64_t size = file_size(o_.input);
    file_size_ = size;
    ranked_ = true;
    {
      Bz2Reader probe(o_.input);
      base_ = base_manifest(probe);
      auto piece = probe.next_piece();  // the first bytes say whether it is bz2
      input_is_bz2_ = probe.is_bz2();
    }
    std::optional<WikiprepStats> done;
    if (rank == 0) {
      make_dirs(o_.output_dir);
      if (o_.resume) done = load_resume_point();
      if (!done) {
        if (!kept_.empty()) log_info("under mpirun the shards are written again from the ranks' parts");
        kept_.clear();
        skip_pages_ = 0;
        baseline_ = Counts();
        remove_outputs_from(0);
        Manifest m = base_;
        m.complete = false;
        m.stats = counts_to_json(Counts());
        m.extra["resume"] = {{"pages_seen", 0}, {"shards", 0}};
        m.write(path_join(o_.output_dir, kManifestName));
        make_dirs(path_join(o_.output_dir, ".work"));
      }
    }
    uint8_t complete = done.has_value();
    world.broadcast(&complete, 1, 0);
    if (complete) return done ? *done : WikiprepStats{};

    const std::string part = path_join(o_.output_dir, cat(".work/wikiprep-part-", rank, "-of-", ranks));
    const json key = {{"input", base_.extra["input"]}, {"options", options_json()}, {"part", {rank, ranks}}};
    json summary;
    std::vector<uint64_t> sizes;
    fault_point("part");
    if (o_.resume && load_part(part, key, summary, sizes)) {
      log_info("--resume: rank ", rank, "'s part is done: ", sizes.size(), " documents");
    } else {
      summary = make_part(part, key, size * uint64_t(rank) / uint64_t(ranks), size * uint64_t(rank + 1) / uint64_t(ranks), sizes);
    }

    // 2. Where shards start: the rule handed down the ranks, then everyone's part sizes. Every
    // part is done first, so a job that fails from here on leaves them all for --resume.
    world.barrier();
    fault_point("shards");
    ShardCursor cursor;
    if (rank > 0) world.recv(&cursor, sizeof cursor, rank - 1, 7001);
    std::vector<ShardStart> starts;
    uint64_t byte = 0;
    for (uint64_t i = 0; i < sizes.size(); ++i) {
      uint64_t bytes = o_.format == WikiprepFormat::jsonl ? sizes[i] : sizes[i] + 1;
      if (cursor.open_docs > 0 && cursor.open_bytes + bytes > o_.shard_bytes) cursor = {cursor.index + 1, 0, 0};
      if (cursor.open_docs == 0) starts.push_back({cursor.index, i, byte});
      ++cursor.open_docs;
      cursor.open_bytes += bytes;
      byte += sizes[i];
    }
    if (rank + 1 < ranks) world.send(&cursor, sizeof cursor, rank + 1, 7001);
    // Per rank: documents, and how many of them (and bytes) finish the shard open at its start.
    const uint64_t prefix_docs = starts.empty() ? sizes.size() : starts.front().doc;
    const uint64_t prefix_bytes = starts.empty() ? byte : starts.front().byte;
    std::vector<uint64_t> mine = {sizes.size(), prefix_docs, prefix_bytes}, all(3 * size_t(ranks));
    world.all_gather(mine.data(), all.data(), mine.size() * sizeof(uint64_t));

    // Rank 0 keeps its writer for the manifest (format-specific parts of it), as one process does.
    if (!starts.empty() || rank == 0) {
      kept_.clear();
      open_output(starts.empty() ? 0 : starts.front().index);
    }
    if (!starts.empty()) write_shards(part, sizes, starts.front(), ranks, all);
    std::vector<ShardEntry> written;
    if (out_) {
      out_->close_shard();
      written = out_->shards();
      if (written.size() != starts.size())
        throw Error(Where{o_.output_dir}, cat("rank ", rank, " wrote ", written.size(), " shards where the plan has ",
                                              starts.size(), " (the parts changed while they were read?)"));
    }
    json entries = json::array();
    for (const ShardEntry& e : written) entries.push_back({e.file, e.records, e.bytes, e.xxh3});
    summary["shards"] = entries;
    std::vector<std::string> summaries = world.all_gather_strings(summary.dump());
    world.barrier();  // every shard is committed
    if (rank != 0) return WikiprepStats{};

    // 3. The manifest: the counts add up to one process's, the shards in dump order.
    counts_ = Counts();
    xml_bytes_ = 0;
    warnings_.clear();
    std::vector<ShardEntry> later;
    for (int r = 0; r < ranks; ++r) {
      json j = json::parse(summaries[size_t(r)]);
      Counts c = counts_from_json(j["counts"], part);
      for (auto field : {&Counts::pages_seen, &Counts::articles_written, &Counts::redirects_skipped, &Counts::namespaces_skipped,
                         &Counts::short_skipped, &Counts::sentences, &Counts::text_bytes, &Counts::invalid_utf8_replaced})
        counts_.*field += c.*field;
      xml_bytes_ += json_integer<uint64_t>(j["xml_bytes"]);
      for (const auto& w : j["warnings"]) warnings_.push_back(w.get<std::string>());
      if (r > 0)
        for (const auto& e : j["shards"]) later.push_back(ShardEntry{e[0], e[1], e[2], e[3], {}});
    }
    bytes_in_ = size;
    later_shards_ = std::move(later);
    if (!site_.present) site_ = site_of(o_.input);  // a resumed part leaves it unread
    Bz2Reader probe(o_.input);
    probe.next_piece();  // enough to say whether it is bz2
    WikiprepStats stats = finish(probe, start);
    remove_parts();
    log_summary(stats);
    return stats;
  }

  // The dump's <siteinfo>, from its head alone.
  SiteInfo site_of(const std::string& path) const {
    std::string head = dump_head(path);
    if (head.empty()) return {};
    XmlPageReader xml(path, [](Page&&) {});
    xml.feed(head);
    xml.feed("</mediawiki>\n");
    xml.finish();
    return xml.siteinfo();
  }

  // Phase 1 of one rank: its share of the dump through the pipeline into a part. Returns the part's
  // summary (also written as <part>.json, which marks the part done).
  json make_part(const std::string& part, const json& key, uint64_t begin, uint64_t end, std::vector<uint64_t>& sizes) {
    share_ = Share{begin, end, begin == 0 ? std::string() : dump_head(o_.input)};
    Bz2ReaderOptions reader_options;
    reader_options.threads = std::max(1, max_threads());
    reader_options.read_size = 4u << 20;
    reader_options.start_byte = begin;
    Bz2Reader reader(o_.input, reader_options);
    auto output = std::make_unique<PartOutput>(part, o_.format);
    PartOutput& out = *output;
    out_ = std::move(output);
    counts_ = Counts();
    if (begin == 0 || !share_->head.empty()) process(reader);
    if (read_error_ || write_error_) std::rethrow_exception(write_error_ ? write_error_ : read_error_);
    out.commit(part);
    sizes = out.sizes();
    json summary = {{"key", key},
                    {"counts", counts_to_json(counts_)},
                    {"xml_bytes", xml_bytes_},
                    {"documents", sizes.size()},
                    {"data_bytes", out.data_bytes()},
                    {"warnings", warnings_}};
    write_file_atomic(part + ".json", summary.dump());
    out_.reset();
    share_.reset();
    return summary;
  }

  // A done part of an earlier run with the same input, options and N: its summary and sizes.
  bool load_part(const std::string& part, const json& key, json& summary, std::vector<uint64_t>& sizes) const {
    try {
      if (!file_exists(part + ".json")) return false;
      summary = json::parse(read_file(part + ".json"));
      if (summary.value("key", json()) != key) return false;
      sizes = read_sizes(part);
      uint64_t total = 0;
      for (uint64_t n : sizes) total += n;
      return sizes.size() == json_integer<uint64_t>(summary["documents"]) && total == json_integer<uint64_t>(summary["data_bytes"]) &&
             file_exists(part + ".data") && file_size(part + ".data") == total;
    } catch (const std::exception& e) {
      log_warn(part, ".json: not kept (", e.what(), ")");
      return false;
    }
  }

  // Phase 2 of one rank: the shards that start in its part, from `first` on; the last of them goes
  // on into the next parts (the documents `all` says finish it: 3 numbers per rank, documents,
  // documents before its first shard start, their bytes).
  void write_shards(const std::string& part, const std::vector<uint64_t>& sizes, const ShardStart& first, int ranks,
                    const std::vector<uint64_t>& all) {
    const int rank = Communicator::world().rank();
    {
      PartReader reader(part);
      reader.skip(first.byte);
      for (uint64_t i = first.doc; i < sizes.size(); ++i) out_->add_serialized(reader.next(sizes[i]), 0);
    }
    for (int r = rank + 1; r < ranks; ++r) {
      const uint64_t docs = all[3 * size_t(r)], prefix = all[3 * size_t(r) + 1];
      if (prefix > 0) {
        std::string next = path_join(o_.output_dir, cat(".work/wikiprep-part-", r, "-of-", ranks));
        std::vector<uint64_t> next_sizes = read_sizes(next);
        if (next_sizes.size() < prefix) throw Error(Where{next + ".sizes"}, cat("expected ", prefix, " documents or more"));
        PartReader reader(next);
        for (uint64_t i = 0; i < prefix; ++i) out_->add_serialized(reader.next(next_sizes[i]), 0);
      }
      if (prefix < docs) break;  // a shard starts in that part: ours ends here
    }
  }

  void check_options() const {
    if (o_.input.empty()) throw UsageError("no input dump given");
    if (o_.output_dir.empty()) throw UsageError("no output directory given (-o DIR)");
    if (o_.shard_bytes == 0) throw UsageError("--shard-bytes must be positive");
    if (o_.namespaces.empty()) throw UsageError("--namespaces needs at least one namespace");
  }

  json options_json() const {
    return {{"format", format_name(o_.format)}, {"shard_bytes", o_.shard_bytes},
            {"namespaces", o_.namespaces},      {"keep_redirects", o_.keep_redirects},
            {"min_chars", o_.min_chars},        {"zstd_level", o_.zstd_level}};
  }

  Manifest base_manifest(const Bz2Reader& reader) const {
    Manifest m;
    m.format = format_name(o_.format);
    m.tool = cat("wikiprep ", version_string());
    m.args = o_.args;
    m.extra["input"] = {{"path", o_.input}, {"size", reader.compressed_size()}};
    m.extra["options"] = options_json();
    return m;
  }

  // --resume: returns the stats of a run that is already complete, or sets up where to go on.
  std::optional<WikiprepStats> load_resume_point() {
    std::string path = path_join(o_.output_dir, kManifestName);
    if (!file_exists(path)) {
      log_info("--resume: no ", path, " yet, starting from the beginning");
      remove_outputs_from(0);
      return std::nullopt;
    }
    Manifest m = Manifest::read(path);
    if (m.format != format_name(o_.format))
      throw UsageError(cat(path, ": --resume of format ", m.format, " with --format ", format_name(o_.format)));
    if (m.extra.value("options", json()) != options_json())
      throw UsageError(cat(path, ": --resume with other options than the run it continues: it had ",
                           m.extra.value("options", json()).dump(), ", now ", options_json().dump()));
    check_same_input(m, path);
    Manifest shards_only = m;
    shards_only.complete = true;  // unfinished is what we know: check the shards
    std::vector<VerifyProblem> problems = verify_manifest(shards_only, o_.output_dir);
    if (!problems.empty())
      throw Error(Where{path_join(o_.output_dir, problems[0].file)},
                  cat("--resume: a kept shard does not match the manifest: ", problems[0].message));
    if (m.complete) {
      log_info(o_.output_dir, " is already complete (", m.shards.size(), " shards verified)");
      WikiprepStats s;
      Counts c = counts_from_json(m.stats, path);
      static_cast<Counts&>(s) = c;
      s.shards = m.shards.size();
      s.complete = true;
      return s;
    }
    const json& resume = m.extra.value("resume", json());
    if (!resume.is_object() || !resume.value("pages_seen", json()).is_number_unsigned() ||
        resume.value("shards", json()) != m.shards.size())
      throw Error(Where{path}, "extra.resume: expected {pages_seen, shards} matching the shard list");
    skip_pages_ = json_integer<uint64_t>(resume["pages_seen"]);
    baseline_ = counts_from_json(m.stats, path);
    kept_ = m.shards;
    remove_outputs_from(kept_.size());
    log_info("resuming after ", skip_pages_, " pages and ", kept_.size(), " shards");
    return std::nullopt;
  }

  void check_same_input(const Manifest& m, const std::string& path) const {
    const json& input = m.extra.value("input", json());
    std::string was = input.value("path", std::string());
    uint64_t was_size = json_integer_or<uint64_t>(input, "size", 0), size = json_integer<uint64_t>(base_.extra["input"]["size"]);
    if (was == "-" || o_.input == "-") {
      log_warn("--resume with stdin: cannot check that the input is the one the manifest was made from");
      return;
    }
    if (base_name(was) != base_name(o_.input) || (was_size && size && was_size != size))
      throw UsageError(cat(path, ": --resume on another input: it was made from ", was, " (", was_size,
                           " bytes), not ", o_.input, " (", size, " bytes)"));
  }

  // Removes this format's shards numbered `first` and up, and temp files an interrupted run left.
  void remove_outputs_from(uint64_t first) const {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(o_.output_dir, ec)) {
      std::string name = entry.path().filename().string();
      auto index = shard_index(o_.format, name);
      bool temp = name.find(".tmp-") != std::string::npos &&
                  (name.starts_with(shard_prefix(o_.format)) || name.starts_with(kManifestName));
      if (temp || (index && *index >= first)) std::filesystem::remove(entry.path(), ec);
    }
  }

  // `first_index`: of the first shard this run writes (the kept shards come before it).
  void open_output(uint64_t first_index) {
    if (o_.format == WikiprepFormat::jsonl) {
      DocShardOptions d;
      d.shard_bytes = o_.shard_bytes;
      d.zstd_level = o_.zstd_level;
      d.first_shard_index = first_index;
      // zstd's own workers (the shards' bytes are the same for any count). Level 3 takes about 0.6x
      // the CPU of reading, parsing, cleaning and escaping (0.37 vs 0.64 s per 150 MB of the bench's
      // XML), so one worker per two pipeline threads keeps compression off the critical path;
      // workers with nothing to compress just wait.
      d.threads = std::max(1, max_threads() / 2);
      out_ = std::make_unique<DocsOutput>(o_.output_dir, d);
    } else {
      out_ = std::make_unique<SentencesOutput>(o_.output_dir, o_.shard_bytes, first_index);
    }
  }

  // The manifest of an unfinished run: the committed shards and the counts at their end.
  void checkpoint(const Counts& at) const {
    Manifest m = base_;
    m.complete = false;
    m.shards = kept_;
    m.shards.insert(m.shards.end(), out_->shards().begin(), out_->shards().end());
    m.stats = counts_to_json(at);
    m.extra["resume"] = {{"pages_seen", at.pages_seen}, {"shards", m.shards.size()}};
    m.write(path_join(o_.output_dir, kManifestName));
  }

  // ---- the pipeline ------------------------------------------------------------------------

  void process(Bz2Reader& reader) {
    std::string source = o_.input == "-" ? "<stdin>" : o_.input;
    if (share_) source = cat(source, " (the share of rank ", Communicator::world().rank(), ", from byte ", share_->begin, ")");
    XmlPageReader xml(source, [this, &xml](Page&& page) { on_page(xml, std::move(page)); });
    std::optional<PageRangeFeeder> range;
    if (share_) range.emplace(xml, share_->head, share_->begin == 0);
    const uint64_t progress_base = share_ ? share_->begin : 0;
    const uint64_t progress_size = share_ ? share_->end - share_->begin : reader.compressed_size();
    Progress progress("wikiprep", progress_size, Progress::Unit::bytes);

    auto parse = tbb::make_filter<std::shared_ptr<Bz2Piece>, std::shared_ptr<Batch>>(
        tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Bz2Piece> piece) {
          auto batch = std::make_shared<Batch>();
          if (read_error_ || stop_ || (range && range->done())) return batch;  // the rest is not wanted
          try {
            std::string_view bytes = piece->bytes();
            if (range) {
              range->feed(bytes, share_cut(*piece));
              if (range->done()) reader.stop();  // what follows is the next rank's, errors included
              else piece->check();
            } else {
              xml_bytes_ += bytes.size();
              xml.feed(bytes);
              piece->check();
            }
          } catch (...) {
            read_error_ = std::current_exception();
          }
          batch->items.swap(pending_);
          progress.set(std::min(progress_size, reader.compressed_consumed() - std::min(progress_base, reader.compressed_consumed())));
          progress.set_note(cat(human_count(static_cast<double>(xml.pages())), " pages"));
          return batch;
        });
    auto clean = tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
        tbb::filter_mode::parallel, [&](std::shared_ptr<Batch> batch) {
          for (Item& item : batch->items) clean_item(item);
          return batch;
        });
    auto write = tbb::make_filter<std::shared_ptr<Batch>, void>(
        tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Batch> batch) { write_batch(*batch); });
    tbb::parallel_pipeline(reader.max_in_flight(), reader.source_filter() & parse & clean & write);

    if (!read_error_ && !stop_) {
      try {
        if (range) range->finish();
        else xml.finish();  // may hand out the last pages, or find the input cut inside a page
      } catch (...) {
        read_error_ = std::current_exception();
      }
      Batch tail;
      tail.items.swap(pending_);
      for (Item& item : tail.items) clean_item(item);
      write_batch(tail);
    }
    bytes_in_ = reader.compressed_consumed();
    if (range) xml_bytes_ = range->range_bytes();
    progress.set(progress_size);
    progress.finish();
    if (!xml.warnings().empty()) warnings_ = xml.warnings();
  }

  // Where in this piece the next rank's range begins, if it does: a bz2 range at its first block
  // that starts at or after its first byte (PageRangeFeeder), a plain one at that byte.
  size_t share_cut(const Bz2Piece& piece) const {
    if (share_->end >= file_size_) return PageRangeFeeder::npos;
    const uint64_t begin_bit = piece.compressed_begin_bit();
    if (piece.bytes().empty()) return PageRangeFeeder::npos;
    if (!input_is_bz2_) {
      uint64_t first = begin_bit / 8;
      return share_->end < first + piece.bytes().size() ? static_cast<size_t>(share_->end > first ? share_->end - first : 0)
                                                         : PageRangeFeeder::npos;
    }
    return begin_bit >= share_->end * 8 ? 0 : PageRangeFeeder::npos;
  }

  // XML stage, in dump order: keep what is wanted, count nothing yet (the writer counts in order).
  void on_page(const XmlPageReader& xml, Page&& page) {
    if (page.ordinal < skip_pages_) return;  // already in the kept shards
    if (!cleaner_) prepare_site(xml.siteinfo());
    Item item;
    item.ordinal = page.ordinal;
    if (std::find(o_.namespaces.begin(), o_.namespaces.end(), page.ns) == o_.namespaces.end()) {
      item.outcome = Outcome::namespace_skipped;
    } else if (page.redirect && !o_.keep_redirects) {
      item.outcome = Outcome::redirect_skipped;
    } else {
      item.outcome = page.redirect ? Outcome::redirect_kept : Outcome::article;
      item.page = std::move(page);
    }
    pending_.push_back(std::move(item));
  }

  // Runs once, at the first page: siteinfo precedes the pages, so it is complete by then.
  void prepare_site(const SiteInfo& site) {
    site_ = site;
    WikitextOptions options;
    auto names = [&](int64_t key, std::vector<std::string>& into) {
      auto it = site.namespaces.find(key);
      if (it != site.namespaces.end() && !it->second.empty()) into.push_back(it->second);
    };
    names(6, options.file_namespaces);
    names(14, options.category_namespaces);
    cleaner_ = std::make_unique<WikitextCleaner>(options);
    if (o_.format == WikiprepFormat::sentences) splitter_ = std::make_unique<SentenceSplitter>(site.lang);
    if (!site.present) log_warn(o_.input, ": the dump has no <siteinfo>: documents get no url");
  }

  // Cleaning stage, any thread: pure work on the item alone.
  void clean_item(Item& item) const {
    if (item.outcome != Outcome::article && item.outcome != Outcome::redirect_kept) return;
    Page& page = item.page;
    item.doc.id = std::to_string(page.id);
    item.doc.url = page_url(site_, page.id);
    item.doc.title = std::move(page.title);
    if (item.outcome == Outcome::article) {
      cleaner_->clean(page.text, item.doc.text);
      if (o_.min_chars > 0 && code_points(item.doc.text) < o_.min_chars) item.outcome = Outcome::short_skipped;
    }
    std::string().swap(page.text);  // the wikitext is done with: free it now
    if (o_.format == WikiprepFormat::sentences && item.outcome != Outcome::short_skipped) {
      auto& local = splitters_.local();
      if (!local) local = std::make_unique<SentenceSplitter>(*splitter_);
      item.sentence_count = local->append_lines(item.doc.text, item.sentences);
      item.repaired = repair_utf8(item.sentences);
      std::string().swap(item.doc.text);
      // Google's format has no empty documents: a blank line alone would end the one before.
      if (item.sentence_count == 0) item.outcome = Outcome::short_skipped;
    }
  }

  // Writing stage, in dump order.
  void write_batch(Batch& batch) {
    if (write_error_) return;
    try {
      for (Item& item : batch.items) write_item(item);
    } catch (...) {
      write_error_ = std::current_exception();
      stop_ = true;
    }
  }

  void write_item(Item& item) {
    switch (item.outcome) {
      case Outcome::redirect_skipped: ++counts_.redirects_skipped; break;
      case Outcome::namespace_skipped: ++counts_.namespaces_skipped; break;
      case Outcome::short_skipped: ++counts_.short_skipped; break;
      case Outcome::article:
      case Outcome::redirect_kept: {
        Counts before = counts_;  // every page before this one is in the committed shards
        size_t shards_before = out_->shards().size();
        out_->add(item);
        ++counts_.articles_written;
        counts_.sentences += item.sentence_count;
        counts_.text_bytes = baseline_.text_bytes + out_->text_bytes();
        counts_.invalid_utf8_replaced = baseline_.invalid_utf8_replaced + out_->invalid_utf8_replaced();
        if (out_->shards().size() != shards_before) {
          checkpoint(before);
          uint64_t shards = kept_.size() + out_->shards().size();
          if (o_.stop_after_shards && shards >= o_.stop_after_shards)
            throw WikiprepInterrupted(cat("stopped after ", shards, " shards (--stop-after-shards)"));
        }
        break;
      }
    }
    ++counts_.pages_seen;
    item = Item();  // frees the document: batches wait in the pipeline only as long as needed
  }

  WikiprepStats finish(const Bz2Reader& reader, std::chrono::steady_clock::time_point start) {
    std::exception_ptr error = write_error_ ? write_error_ : read_error_;
    if (error) {
      bool interrupted = false;
      try {
        std::rethrow_exception(error);
      } catch (const WikiprepInterrupted&) {
        interrupted = true;  // as a kill would: nothing more is committed
      } catch (...) {
      }
      // Bad input: what came before the damage is whole, so it is committed. A write error (a full
      // disk, a file-size limit) is not the input's: the open shard is left as a kill leaves it, and
      // the last checkpoint stays the resume point. Committing it would put a part of a shard under
      // its finished name, and if the manifest then fit, --resume would go on after that short shard
      // with the shards cut apart from where the uninterrupted run cuts them.
      if (!interrupted && !write_error_) commit_what_was_written();
      std::rethrow_exception(error);
    }
    Manifest base = base_;
    base.shards = kept_;
    // DocShardWriter::finish adds its own byte and repair counts to these.
    base.stats = {{"jsonl_bytes", baseline_.text_bytes}, {"invalid_utf8_replaced", baseline_.invalid_utf8_replaced}};
    Manifest m = out_->finish(base);
    if (!later_shards_.empty() || ranked_) {  // mpirun: the other ranks' shards follow rank 0's
      m.shards.insert(m.shards.end(), later_shards_.begin(), later_shards_.end());
      m.stats["documents"] = m.total_records();
      if (o_.format == WikiprepFormat::jsonl) m.stats["jsonl_bytes"] = counts_.text_bytes;
    }
    WikiprepStats s;
    static_cast<Counts&>(s) = counts_;
    s.bytes_in = bytes_in_;
    s.xml_bytes = xml_bytes_;
    for (const ShardEntry& e : m.shards) s.bytes_out += e.bytes;
    s.shards = m.shards.size();
    s.resumed_pages = skip_pages_;
    s.complete = true;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.stats.update(counts_to_json(counts_));
    m.stats.update(json{{"bytes_in", s.bytes_in}, {"xml_bytes", s.xml_bytes}, {"bytes_out", s.bytes_out},
                        {"seconds", s.seconds}});
    m.extra["site"] = {{"dbname", site_.dbname}, {"lang", site_.lang}, {"base", site_.base},
                       {"siteinfo", site_.present}, {"bz2", reader.is_bz2()}};
    if (!warnings_.empty()) m.extra["warnings"] = warnings_;
    m.complete = true;
    m.write(path_join(o_.output_dir, kManifestName));
    return s;
  }

  // After bad input: the documents before the damage go into a committed shard, and the manifest
  // says how far the run got (complete=false), so nothing is lost and --resume works.
  void commit_what_was_written() {
    try {
      out_->close_shard();
      checkpoint(counts_);
      if (counts_.pages_seen > 0)
        log_warn("wrote ", counts_.articles_written, " articles from the ", counts_.pages_seen,
                 " pages before the error; ", o_.output_dir, "/", kManifestName, " says complete=false");
    } catch (const std::exception& e) {
      log_error("could not commit the last shard after the error: ", e.what());
    }
  }

  void log_summary(const WikiprepStats& s) const {
    double secs = std::max(s.seconds, 1e-9);
    log_info("wikiprep: ", s.pages_seen, " pages seen, ", s.articles_written, " articles written, ",
             s.redirects_skipped, " redirects and ", s.namespaces_skipped, " pages of other namespaces skipped",
             o_.min_chars ? cat(", ", s.short_skipped, " under ", o_.min_chars, " chars") : std::string(),
             s.resumed_pages ? cat(" (", s.resumed_pages, " pages were already written)") : std::string());
    log_info("wikiprep: ", human_bytes(static_cast<double>(s.bytes_in)), " in (",
             human_bytes(static_cast<double>(s.xml_bytes)), " XML), ", human_bytes(static_cast<double>(s.text_bytes)),
             " of text in ", s.shards, " shards (", human_bytes(static_cast<double>(s.bytes_out)), " on disk), ",
             s.invalid_utf8_replaced, " invalid UTF-8 replaced, ", human_duration(s.seconds), ", ",
             human_count(static_cast<double>(s.pages_seen) / secs), " pages/s, ",
             human_bytes(static_cast<double>(s.xml_bytes) / secs), "/s of XML");
  }

  const WikiprepOptions& o_;
  // mpirun: this rank's range of the dump's bytes, and the dump's head for ranks after the first.
  struct Share {
    uint64_t begin = 0, end = 0;
    std::string head;
  };
  std::optional<Share> share_;
  uint64_t file_size_ = 0;
  bool input_is_bz2_ = false;
  bool ranked_ = false;                   // rank 0 of an mpirun job writes the manifest
  std::vector<ShardEntry> later_shards_;  // that job's shards written by the other ranks
  Manifest base_;                 // tool, args, input and options: every manifest starts from it
  std::vector<ShardEntry> kept_;  // shards of the run we resume
  Counts baseline_;               // counts at the end of the kept shards
  Counts counts_;                 // writing stage: counts up to the current page
  uint64_t skip_pages_ = 0;
  std::unique_ptr<ShardOutput> out_;

  // XML stage (serial): the pages completed since the last piece; the site and what depends on it.
  std::vector<Item> pending_;
  SiteInfo site_;
  std::unique_ptr<const WikitextCleaner> cleaner_;
  std::unique_ptr<const SentenceSplitter> splitter_;  // cloned once per thread
  mutable tbb::enumerable_thread_specific<std::unique_ptr<SentenceSplitter>> splitters_;

  std::exception_ptr read_error_, write_error_;
  std::atomic<bool> stop_{false};  // set by the writing stage, read by the XML stage (other threads)
  uint64_t xml_bytes_ = 0, bytes_in_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace

std::string wikiprep_shard_name(WikiprepFormat format, uint64_t index) {
  if (format == WikiprepFormat::jsonl) return DocShardWriter::shard_name(shard_prefix(format), index);
  char digits[24];
  std::snprintf(digits, sizeof digits, "%05llu", static_cast<unsigned long long>(index));
  return cat(shard_prefix(format), "-", digits, shard_suffix(format));
}

WikiprepStats run_wikiprep(const WikiprepOptions& options) { return Wikiprep(options).run(); }

}  // namespace pretrain
