#include "datagen/shards/make_shards.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <span>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>

#include "common/cli.h"
#include "common/counter_rng.h"
#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/progress.h"
#include "datagen/shards/python_random.h"
#include "datagen/shards/text_documents.h"
#include "datagen/shards/token_store.h"
#include "formats/bert_hdf5.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "tokenizer/sentences.h"

namespace pretrain {

nlohmann::json MakeShardsStats::to_json(int seq_len) const {
  auto share = [](uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; };
  nlohmann::json j = {{"documents", documents},
                      {"sentences", sentences},
                      {"tokens", tokens},
                      {"train_documents", train_documents},
                      {"valid_documents", valid_documents},
                      {"instances", instances},
                      {"valid_instances", valid_instances},
                      {"instance_tokens", instance_tokens},
                      {"shards", shards},
                      {"seconds", seconds},
                      {"stage_seconds", {{"tokenize", tokenize_seconds}, {"instances", instances_seconds}, {"write", write_seconds}}},
                      {"stage_cpu_seconds",
                       {{"tokenize", tokenize_cpu_seconds}, {"instances", instances_cpu_seconds}, {"write", write_cpu_seconds}}}};
  if (predictions) {
    const uint64_t all = instances + valid_instances;
    j["predictions"] = predictions;
    j["masked_fraction"] = share(predictions, instance_tokens);
    j["mask_share"] = share(masked_as_mask, predictions);
    j["kept_share"] = share(masked_kept, predictions);
    j["random_share"] = share(masked_random, predictions);
    // Google's algorithm takes a random B always when the chunk is one sentence, and by a fair
    // coin otherwise: the coin's share is the 50% one; the overall share is higher on corpora of
    // short documents. Likewise the short target is drawn once per (document, pass).
    j["nsp_random_share"] = share(random_next, all);
    j["nsp_coin_random_share"] = share(random_next - forced_random_next, all - forced_random_next);
    j["short_target_share"] = share(short_document_passes, document_passes);
    j["short_target_instance_share"] = share(short_target_instances, all);
    j["padding_share"] = 1.0 - share(instance_tokens, all * uint64_t(seq_len));
    j["length_histogram"] = {{"bin_width", std::max(1, seq_len / 16)}, {"counts", length_histogram}};
  }
  return j;
}

namespace {

// Streams of the counter RNG other than the per-(document, pass) ones.
constexpr uint64_t kValidStream = ~uint64_t{0} - 1;    // document → train or valid
constexpr uint64_t kBucketStream = ~uint64_t{0} - 2;   // instance → spill bucket
constexpr uint64_t kShuffleStream = ~uint64_t{0} - 3;  // bucket → shuffled order
constexpr uint64_t kOrderStream = ~uint64_t{0} - 4;    // gpt: document order

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

// Wall and CPU time of one stage, added to the statistics' pair when it ends.
class StageClock {
 public:
  StageClock() : wall_(std::chrono::steady_clock::now()), cpu_(process_cpu_seconds()) {}
  void add_to(double& wall, double& cpu) const {
    wall += seconds_since(wall_);
    cpu += process_cpu_seconds() - cpu_;
  }

