// shard-tool stats: the pass over a set of shards (shard_stats.h). Each shard is counted on its own
// (shards on oneTBB workers, a BERT shard's chunks inflated in parallel inside its reader, a
// Megatron shard's documents in blocks; shard_stats_tally.cpp) into a tally; the tallies are summed
// in shard order, so the result is the same at any --threads, and turned into the report here.
#include "formats/shard_stats.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <unordered_set>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/progress.h"
#include "formats/bert_hdf5.h"
#include "formats/bert_padding.h"
#include "formats/llmc.h"
#include "formats/shard_stats_internal.h"

namespace pretrain {

namespace {

using json = nlohmann::ordered_json;
using shard_stats_internal::BertTally;
using shard_stats_internal::check_against_manifest;
using shard_stats_internal::disk_bytes;
using shard_stats_internal::DocTally;
using shard_stats_internal::IdKinds;
using shard_stats_internal::Shard;
using shard_stats_internal::tally_bert;
using shard_stats_internal::tally_docs;
using shard_stats_internal::tally_llmc;
using shard_stats_internal::tally_megatron;
using shard_stats_internal::TokenTally;

// ---------------------------------------------------------------------------------------------
// The pieces of the JSON

double share(uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; }
json share_or_null(uint64_t a, uint64_t b) { return b ? json(double(a) / double(b)) : json(nullptr); }

// One padding case: the rows a trainer computes and the tokens they hold.
json padding_case(const std::string& name, const std::string& label, uint64_t sequences, uint64_t computed,
                  uint64_t real, uint64_t unbinned) {
  return {{"case", name},
          {"label", label},
          {"sequences", sequences},
          {"tokens_computed", computed},
          {"tokens_per_real_token", share_or_null(computed, real)},
          {"padding_share", computed ? json(1.0 - share(real, computed)) : json(nullptr)},
          {"saving_vs_unbinned", unbinned ? json(1.0 - share(computed, unbinned)) : json(nullptr)}};
}

// The bin sizes to reckon: those asked for (each must divide seq_len), else padding.py's 64 and
// 32 where they divide it and are shorter.
std::vector<int64_t> bin_sizes_for(const std::vector<int64_t>& asked, int64_t seq_len) {
  if (asked.empty()) {
    std::vector<int64_t> sizes;
    for (int64_t b : {64, 32})
      if (b < seq_len && seq_len % b == 0) sizes.push_back(b);
    return sizes;
  }
  for (int64_t b : asked)
    if (b < 1 || seq_len % b != 0)
      throw UsageError(cat("--bin-size ", b, ": must divide the shards' seq_len ", seq_len, " (LDDL's bins)"));
  return asked;
}

// A count make-pretraining-shards recorded in the manifest's stats; null when it did not.
json manifest_count(const nlohmann::json& manifest_stats, const char* key) {
  const auto it = manifest_stats.find(key);
  return it != manifest_stats.end() && it->is_number_unsigned() ? json(it->get<uint64_t>()) : json(nullptr);
}

std::string detect_lang(const StatsInput& in, const std::string& asked) {
  if (!asked.empty()) return asked;
  if (in.manifest) {
    const nlohmann::json& extra = in.manifest->extra;
    if (extra.contains("site") && extra["site"].is_object() && extra["site"].contains("lang") &&
        extra["site"]["lang"].is_string() && !extra["site"]["lang"].get<std::string>().empty())
      return extra["site"]["lang"].get<std::string>();
  }
  return "en";
}

// What each kind adds to the report: its counts, where they come from, its histograms and
// sections of its own, and the figures the rate and the [UNK] share are made of.
struct Section {
  json counts = json::object(), sources = json::object(), histograms = json::object();
  json own = json::object();        // "layout", "bert", "padding", "dedup", …: into the report as they are
  json tokenizer = json::object();  // GPT: text_bytes, bytes_per_token
  std::vector<std::string> notes;
  uint64_t records = 0, tokens = 0;  // read, for the rate: documents, rows or sequences; tokens
  uint64_t unk = 0, text_tokens = 0;
};

Section docs_section(const std::vector<DocTally>& tallies, const std::string& sentence_rule, const DedupReport* report,
                     const std::string& report_path) {
  DocTally t;
  for (const DocTally& d : tallies) t.merge(d);
  Section r;
  const bool sentences = !sentence_rule.empty();
  r.records = t.documents;
  r.counts = {{"documents", t.documents}, {"empty_documents", t.empty}, {"paragraphs", t.paragraphs},
              {"sentences", sentences ? json(t.sentences) : json(nullptr)}, {"words", t.words},
              {"characters", t.chars}, {"text_bytes", t.bytes}};
  r.sources = {{"documents", "counted"}, {"paragraphs", "non-blank lines of text"},
               {"sentences", sentences ? json(sentence_rule) : json(nullptr)}, {"words", "runs of non-white-space"}};
  r.histograms = {{"document_bytes", t.doc_bytes.to_json()}, {"document_words", t.doc_words.to_json()},
                  {"document_paragraphs", t.doc_paragraphs.to_json()}};
  if (sentences) r.histograms["document_sentences"] = t.doc_sentences.to_json();
  else r.notes.push_back("sentences not counted (--no-sentences, or no sentence splitter at hand)");
  if (!report) return r;
  // The report's removed documents found here: the set is dedup's input; none: its output.
  const bool input_side = t.duplicates > 0;
  const uint64_t removed = report->removed_ids.size();
  json by_kind = json::object();
  for (const auto& [kind, n] : report->by_kind) by_kind[kind.empty() ? "unknown" : kind] = n;
  if (report->repeated_ids)
    r.notes.push_back(cat("the dedup report removes ", report->repeated_ids,
                          " documents whose id another removed one has (other sources): matched by id, they count once"));
  r.own["dedup"] = {{"report", report_path},
                    {"removed", removed},
                    {"by_kind", by_kind},
                    {"clusters", report->clusters},
                    {"found_here", t.duplicates},
                    {"basis", input_side ? "input" : "output"},
                    {"duplicated_share", input_side ? share(t.duplicates, t.documents) : share(removed, t.documents + removed)},
                    {"duplicated_byte_share", input_side ? json(share(t.duplicate_bytes, t.bytes)) : json(nullptr)}};
  return r;
}

// BERT: the set's shape, and what to reckon.
struct BertPlan {
  std::string layout;  // plain, binned, packed
  int64_t seq_len = 0, max_pack = 0;
  json max_predictions;
  std::vector<int64_t> bin_sizes;  // the --bin-size cases
  int64_t pack_case = kDefaultMaxPack;  // the --pack case's max_pack
};

Section bert_section(const std::vector<Shard>& shards, const std::vector<BertTally>& tallies,
                     const std::vector<ManifestBin>& bins, const BertPlan& plan, const IdKinds& kinds,
                     const nlohmann::json& manifest_stats) {
  BertTally t;
  std::vector<BertTally> per_bin(bins.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    t.merge(tallies[i]);
    if (shards[i].bin >= 0) per_bin[size_t(shards[i].bin)].merge(tallies[i]);
  }
  Section r;
  const int64_t seq_len = plan.seq_len;
  r.records = t.rows, r.tokens = t.real_tokens, r.unk = t.unk, r.text_tokens = t.text_tokens;
  r.counts = {{"documents", manifest_count(manifest_stats, "documents")},
              {"sentences", manifest_count(manifest_stats, "sentences")},
              {"corpus_tokens", manifest_count(manifest_stats, "tokens")},
              {"instances", t.instances},
              {"rows", t.rows},
              {"real_tokens", t.real_tokens},
              {"text_tokens", kinds.known() ? json(t.text_tokens) : json(nullptr)}};
  r.sources = {{"documents", "manifest (make-pretraining-shards: documents tokenized)"},
               {"sentences", "manifest (make-pretraining-shards: sentences tokenized)"},
               {"corpus_tokens", "manifest (make-pretraining-shards: tokens of the corpus, before instances)"},
               {"real_tokens", "input_mask"},
               {"text_tokens", "real tokens but the special ones ([CLS], [SEP])"}};
  r.histograms = {{"instance_tokens", t.instance_tokens.to_json()}};
  if (plan.max_pack > 0) {
    r.histograms["row_tokens"] = t.row_tokens.to_json();
    r.histograms["row_instances"] = t.row_instances.to_json();
  }
  r.own["bert"] = {{"seq_len", seq_len},
                   {"max_predictions", plan.max_predictions},
                   {"max_pack", plan.max_pack},
                   {"predictions", t.predictions},
                   {"predictions_per_instance", share_or_null(t.predictions, t.instances)},
                   {"nsp_random_share", share_or_null(t.nsp_random, t.instances)}};
  // Padding: as stored (per bin of a binned set), then what each layout would compute for the
  // same instances.
  const std::vector<uint64_t>& lengths = t.instance_tokens.buckets();
  const uint64_t unbinned = unbinned_tokens(lengths, seq_len), real = t.real_tokens;
  json cases = json::array(), per_length = json::array();
  uint64_t stored = 0;
  auto stored_at = [&](json key, int64_t length, const BertTally& part) {
    const uint64_t computed = part.rows * uint64_t(length);
    stored += computed;
    json row = std::move(key);
    row.update({{"seq_len", length},
                {"rows", part.rows},
                {"real_tokens", part.real_tokens},
                {"padding_share", computed ? json(1.0 - share(part.real_tokens, computed)) : json(nullptr)}});
    per_length.push_back(std::move(row));
  };
  if (bins.empty()) stored_at(json::object(), seq_len, t);
  for (size_t b = 0; b < bins.size(); ++b) stored_at({{"bin", bins[b].bin}}, bins[b].max_length, per_bin[b]);
  cases.push_back(padding_case("stored", cat("as stored (", plan.layout, ")"), t.rows, stored, real, unbinned));
  cases.push_back(padding_case("unbinned", cat("unbinned (seq_len ", seq_len, ")"), t.instances, unbinned, real, unbinned));
  for (int64_t b : plan.bin_sizes)
    cases.push_back(padding_case(cat("bin", b), cat("--bin-size ", b, " (", seq_len / b, " bins)"), t.instances,
                                 binned_tokens(lengths, seq_len, b), real, unbinned));
  const uint64_t packs = packed_rows(lengths, seq_len, plan.pack_case);
  cases.push_back(padding_case(cat("packed", plan.pack_case), cat("--pack --max-pack ", plan.pack_case), packs,
                               packs * uint64_t(seq_len), real, unbinned));
  r.own["padding"] = {{"seq_len", seq_len}, {"real_tokens", real}, {"per_seq_len", per_length}, {"cases", cases}};
  return r;
}

Section token_section(const std::vector<TokenTally>& tallies, bool llmc, const IdKinds& kinds,
                      const std::vector<uint32_t>& token_bytes, const nlohmann::json& manifest_stats,
                      const std::string& given) {
  TokenTally t;
  for (const TokenTally& d : tallies) t.merge(d);
  Section r;
  r.records = t.sequences, r.tokens = t.tokens;
  uint64_t special = 0, bytes = 0, used = 0;
  for (size_t id = 0; id < t.id_counts.size(); ++id) {
    const uint64_t n = t.id_counts[id];
    special += kinds(int64_t(id)) == IdKinds::special ? n : 0;
    r.unk += kinds(int64_t(id)) == IdKinds::unknown ? n : 0;
    bytes += id < token_bytes.size() ? n * token_bytes[id] : 0;
    used += n > 0;
  }
  if (!token_bytes.empty() && t.id_counts.size() > token_bytes.size())
    throw Error(Where{given}, cat("id ", t.id_counts.size() - 1, " occurs, past the tokenizer's ", token_bytes.size(),
                                  " ids: not the tokenizer that made the shards"));
  r.text_tokens = t.tokens - special;
  r.counts = {{"documents", t.documents},
              {"sequences", t.sequences},
              {"tokens", t.tokens},
              {"text_tokens", kinds.known() ? json(r.text_tokens) : json(nullptr)},
              {"distinct_ids", used}};
  r.sources = {{"documents", llmc ? "counted: documents cut at each end-of-text id" : "counted: the index's documents"},
               {"text_tokens", "tokens but the special ones (end of document)"}};
  r.histograms = {{"document_tokens", t.doc_tokens.to_json()}};
  if (!llmc) r.histograms["sequence_tokens"] = t.seq_tokens.to_json();
  r.tokenizer = {{"text_bytes", token_bytes.empty() ? json(nullptr) : json(bytes)},
                 {"bytes_per_token", token_bytes.empty() ? json(nullptr) : share_or_null(bytes, r.text_tokens)}};
  if (const json c = manifest_count(manifest_stats, "documents"); !c.is_null()) r.own["manifest_documents"] = c;
  r.own["padding"] = nullptr;
  r.notes.push_back("no padding: a GPT loader cuts its sequences from the documents laid end to end");
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

DedupReport read_dedup_report(const std::string& path) {
  DedupReport r;
  const std::string text = read_file(path);
  std::unordered_set<std::string> clusters, ids;
  int64_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const Where where = Where::at_line(path, line_no);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(where, "expected a JSON object (a removed document)");
    const auto id = j.find("id");
    if (id == j.end() || !(id->is_string() || id->is_number_integer()))
      throw Error(where, "expected \"id\": the removed document's id (a string or an integer)");
    r.removed_ids.push_back(id->is_string() ? id->get<std::string>() : id->dump());
    r.repeated_ids += !ids.insert(r.removed_ids.back()).second;
    const auto cluster = j.find("cluster");
    clusters.insert(cluster == j.end() ? cat("line ", line_no) : cluster->dump());
    const auto kind = j.find("kind");
    ++r.by_kind[kind != j.end() && kind->is_string() ? kind->get<std::string>() : ""];
  }
  r.clusters = clusters.size();
  return r;
}

json shard_stats(const StatsInput& in, const ShardStatsOptions& options, const StatsTextTools& tools) {
  const auto start = std::chrono::steady_clock::now();
  const std::string& format = in.format;
  const bool docs = format == kFormatDocs, megatron = format == kFormatMegatron, llmc = format == kFormatLlmc;
  const bool bert = format == kFormatBertHdf5 || format == kFormatBertHdf5Binned;
  if (!docs && !bert && !megatron && !llmc)
    throw UsageError(Where{in.given}, cat("stats reads document, BERT HDF5, Megatron and llm.c shards, not '", format, "'"));
  const Manifest* m = in.manifest ? &*in.manifest : nullptr;
  if (m && !m->complete)
    throw Error(Where{in.manifest_path}, "the run that wrote these shards did not finish (complete = false)");
  json notes = json::array();

  // The shards, and a binned set's bins.
  std::vector<Shard> shards;
  std::vector<ManifestBin> bins;
  if (m) {
    auto add_set = [&](const Manifest& set, const std::string& root, int bin) {
      for (const ShardEntry& e : set.shards) shards.push_back({path_join(root, e.file), e, root, bin});
    };
    if (format == kFormatBertHdf5Binned) {
      bins = manifest_bins(*m, in.manifest_path);
      for (size_t b = 0; b < bins.size(); ++b) {
        const std::string root = path_join(dir_name(in.manifest_path), bins[b].dir);
        const Manifest bm = Manifest::read(path_join(root, kManifestName));
        if (const std::string why = bins[b].mismatch(bm); !why.empty()) throw Error(Where{root}, why);
        add_set(bm, root, int(b));
      }
    } else {
      add_set(*m, dir_name(in.manifest_path), -1);
    }
  } else {
    for (const std::string& f : in.files) shards.push_back({f, std::nullopt, dir_name(f), -1});
  }
  if (shards.empty()) throw Error(Where{in.given}, "no shards to count");

  // BERT: the shape every shard must have, and what to reckon.
  BertPlan plan;
  if (bert) {
    if (m) {
      plan.seq_len = m->seq_len, plan.max_pack = json_integer_or<int64_t>(m->extra, "max_pack", 0);
      plan.max_predictions = m->max_predictions;
    } else {
      const BertShardReader first(shards.front().path);
      plan.seq_len = first.seq_len(), plan.max_pack = first.max_pack(), plan.max_predictions = first.max_predictions();
    }
    if (plan.seq_len < 1) throw Error(Where{in.manifest_path}, "no seq_len in the manifest of BERT shards");
    plan.layout = format == kFormatBertHdf5Binned ? "binned" : plan.max_pack > 0 ? "packed" : "plain";
    plan.bin_sizes = bin_sizes_for(options.bin_sizes, plan.seq_len);
    if (options.max_pack < 1 || options.max_pack > 127) throw UsageError(cat("--max-pack ", options.max_pack, ": expected 1 to 127"));
    plan.pack_case = options.max_pack;
  }

  // What tokenizer/ gives: sentences of documents.
  const TokenizerInfo no_tokenizer;
  const TokenizerInfo& tok = m ? m->tokenizer : no_tokenizer;
  const IdKinds kinds(tok);
  SentenceCounter sentences;
  std::string lang;
  if (docs && options.sentences && tools.sentences) {
    lang = detect_lang(in, options.lang);
    sentences = tools.sentences(lang);
  }
  // GPT: the bytes each id stands for, from the tokenizer that made the shards.
  std::vector<uint32_t> token_bytes;
  std::string bytes_why;
  if ((megatron || llmc) && tools.token_bytes && (!options.tokenizer.empty() || tok.has_record())) {
    try {
      token_bytes = tools.token_bytes(tok, in.manifest_path, options.tokenizer);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      if (!options.tokenizer.empty()) throw;
      bytes_why = e.what();
    }
  } else if (megatron || llmc) {
    bytes_why = tools.token_bytes ? "the manifest names no tokenizer (give --tokenizer)" : "no tokenizer at hand";
  }
  if (!bytes_why.empty()) notes.push_back(cat("bytes per token not known: ", bytes_why));
  int64_t eot = kGpt2EotId;
  for (const char* role : {"eod", "eos"})
    if (auto it = tok.special_ids.find(role); it != tok.special_ids.end()) {
      eot = it->second;
      break;
    }

  std::unordered_set<std::string> removed;
  std::optional<DedupReport> report;
  if (!options.dedup_report.empty()) {
    report = read_dedup_report(options.dedup_report);
    removed.insert(report->removed_ids.begin(), report->removed_ids.end());
  }

  // The pass (timed apart from the setup above: loading a tokenizer, reading a dedup report).
  const auto pass_start = std::chrono::steady_clock::now();
  const double setup_seconds = std::chrono::duration<double>(pass_start - start).count();
  uint64_t total_bytes = 0;
  for (const Shard& s : shards) total_bytes += s.entry ? s.entry->bytes : 0;
  Progress progress("stats", total_bytes, Progress::Unit::bytes);
  std::vector<DocTally> doc_tallies(docs ? shards.size() : 0);
  std::vector<BertTally> bert_tallies(bert ? shards.size() : 0);
  std::vector<TokenTally> token_tallies(megatron || llmc ? shards.size() : 0);
  std::vector<uint64_t> sizes(shards.size());
  tbb::parallel_for(size_t{0}, shards.size(), size_t{1}, [&](size_t i) {
    const Shard& s = shards[i];
    check_against_manifest(s, options.verify);
    sizes[i] = disk_bytes(s, format);
    if (docs) doc_tallies[i] = tally_docs(s, sentences, report ? &removed : nullptr);
    if (bert) {
      const int64_t shard_seq = s.bin >= 0 ? bins[size_t(s.bin)].max_length : plan.seq_len;
      bert_tallies[i] = tally_bert(s, {shard_seq, plan.max_pack}, kinds);
    }
    if (megatron) token_tallies[i] = tally_megatron(s);
    if (llmc) token_tallies[i] = tally_llmc(s, eot);
    progress.add(s.entry ? s.entry->bytes : 0);
  });
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start).count();