 private:
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

std::string split_dir(const MakeShardsOptions& o, bool valid) {
  return valid ? path_join(o.output_dir, "valid") : o.output_dir;
}

// ---------------------------------------------------------------------------------------------
// Stage 1: documents → sentences → ids → token store.

nlohmann::json store_key(const MakeShardsOptions& o, const Tokenizer& tok, const TextDocumentReader& reader) {
  nlohmann::json inputs = nlohmann::json::array();
  namespace fs = std::filesystem;
  for (const auto& u : reader.units()) {
    std::error_code ec;
    auto mtime = fs::last_write_time(u.path, ec).time_since_epoch().count();
    inputs.push_back({u.path, fs::is_directory(u.path, ec) ? 0 : file_size(u.path), int64_t(mtime)});
  }
  return {{"inputs", inputs},
          {"model", model_kind_name(o.model)},
          {"lang", o.lang},
          {"tokenizer", tok.info().vocab_hash},
          {"lowercase", o.tokenizer_options.lowercase ? int(*o.tokenizer_options.lowercase) : -1},
          {"python_compat", o.tokenizer_options.python_compat},
          {"max_chars", o.tokenizer_options.max_input_chars_per_word}};
}

TokenId32 eod_id(const Tokenizer& tok) {
  auto ids = tok.special_ids();
  for (const char* role : {"eod", "eos", "sep"})
    if (auto it = ids.find(role); it != ids.end()) return it->second;
  throw UsageError(Where{tok.source()}, "the tokenizer has no end-of-document token (eod, eos or [SEP]) for GPT data");
}

using TokenizedDoc = std::vector<std::vector<TokenId32>>;

void tokenize_to_store(const MakeShardsOptions& o, const Tokenizer& tok, TextDocumentReader& reader,
                       const std::string& store_dir, const nlohmann::json& key) {
  const bool gpt = o.model == ModelKind::gpt;
  const TokenId32 eod = gpt ? eod_id(tok) : -1;
  std::optional<SentenceSplitter> splitter_proto;
  if (!gpt) splitter_proto.emplace(o.lang);
  tbb::enumerable_thread_specific<std::optional<SentenceSplitter>> splitters;
  // Continue from the last checkpoint of an interrupted run: its input documents are read again
  // (to find where to go on) but not tokenized.
  std::optional<TokenStoreWriter::Checkpoint> from;
  if (o.resume) from = TokenStoreWriter::resume_point(store_dir, key);
  TokenStoreWriter writer = from ? TokenStoreWriter(store_dir, *from) : TokenStoreWriter(store_dir);
  uint64_t input_documents = 0;
  if (from) {
    log_info(cat("--resume: the token store holds ", from->documents, " documents (", from->tokens,
                 " tokens) from an interrupted run; tokenizing from input document ", from->input_documents));
    for (RawDocument doc; input_documents < from->input_documents; ++input_documents)
      if (!reader.next(doc)) throw Error(Where{store_dir}, "the inputs hold fewer documents than the checkpoint says");
  }
  Progress progress("tokenize", reader.total_bytes(), Progress::Unit::bytes);
  uint64_t text_since_checkpoint = 0;

  struct Batch {
    std::vector<RawDocument> docs;
    std::vector<TokenizedDoc> out;
    uint64_t text_bytes = 0;  // of the documents' text, which spaces the checkpoints
    uint64_t end_bytes = 0;   // input bytes read through this batch (read here, not from the reader,
                              // which the input stage is advancing on another thread)
  };
  const size_t max_batch_docs = 256, max_batch_bytes = size_t{4} << 20;
  tbb::parallel_pipeline(
      size_t(2 * max_threads() + 2),
      tbb::make_filter<void, std::shared_ptr<Batch>>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) {
            auto batch = std::make_shared<Batch>();
            size_t bytes = 0;
            RawDocument doc;
            while (batch->docs.size() < max_batch_docs && bytes < max_batch_bytes && reader.next(doc)) {
              bytes += doc.text.size();
              for (const auto& s : doc.sentences) bytes += s.size();
              batch->docs.push_back(std::move(doc));
            }
            if (batch->docs.empty()) fc.stop();
            batch->text_bytes = bytes;
            batch->end_bytes = reader.bytes_read();
            return batch;
          }) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<Batch> batch) {
                batch->out.resize(batch->docs.size());
                for (size_t i = 0; i < batch->docs.size(); ++i) {
                  RawDocument& doc = batch->docs[i];
                  TokenizedDoc& out = batch->out[i];
                  if (gpt) {
                    // The whole text, as Megatron's preprocess_data.py encodes a JSON document.
                    std::string text = doc.presplit ? std::string() : std::move(doc.text);
                    for (size_t k = 0; k < doc.sentences.size(); ++k) text += (k ? "\n" : "") + doc.sentences[k];
                    std::vector<TokenId32> ids;
                    tok.encode_into(text, ids);
                    if (!ids.empty()) {
                      ids.push_back(eod);
                      out.push_back(std::move(ids));
                    }
                    continue;
                  }
                  if (!doc.presplit) {
                    auto& local = splitters.local();
                    if (!local) local.emplace(*splitter_proto);
                    doc.sentences = local->split(doc.text);
                  }
                  for (const auto& sentence : doc.sentences) {
                    std::vector<TokenId32> ids;
                    tok.encode_into(sentence, ids);
                    if (!ids.empty()) out.push_back(std::move(ids));
                  }
                }
                return batch;
              }) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(tbb::filter_mode::serial_in_order,
                                                         [&](std::shared_ptr<Batch> batch) {
                                                           for (const auto& d : batch->out) writer.add_document(d);
                                                           input_documents += batch->docs.size();
                                                           text_since_checkpoint += batch->text_bytes;
                                                           if (text_since_checkpoint >= o.checkpoint_bytes) {
                                                             writer.checkpoint(input_documents, key);
                                                             text_since_checkpoint = 0;
                                                           }
                                                           progress.set(batch->end_bytes);
                                                           progress.set_note(cat(writer.documents(), " documents, ",
                                                                                 writer.tokens(), " tokens"));
                                                         }));
  progress.finish();
  writer.commit(key);
}

// ---------------------------------------------------------------------------------------------
// Documents of one split (train or valid) of the store, renumbered 0..n-1; global ids kept for
// the RNG streams, so a document's instances do not depend on which other documents share its split.