  uint64_t disk = 0;
  for (uint64_t b : sizes) disk += b;
  const nlohmann::json manifest_stats = m ? m->stats : nlohmann::json::object();
  Section section;
  if (docs)
    section = docs_section(doc_tallies, sentences ? cat("make-pretraining-shards' sentence splitting (ICU, ", lang, ")") : "",
                           report ? &*report : nullptr, options.dedup_report);
  if (bert) section = bert_section(shards, bert_tallies, bins, plan, kinds, manifest_stats);
  if (megatron || llmc) section = token_section(token_tallies, llmc, kinds, token_bytes, manifest_stats, in.given);

  json out = {{"stats_json_version", kStatsJsonVersion},
              {"tool", cat("shard-tool stats ", version_string())},
              {"input", in.given},
              {"format", format}};
  if (bert) out["layout"] = plan.layout;
  out.update({{"files", shards.size()},
              {"disk_bytes", disk},
              {"seconds", seconds},
              {"setup_seconds", setup_seconds},
              {"threads", max_threads()},
              {"counts", section.counts},
              {"sources", section.sources},
              {"histograms", section.histograms}});
  json tokenizer = tok.kind.empty() ? json(nullptr) : json{{"kind", tok.kind}, {"vocab_size", tok.vocab_size}};
  if (!section.tokenizer.empty()) {
    if (tokenizer.is_null()) tokenizer = json::object();
    tokenizer.update(section.tokenizer);
  }
  if (kinds.unk_id())
    tokenizer.update({{"unk_id", *kinds.unk_id()},
                      {"unk_tokens", section.unk},
                      {"unk_share", share_or_null(section.unk, section.text_tokens)}});
  out["tokenizer"] = tokenizer;
  out.update(section.own);
  for (const std::string& n : section.notes) notes.push_back(n);
  if (!m && !docs) notes.push_back("no manifest: no tokenizer, so no [UNK] share and no corpus counts");
  out["rate"] = {{"bytes_per_s", seconds > 0 ? double(disk) / seconds : 0.0},
                 {"records_per_s", seconds > 0 ? double(section.records) / seconds : 0.0},
                 {"tokens_per_s", section.tokens && seconds > 0 ? json(double(section.tokens) / seconds) : json(nullptr)}};
  out["notes"] = notes;
  return out;
}

}  // namespace pretrain