// A store larger than its resident budget is read through pread windows (TokenStore::read_sentence):
// through the map, each random next-sentence read that lands on a released region costs a fault.
// Instances of 512 MB of text, 1 thread, CPU s: 5.6 all mapped (the store fits its budget), 17.0
// mapped with a 64 MiB budget, 7.7 through windows with the same budget.
class SplitCorpus final : public DocumentCorpus {
 public:
  SplitCorpus(const TokenStore& store, std::vector<uint32_t> docs, uint64_t resident_budget)
      : store_(store), docs_(std::move(docs)), windowed_(store.num_tokens() * sizeof(TokenId32) > resident_budget) {}
  size_t num_documents() const override { return docs_.size(); }
  size_t num_sentences(size_t d) const override { return store_.num_sentences(docs_[d]); }
  std::span<const TokenId32> sentence(size_t d, size_t i) const override {
    return windowed_ ? store_.read_sentence(docs_[d], i) : store_.sentence(docs_[d], i);
  }
  uint32_t global(size_t d) const { return docs_[d]; }
  void release_pages() const { store_.release_pages(); }
  uint64_t tokens() const {
    uint64_t n = 0;
    for (uint32_t d : docs_) n += store_.document_tokens(d).size();
    return n;
  }

 private:
  const TokenStore& store_;
  std::vector<uint32_t> docs_;
  bool windowed_;
};

bool is_valid_document(const MakeShardsOptions& o, uint32_t d) {
  if (o.valid_fraction <= 0) return false;
  CounterRng rng(o.seed, d, kValidStream);
  return rng.random() < o.valid_fraction;
}

// ---------------------------------------------------------------------------------------------
// Shards of one split: numbered files committed one at a time, the manifest rewritten after each.

class ShardSeries {
 public:
  ShardSeries(std::string dir, std::string ext, Manifest base, std::vector<uint64_t> sizes, bool resume,
              int stop_after)
      : dir_(std::move(dir)), ext_(std::move(ext)), base_(std::move(base)), sizes_(std::move(sizes)),
        stop_after_(stop_after) {
    make_dirs(dir_);
    const std::string manifest_path = path_join(dir_, kManifestName);
    if (!resume || !file_exists(manifest_path)) return;
    Manifest old = Manifest::read(manifest_path);
    if (old.extra.value("key", nlohmann::json()) != base_.extra.at("key")) {
      log_warn(cat("--resume: ", manifest_path, " was made with other inputs or options; starting this split over"));
      return;
    }
    Manifest kept = old;
    // An interrupted run's manifest (complete = false) lists the shards it finished: verify those
    // like any other, rather than stopping at the manifest's own "did not finish".
    kept.complete = true;
    auto problems = verify_manifest(kept, dir_);
    if (!problems.empty()) {
      log_warn(cat("--resume: ", problems[0].file, ": ", problems[0].message, "; rewriting the shards from there"));
      // Keep the shards before the first bad one (the problem may name a shard's companion .idx).
      auto names = [&](const ShardEntry& e) { return e.file == problems[0].file || e.companions.count(problems[0].file); };
      size_t good = 0;
      while (good < kept.shards.size() && !names(kept.shards[good])) ++good;
      kept.shards.resize(good);
    }
    entries_ = kept.shards;
    log_info(cat("--resume: ", entries_.size(), " shard(s) in ", dir_, " already written"));
  }

  size_t count() const { return sizes_.size(); }
  uint64_t size(size_t shard) const { return sizes_[shard]; }
  bool kept(size_t shard) const { return shard < entries_.size(); }
  std::string name(size_t shard) const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "train-%05zu", shard);
    return std::string(buf) + ext_;
  }
  std::string path(size_t shard) const { return path_join(dir_, name(shard)); }

  void committed(size_t shard, uint64_t records, const std::map<std::string, std::string>& companions = {}) {
    ShardEntry e = Manifest::describe(dir_, name(shard), records);
    for (const auto& [file, _] : companions) e.companions[file] = hex64(xxh3_file(path_join(dir_, file)));
    entries_.push_back(e);
    Manifest m = base_;
    m.complete = false;
    m.shards = entries_;
    m.write(path_join(dir_, kManifestName));
    if (stop_after_ > 0 && ++written_ >= stop_after_)
      throw MakeShardsInterrupted(cat("stopped after ", written_, " shard(s) as asked (--stop-after-shards)"));
  }
  void finish(const nlohmann::json& stats) {
    Manifest m = base_;
    m.complete = true;
    m.shards = entries_;
    m.stats = stats;
    m.write(path_join(dir_, kManifestName));
  }

 private:
  std::string dir_, ext_;
  Manifest base_;
  std::vector<uint64_t> sizes_;
  std::vector<ShardEntry> entries_;
  int stop_after_;
  int written_ = 0;
};

// n records into k shards of equal size, the first n % k one larger.
std::vector<uint64_t> equal_sizes(uint64_t n, int k) {
  std::vector<uint64_t> sizes(size_t(std::max(1, k)), n / uint64_t(std::max(1, k)));
  for (uint64_t i = 0; i < n % sizes.size(); ++i) ++sizes[i];
  return sizes;
}

// ---------------------------------------------------------------------------------------------
// BERT instance records in spill files, 4-byte aligned so that a record is read in place:
// u16 length n, u16 length of [CLS] A [SEP], u8 predictions p, u8 flags (1: random next, 2: short
// target, 4: forced random next, 8: first of its document and pass), u16 0, int32 tokens[n],
// int32 labels[p], u16 positions[p], u16 0 when p is odd.
constexpr int kSpillFormat = 2;  // in spill.json: a bucket of another layout is made again

size_t spill_record_bytes(size_t n, size_t p) { return 8 + 4 * n + 4 * p + 2 * p + (p & 1) * 2; }

void serialize(const BertInstance& inst, std::string& out) {
  const uint16_t n = uint16_t(inst.tokens.size());
  uint16_t a_len = 0;
  while (a_len < n && inst.segment_ids[a_len] == 0) ++a_len;
  const uint8_t p = uint8_t(inst.masked_lm_positions.size());
  const uint8_t flags = uint8_t((inst.is_random_next ? 1 : 0) | (inst.short_target ? 2 : 0) |
                                (inst.forced_random_next ? 4 : 0) | (inst.first_of_document ? 8 : 0));
  const size_t at = out.size();
  out.resize(at + spill_record_bytes(n, p));
  char* q = out.data() + at;
  const uint16_t header[4] = {n, a_len, uint16_t(p | flags << 8), 0};
  std::memcpy(q, header, 8);
  std::memcpy(q + 8, inst.tokens.data(), size_t(n) * 4);
  std::memcpy(q + 8 + size_t(n) * 4, inst.masked_lm_labels.data(), size_t(p) * 4);
  uint16_t* positions = reinterpret_cast<uint16_t*>(q + 8 + size_t(n) * 4 + size_t(p) * 4);
  for (size_t k = 0; k < p; ++k) positions[k] = uint16_t(inst.masked_lm_positions[k]);
  if (p & 1) positions[p] = 0;
}

// A spill record read in place (`data` 4-byte aligned, as records are in a bucket read whole).
struct SpillRecord {
  std::span<const TokenId32> tokens;
  std::span<const TokenId32> labels;
  const uint16_t* positions = nullptr;
  uint16_t a_len = 0;
  uint8_t flags = 0;
  size_t bytes = 0;

  // Checks that the record fits in [data, data + size) and is consistent; the throw names the
  // bucket file and offset.
  SpillRecord(const char* data, size_t size, const std::string& file, size_t offset) {
    uint16_t header[4];
    if (size < 8) throw Error(Where::at_offset(file, int64_t(offset)), "truncated spill record");
    std::memcpy(header, data, 8);
    const size_t n = header[0], p = header[2] & 0xff;
    a_len = header[1];
    flags = uint8_t(header[2] >> 8);
    bytes = spill_record_bytes(n, p);
    if (size < bytes || a_len > n) throw Error(Where::at_offset(file, int64_t(offset)), "truncated spill record");
    tokens = {reinterpret_cast<const TokenId32*>(data + 8), n};
    labels = {reinterpret_cast<const TokenId32*>(data + 8 + 4 * n), p};
    positions = reinterpret_cast<const uint16_t*>(data + 8 + 4 * n + 4 * p);
    for (size_t k = 0; k < p; ++k)
      if (positions[k] >= n) throw Error(Where::at_offset(file, int64_t(offset)), "spill record masks past its tokens");
  }

  // Row i of the batch, with NVIDIA's padding (0); the same values as BertInstance::write_row.
  void write_row(BertBatch& batch, int64_t i) const {
    const size_t seq = size_t(batch.seq_len), max_pred = size_t(batch.max_predictions), n = tokens.size();
    const size_t p = labels.size(), row = size_t(i) * seq, pred_row = size_t(i) * max_pred;
    TokenId32* ids = batch.input_ids.data() + row;
    std::copy(tokens.begin(), tokens.end(), ids);
    std::fill(ids + n, ids + seq, 0);
    int8_t* mask = batch.input_mask.data() + row;
    std::fill(mask, mask + n, int8_t{1});
    std::fill(mask + n, mask + seq, int8_t{0});
    int8_t* segments = batch.segment_ids.data() + row;
    std::fill(segments, segments + a_len, int8_t{0});
    std::fill(segments + a_len, segments + n, int8_t{1});
    std::fill(segments + n, segments + seq, int8_t{0});
    int32_t* pos = batch.masked_lm_positions.data() + pred_row;
    std::copy(positions, positions + p, pos);
    std::fill(pos + p, pos + max_pred, 0);
    TokenId32* lm_ids = batch.masked_lm_ids.data() + pred_row;
    std::copy(labels.begin(), labels.end(), lm_ids);
    std::fill(lm_ids + p, lm_ids + max_pred, 0);
    batch.next_sentence_labels[size_t(i)] = flags & 1;
  }
};

void count_instance(const SpillRecord& r, const BertMaskVocab& vocab, int seq_len, MakeShardsStats& s) {
  s.instance_tokens += r.tokens.size();
  s.predictions += r.labels.size();
  for (size_t k = 0; k < r.labels.size(); ++k) {
    TokenId32 now = r.tokens[r.positions[k]];
    if (now == vocab.mask)
      ++s.masked_as_mask;
    else if (now == r.labels[k])
      ++s.masked_kept;  // (a random draw of the same token also lands here: 1 in vocab size)
    else
      ++s.masked_random;
  }
  const bool random_next = r.flags & 1, short_target = r.flags & 2, forced = r.flags & 4, first = r.flags & 8;
  s.random_next += random_next;
  s.forced_random_next += forced;
  s.short_target_instances += short_target;
  s.document_passes += first;
  s.short_document_passes += first && short_target;
  const size_t width = size_t(std::max(1, seq_len / 16));
  if (s.length_histogram.empty()) s.length_histogram.assign(size_t(seq_len) / width + 1, 0);
  ++s.length_histogram[std::min(s.length_histogram.size() - 1, r.tokens.size() / width)];
}

// Writes instances, in the order given, into the series' shards.
class BertShardFiller {
 public:
  BertShardFiller(ShardSeries& series, const MakeShardsOptions& o)
      : series_(series), o_(o), batch_(kBatchRows, o.bert.seq_len, o.bert.max_predictions) {}
  void add(const SpillRecord& record) {
    while (shard_ < series_.count() && in_shard_ == series_.size(shard_)) next_shard();
    if (shard_ >= series_.count()) throw Error("internal: more instances than the shard sizes hold");
    if (!series_.kept(shard_)) {
      record.write_row(batch_, rows_);
      if (++rows_ == kBatchRows) flush();
    }
    ++in_shard_;
  }
  void finish() {
    while (shard_ < series_.count()) next_shard();
  }

 private:
  static constexpr int64_t kBatchRows = 256;  // rows handed to the writer at a time

  BertShardWriter& writer() {
    if (!writer_)
      writer_.emplace(series_.path(shard_), o_.bert.seq_len, o_.bert.max_predictions,
                      BertShardOptions{.gzip_level = o_.compression_level});
    return *writer_;
  }
  void flush() {
    if (rows_ == 0) return;
    if (rows_ < kBatchRows) batch_.resize(rows_, o_.bert.seq_len, o_.bert.max_predictions);
    writer().append(batch_);
    if (rows_ < kBatchRows) batch_.resize(kBatchRows, o_.bert.seq_len, o_.bert.max_predictions);
    rows_ = 0;
  }
  void next_shard() {
    if (!series_.kept(shard_)) {
      flush();
      writer().commit();
      writer_.reset();
      series_.committed(shard_, in_shard_);
    }
    ++shard_;
    in_shard_ = 0;
  }
  ShardSeries& series_;
  const MakeShardsOptions& o_;
  std::optional<BertShardWriter> writer_;
  BertBatch batch_;
  int64_t rows_ = 0;
  size_t shard_ = 0;
  uint64_t in_shard_ = 0;
};

Manifest base_manifest(const MakeShardsOptions& o, const Tokenizer& tok, const nlohmann::json& key, const char* format) {
  Manifest m;
  m.format = format;
  m.tokenizer = tok.info();
  if (o.model == ModelKind::bert) {
    m.seq_len = o.bert.seq_len;
    m.max_predictions = o.bert.max_predictions;
  }
  m.tool = cat("make-pretraining-shards ", version_string());
  m.args = o.args;
  m.seed = o.seed;
  m.extra["key"] = key;
  return m;
}

nlohmann::json run_key(const MakeShardsOptions& o, const nlohmann::json& store_key, bool valid) {
  return {{"store", store_key},
          {"split", valid ? "valid" : "train"},
          {"seq_len", o.bert.seq_len},
          {"max_predictions", o.bert.max_predictions},
          {"masked_lm_prob", o.bert.masked_lm_prob},
          {"short_seq_prob", o.bert.short_seq_prob},
          {"whole_word_mask", o.bert.whole_word_mask},
          {"dupe_factor", o.dupe_factor},
          {"compression_level", o.compression_level},
          {"seed", o.seed},
          {"rng", o.rng == ShardRng::python ? "python" : "counter"},
          {"num_shards", o.num_shards},
          {"valid_fraction", o.valid_fraction},
          {"gpt_format", o.gpt_format == GptFormat::megatron ? "megatron" : "llmc"}};
}

int shards_for(const MakeShardsOptions& o, bool valid) {
  return valid ? std::max(1, int(std::ceil(o.num_shards * o.valid_fraction))) : o.num_shards;
}

// Raises the open-file limit to its hard maximum (spill buckets are all open at once) and
// returns how many buckets that allows.
size_t max_open_buckets() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur > 256 ? size_t(r.rlim_cur - 128) : 128;
}

// Stage 2 and 3 for one split of BERT with the counter RNG.
void bert_counter_split(const MakeShardsOptions& o, const Tokenizer& tok, const BertMaskVocab& vocab,
                        const SplitCorpus& corpus, const std::string& work, const nlohmann::json& key, bool valid,
                        MakeShardsStats& stats) {
  const std::string spill_dir = path_join(work, valid ? "spill-valid" : "spill-train");
  const std::string spill_meta = path_join(spill_dir, "spill.json");
  // Buckets: enough that one fits the memory budget (≈ 6 bytes per token and pass), at least one
  // per shard, and no more than the open-file limit allows.
  const double est_bytes = double(corpus.tokens()) * o.dupe_factor * 6.5;
  size_t buckets = std::max<size_t>(size_t(shards_for(o, valid)), size_t(std::ceil(est_bytes / double(o.bucket_bytes))));
  buckets = std::min(buckets, max_open_buckets());
  auto bucket_path = [&](size_t b) { return path_join(spill_dir, cat("bucket-", b, ".bin")); };

  std::vector<uint64_t> counts(buckets, 0);
  bool spilled = false;
  if (file_exists(spill_meta)) {
    try {
      auto meta = nlohmann::json::parse(read_file(spill_meta));
      if (meta.at("key") == key && meta.value("format", 1) == kSpillFormat && meta.at("counts").size() == buckets) {
        counts = meta.at("counts").get<std::vector<uint64_t>>();
        spilled = true;
      }
    } catch (const std::exception&) {
    }
  }
  const StageClock spill_clock;
  if (!spilled) {
    std::filesystem::remove_all(spill_dir);
    make_dirs(spill_dir);
    std::vector<std::FILE*> files(buckets);
    for (size_t b = 0; b < buckets; ++b) {
      files[b] = std::fopen(bucket_path(b).c_str(), "wb");
      if (!files[b]) throw_errno("cannot create", bucket_path(b));
    }
    Progress progress(valid ? "instances (valid)" : "instances", uint64_t(o.dupe_factor) * corpus.num_documents());
    struct Batch {
      int pass;
      size_t begin, end;
      std::vector<std::string> out;
      std::vector<uint64_t> n;
    };
    const size_t block = 64;
    int pass = 0;
    size_t next_doc = 0;
    tbb::parallel_pipeline(
        size_t(2 * max_threads() + 2),
        tbb::make_filter<void, std::shared_ptr<Batch>>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& fc) -> std::shared_ptr<Batch> {
              if (next_doc >= corpus.num_documents()) {
                next_doc = 0;
                ++pass;
              }
              if (pass >= o.dupe_factor || corpus.num_documents() == 0) {
                fc.stop();
                return nullptr;
              }
              auto b = std::make_shared<Batch>();
              b->pass = pass;
              b->begin = next_doc;
              b->end = std::min(corpus.num_documents(), next_doc + block);
              next_doc = b->end;
              return b;
            }) &
            tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
                tbb::filter_mode::parallel,
                [&](std::shared_ptr<Batch> b) {
                  b->out.assign(buckets, {});
                  b->n.assign(buckets, 0);
                  std::vector<BertInstance> instances;
                  for (size_t d = b->begin; d < b->end; ++d) {
                    instances.clear();
                    const uint64_t global = corpus.global(d);
                    CounterRng rng(o.seed, global, uint64_t(b->pass));
                    create_instances_from_document(corpus, d, o.bert, vocab, rng, instances);
                    for (size_t k = 0; k < instances.size(); ++k) {
                      const uint64_t h = CounterRng::mix(CounterRng::mix(CounterRng::mix(o.seed ^ kBucketStream) ^ global) ^
                                                         (uint64_t(b->pass) << 32 | k));
                      const size_t bucket = size_t(h % buckets);
                      serialize(instances[k], b->out[bucket]);
                      ++b->n[bucket];
                    }
                  }
                  return b;
                }) &
            tbb::make_filter<std::shared_ptr<Batch>, void>(
                tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Batch> b) {
                  for (size_t k = 0; k < buckets; ++k) {
                    if (b->out[k].empty()) continue;
                    if (std::fwrite(b->out[k].data(), 1, b->out[k].size(), files[k]) != b->out[k].size())
                      throw_errno("cannot write", bucket_path(k));
                    counts[k] += b->n[k];
                  }
                  progress.add(b->end - b->begin);
                }));
    for (size_t b = 0; b < buckets; ++b)
      if (std::fclose(files[b]) != 0) throw_errno("cannot write", bucket_path(b));
    corpus.release_pages();  // stage 3 reads the buckets, not the store
    progress.finish();
    write_file_atomic(spill_meta, nlohmann::json({{"key", key}, {"format", kSpillFormat}, {"counts", counts}}).dump() + "\n");
  }

  spill_clock.add_to(stats.instances_seconds, stats.instances_cpu_seconds);
  const StageClock write_clock;
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  (valid ? stats.valid_instances : stats.instances) += total;
  ShardSeries series(split_dir(o, valid), ".hdf5", base_manifest(o, tok, key, kFormatBertHdf5),
                     equal_sizes(total, shards_for(o, valid)), o.resume, o.stop_after_shards);
  BertShardFiller filler(series, o);
  Progress progress(valid ? "shards (valid)" : "shards", total);
  std::vector<size_t> offsets;
  for (size_t b = 0; b < buckets; ++b) {
    const std::string data = read_file(bucket_path(b));
    offsets.clear();
    offsets.reserve(counts[b]);
    for (size_t at = 0; at < data.size(); at += SpillRecord(data.data() + at, data.size() - at, bucket_path(b), at).bytes)
      offsets.push_back(at);
    if (offsets.size() != counts[b]) throw Error(Where{bucket_path(b)}, "spill bucket does not hold the records counted");
    CounterRng rng(o.seed, b, kShuffleStream - (valid ? 1 : 0));
    rng.shuffle(offsets);
    for (size_t at : offsets) {
      const SpillRecord record(data.data() + at, data.size() - at, bucket_path(b), at);
      count_instance(record, vocab, o.bert.seq_len, stats);
      filler.add(record);
    }
    progress.add(offsets.size());
  }
  filler.finish();
  progress.finish();
  stats.shards += series.count();
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  series.finish(stats.to_json(o.bert.seq_len));
}

void bert_python(const MakeShardsOptions& o, const Tokenizer& tok, const BertMaskVocab& vocab, const TokenStore& store,
                 const nlohmann::json& key, MakeShardsStats& stats) {
  InMemoryCorpus corpus;
  corpus.documents.resize(store.num_documents());
  for (size_t d = 0; d < store.num_documents(); ++d)
    for (size_t i = 0; i < store.num_sentences(d); ++i) {
      auto s = store.sentence(d, i);
      corpus.documents[d].emplace_back(s.begin(), s.end());
    }
  log_info("--rng python: building instances sequentially, as create_pretraining_data.py does");
  const StageClock instances_clock;
  auto instances = create_training_instances_python(corpus, o.bert, vocab, o.dupe_factor, int64_t(o.seed));
  instances_clock.add_to(stats.instances_seconds, stats.instances_cpu_seconds);
  const StageClock write_clock;
  stats.instances = instances.size();
  stats.train_documents = store.num_documents();
  ShardSeries series(split_dir(o, false), ".hdf5", base_manifest(o, tok, key, kFormatBertHdf5),
                     equal_sizes(instances.size(), o.num_shards), o.resume, o.stop_after_shards);
  BertShardFiller filler(series, o);
  std::string buffer;  // one instance as a spill record: the rows and statistics come from one place
  for (const auto& inst : instances) {
    buffer.clear();
    serialize(inst, buffer);
    const SpillRecord record(buffer.data(), buffer.size(), "(memory)", 0);
    count_instance(record, vocab, o.bert.seq_len, stats);
    filler.add(record);
  }
  filler.finish();
  stats.shards = series.count();
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  series.finish(stats.to_json(o.bert.seq_len));
}

BertMaskVocab mask_vocab_of(const Tokenizer& tok) {
  std::vector<std::string> entries(size_t(tok.vocab_size()));
  for (TokenId32 id = 0; id < tok.vocab_size(); ++id) entries[size_t(id)] = tok.id_to_token(id);
  return make_bert_mask_vocab(entries, tok.source());
}

// ---------------------------------------------------------------------------------------------
// GPT: documents in a seeded order into Megatron or llm.c shards.

void gpt_split(const MakeShardsOptions& o, const Tokenizer& tok, const TokenStore& store,
               const std::vector<uint32_t>& docs, const nlohmann::json& key, bool valid, MakeShardsStats& stats) {
  const bool megatron = o.gpt_format == GptFormat::megatron;
  const std::vector<uint64_t> sizes = equal_sizes(docs.size(), shards_for(o, valid));
  ShardSeries series(split_dir(o, valid), megatron ? ".bin" : ".llmc.bin",
                     base_manifest(o, tok, key, megatron ? kFormatMegatron : kFormatLlmc), sizes, o.resume,
                     o.stop_after_shards);
  const StageClock write_clock;
  const MegatronDType dtype = megatron_optimal_dtype(tok.vocab_size());
  const LlmcFormat llmc_format = tok.vocab_size() <= 65536 ? LlmcFormat::gpt2 : LlmcFormat::llama3;
  Progress progress(valid ? "gpt shards (valid)" : "gpt shards", docs.size());
  size_t next = 0;
  for (size_t shard = 0; shard < series.count(); ++shard) {
    const size_t begin = next, end = next + sizes[shard];
    next = end;
    uint64_t tokens = 0;
    for (size_t i = begin; i < end; ++i) tokens += store.document_tokens(docs[i]).size();
    stats.instance_tokens += tokens;
    (valid ? stats.valid_instances : stats.instances) += end - begin;
    if (!series.kept(shard)) {
      const std::string path = series.path(shard);
      if (megatron) {
        const std::string prefix = megatron_prefix(path);
        MegatronWriter w(prefix, dtype);
        for (size_t i = begin; i < end; ++i) {
          w.add_sequence(store.document_tokens(docs[i]));
          w.end_document();
        }
        w.finalize();
        series.committed(shard, end - begin, {{base_name(megatron_idx_path(prefix)), ""}});
      } else {
        LlmcWriter w(path, llmc_format);
        for (size_t i = begin; i < end; ++i) {
          w.add(store.document_tokens(docs[i]));
        }
        w.commit();
        series.committed(shard, w.tokens_written());
      }
    }
    progress.add(end - begin);
    store.release_pages();
  }
  progress.finish();
  stats.shards += series.count();
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  series.finish(stats.to_json(0));
}

void check_options(const MakeShardsOptions& o) {
  if (o.inputs.empty()) throw UsageError("no inputs");
  if (o.num_shards < 1) throw UsageError("--num-shards must be at least 1");
  if (o.valid_fraction < 0 || o.valid_fraction >= 1) throw UsageError("--valid-fraction must be in [0, 1)");
  if (o.dupe_factor < 1) throw UsageError("--dupe-factor must be at least 1");
  if (o.model == ModelKind::bert) {
    if (o.bert.seq_len < 5 || o.bert.seq_len > 65535) throw UsageError("--seq-len must be in [5, 65535]");
    if (o.bert.max_predictions < 1 || o.bert.max_predictions > 255)
      throw UsageError("--max-predictions must be in [1, 255]");
    if (o.bert.masked_lm_prob <= 0 || o.bert.masked_lm_prob > 1) throw UsageError("--masked-lm-prob must be in (0, 1]");
    if (o.bert.short_seq_prob < 0 || o.bert.short_seq_prob > 1) throw UsageError("--short-seq-prob must be in [0, 1]");
    if (o.compression_level < 0 || o.compression_level > 9) throw UsageError("--compression-level must be in [0, 9]");
    if (o.rng == ShardRng::python && o.valid_fraction > 0)
      throw UsageError("--rng python reproduces the Python script, which has no valid split: drop --valid-fraction");
  }
}

}  // namespace

MakeShardsStats run_make_shards(const MakeShardsOptions& o) {
  check_options(o);
  const auto t0 = std::chrono::steady_clock::now();
  MakeShardsStats stats;
  auto tok = load_tokenizer(o.tokenizer, o.tokenizer_options);
  BertMaskVocab vocab;
  if (o.model == ModelKind::bert) vocab = mask_vocab_of(*tok);  // fails early on a vocab without [MASK]

  make_dirs(o.output_dir);
  const std::string work = path_join(o.output_dir, ".work");
  const std::string store_dir = path_join(work, "store");
  make_dirs(store_dir);
  TextDocumentReader reader(o.inputs);
  const nlohmann::json skey = store_key(o, *tok, reader);
  if (o.resume && TokenStore::complete(store_dir, skey)) {
    log_info("--resume: the token store is complete; not tokenizing again");
  } else {
    const StageClock clock;
    tokenize_to_store(o, *tok, reader, store_dir, skey);
    clock.add_to(stats.tokenize_seconds, stats.tokenize_cpu_seconds);
  }
  TokenStore store(store_dir, o.store_resident_budget);
  stats.documents = store.num_documents();
  stats.sentences = store.total_sentences();
  stats.tokens = store.num_tokens();
  log_info(cat("corpus: ", stats.documents, " documents, ", stats.sentences, " sentences, ", stats.tokens, " tokens"));
  if (store.num_documents() == 0) throw Error(Where{o.inputs.front()}, "no text found in the inputs");

  if (o.model == ModelKind::bert && o.rng == ShardRng::python) {
    bert_python(o, *tok, vocab, store, run_key(o, skey, false), stats);
  } else {
    std::vector<uint32_t> train, valid;
    for (uint32_t d = 0; d < store.num_documents(); ++d) (is_valid_document(o, d) ? valid : train).push_back(d);
    stats.train_documents = train.size();
    stats.valid_documents = valid.size();
    if (o.model == ModelKind::gpt) {
      // One seeded permutation of all documents; each split keeps its documents in that order.
      std::vector<uint32_t> order(store.num_documents());
      std::iota(order.begin(), order.end(), 0u);
      CounterRng rng(o.seed, 0, kOrderStream);
      rng.shuffle(order);
      train.clear(), valid.clear();
      for (uint32_t d : order) (is_valid_document(o, d) ? valid : train).push_back(d);
      gpt_split(o, *tok, store, train, run_key(o, skey, false), false, stats);
      if (!valid.empty()) gpt_split(o, *tok, store, valid, run_key(o, skey, true), true, stats);
    } else {
      bert_counter_split(o, *tok, vocab, SplitCorpus(store, train, o.store_resident_budget), work, run_key(o, skey, false), false, stats);
      if (!valid.empty())
        bert_counter_split(o, *tok, vocab, SplitCorpus(store, valid, o.store_resident_budget), work, run_key(o, skey, true), true, stats);
    }
  }
  stats.seconds = seconds_since(t0);
  if (!o.keep_work) std::filesystem::remove_all(work);
  return stats;
}

}  // namespace pretrain
