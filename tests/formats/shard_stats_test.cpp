// shard_stats.h on small sets of every kind written here, each count checked against the number
// worked out by hand: documents (paragraphs, words, characters, sentences through a stand-in
// counter, a dedup report on either side of dedup), BERT plain, packed and binned ([UNK] share
// with the masked ids restored, NSP, the length histogram, padding as stored, unbinned, binned and
// packed), Megatron and llm.c (documents, [UNK], bytes per token through a stand-in decoder); the
// same JSON at 1 and 2 threads; damaged shards refused naming the file.
#include "formats/shard_stats.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "formats/bert_hdf5.h"
#include "formats/doc_shards.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "test_util.h"

namespace pretrain::shard_stats_test {
namespace {

using json = nlohmann::ordered_json;
using testing::error_message;
using testing::TempDir;

StatsInput input_of(const std::string& dir) {
  StatsInput in;
  in.given = dir;
  in.manifest_path = path_join(dir, kManifestName);
  in.manifest = Manifest::read(in.manifest_path);
  in.format = in.manifest->format;
  return in;
}

// Stand-ins for tokenizer/: a sentence per '.', and a vocabulary of 16 ids where id k (but 2, the
// end of a document) stands for k bytes of text.
StatsTextTools stand_ins() {
  StatsTextTools t;
  t.sentences = [](const std::string&) -> SentenceCounter {
    return [](std::string_view text) { return uint64_t(std::count(text.begin(), text.end(), '.')); };
  };
  t.token_bytes = [](const TokenizerInfo&, const std::string&, const std::string&) {
    std::vector<uint32_t> bytes(16);
    for (uint32_t id = 0; id < 16; ++id) bytes[id] = id == 2 ? 0 : id;
    return bytes;
  };
  return t;
}

// The JSON without what depends on the run (time, rate, threads).
json without_timing(json j) {
  j.erase("seconds");
  j.erase("setup_seconds");
  j.erase("rate");
  j.erase("threads");
  return j;
}

// ---------------------------------------------------------------------------------------------
// Documents

// Three documents in two shards: "a" (3 paragraphs, 6 words, 3 sentences), "b" (empty), "c"
// (Japanese: 16 bytes, 6 characters, 2 words, 1 paragraph, no '.').
const char* kTextA = "One two.\nThree four five.\n\n  Six.  ";
const char* kTextC = "東京 タワー";

std::string write_docs(const TempDir& dir) {
  const std::string out = dir.file("docs");
  DocShardOptions o;
  o.shard_bytes = 60;  // a shard per document or two
  DocShardWriter w(out, o);
  w.add({"a", "", "A", kTextA});
  w.add({"b", "", "B", ""});
  w.add({"c", "", "C", kTextC});
  w.finish();
  return out;
}

TEST(ShardStats, DocumentsCountedByHand) {
  TempDir dir;
  const std::string docs = write_docs(dir);
  const json s = shard_stats(input_of(docs), {}, stand_ins());
  EXPECT_EQ(s["format"], kFormatDocs);
  EXPECT_GE(s["files"].get<int>(), 2);
  const json& c = s["counts"];
  const uint64_t bytes_a = std::string(kTextA).size(), bytes_c = std::string(kTextC).size();
  EXPECT_EQ(bytes_c, 16u);
  EXPECT_EQ(c["documents"], 3);
  EXPECT_EQ(c["empty_documents"], 1);
  EXPECT_EQ(c["paragraphs"], 3 + 1);
  EXPECT_EQ(c["words"], 6 + 2);
  EXPECT_EQ(c["sentences"], 3);
  EXPECT_EQ(c["text_bytes"], bytes_a + bytes_c);
  EXPECT_EQ(c["characters"], bytes_a + 6);
  const json& words = s["histograms"]["document_words"];
  // Words per document 6, 0, 2 by powers of two: [0,1): 1, [2,4): 1, [4,8): 1.
  EXPECT_EQ(words["counts"], json({1, 0, 1, 1}));
  EXPECT_EQ(words["lower"], json({0, 1, 2, 4}));
  EXPECT_EQ(words["upper"], json({1, 2, 4, 8}));
  EXPECT_EQ(words["min"], 0);
  EXPECT_EQ(words["max"], 6);
  EXPECT_EQ(s["histograms"]["document_sentences"]["sum"], 3);
  EXPECT_FALSE(s.contains("padding"));
  EXPECT_FALSE(s.contains("dedup"));

  ShardStatsOptions no_sentences;
  no_sentences.sentences = false;
  const json quick = shard_stats(input_of(docs), no_sentences, stand_ins());
  EXPECT_TRUE(quick["counts"]["sentences"].is_null());
  EXPECT_FALSE(quick["histograms"].contains("document_sentences"));
  EXPECT_TRUE(shard_stats(input_of(docs), {}, {})["counts"]["sentences"].is_null());  // no splitter at hand
}

TEST(ShardStats, DedupReportOnEitherSideOfDedup) {
  TempDir dir;
  const std::string docs = write_docs(dir);
  const std::string report = dir.file("removed.jsonl");
  ShardStatsOptions o;
  o.dedup_report = report;
  // "a" removed (kept "x"): the set is dedup's input, 1 of 3 documents, its bytes of all bytes.
  write_file_atomic(report, R"({"id": "a", "source": "docs", "cluster": 7, "kept": "x"})" "\n\n");
  json d = shard_stats(input_of(docs), o, stand_ins())["dedup"];
  EXPECT_EQ(d["removed"], 1);
  EXPECT_EQ(d["clusters"], 1);
  EXPECT_EQ(d["found_here"], 1);
  EXPECT_EQ(d["basis"], "input");
  EXPECT_DOUBLE_EQ(d["duplicated_share"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(d["duplicated_byte_share"].get<double>(), double(std::string(kTextA).size()) / (std::string(kTextA).size() + 16));
  // Two removed documents none of which is here, as dedup writes them (integer ids, one cluster,
  // kept as an object): the set is dedup's output, 2 of 3 + 2.
  write_file_atomic(report,
                    R"({"index": 5, "id": 41, "source": "web/", "file": "web/a.jsonl", "record": 0, "cluster": 1, "kind": "exact", "jaccard": null, "kept": {"index": 1, "id": "a", "source": "docs/", "file": "docs/docs-00000.jsonl.zst", "record": 0}})" "\n"
                    R"({"index": 6, "id": 42, "source": "web/", "file": "web/a.jsonl", "record": 1, "cluster": 1, "kind": "near", "jaccard": 0.84, "kept": {"index": 1, "id": "a", "source": "docs/", "file": "docs/docs-00000.jsonl.zst", "record": 0}})" "\n");
  d = shard_stats(input_of(docs), o, stand_ins())["dedup"];
  EXPECT_EQ(d["removed"], 2);
  EXPECT_EQ(d["by_kind"], json::parse(R"({"exact": 1, "near": 1})"));
  EXPECT_EQ(d["clusters"], 1);
  EXPECT_EQ(d["basis"], "output");
  EXPECT_DOUBLE_EQ(d["duplicated_share"].get<double>(), 2.0 / 5);
  EXPECT_TRUE(d["duplicated_byte_share"].is_null());
  // A line that is not a removed document: an Error naming the file and line.
  write_file_atomic(report, "{\"id\": \"a\"}\n{\"cluster\": 1}\n");
  const std::string why = error_message([&] { shard_stats(input_of(docs), o, stand_ins()); });
  EXPECT_NE(why.find(report + ":2"), std::string::npos) << why;
  EXPECT_NE(why.find("\"id\""), std::string::npos) << why;
}

// ---------------------------------------------------------------------------------------------
// BERT

constexpr int32_t kUnk = 1, kCls = 2, kSep = 3, kMask = 4;

TokenizerInfo wordpiece() {
  TokenizerInfo t;
  t.kind = "wordpiece";
  t.vocab_size = 100;
  t.vocab_hash = "0123456789abcdef";
  t.special_ids = {{"pad", 0}, {"unk", kUnk}, {"cls", kCls}, {"sep", kSep}, {"mask", kMask}};
  return t;
}

BertRecord instance(std::vector<int32_t> ids, std::vector<int32_t> positions, std::vector<int32_t> originals, int nsp) {
  BertRecord r;
  r.input_ids = std::move(ids);
  r.input_mask.assign(r.input_ids.size(), 1);
  r.segment_ids.assign(r.input_ids.size(), 0);
  r.masked_lm_positions = std::move(positions);
  r.masked_lm_ids = std::move(originals);
  r.next_sentence_label = nsp;
  return r;
}

// Writes `shards` (each a list of records) into dir with a manifest of `format`.
void write_bert_set(const std::string& dir, const std::vector<std::vector<BertRecord>>& shards, int64_t seq,
                    int64_t max_pack = 0) {
  make_dirs(dir);
  Manifest m;
  m.format = kFormatBertHdf5;
  m.seq_len = seq;
  m.max_predictions = 2;
  m.tokenizer = wordpiece();
  m.stats = {{"documents", 5}, {"sentences", 17}, {"tokens", 40}};
  if (max_pack) m.extra["max_pack"] = max_pack;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string name = cat("train-0000", k, ".hdf5");
    BertShardWriter w(path_join(dir, name), seq, 2, {.max_pack = max_pack});
    for (const BertRecord& r : shards[k]) w.append(r);
    w.commit();
    m.shards.push_back(Manifest::describe(dir, name, shards[k].size()));
  }
  m.write(path_join(dir, kManifestName));
}

// Lengths 5, 8, 6, 3. An [UNK] is masked in the first (restored from masked_lm_ids), one stands
// in the second; text tokens 2 + 5 + 3 + 1 = 11. One random next sentence of four.
std::vector<std::vector<BertRecord>> plain_records() {
  return {{instance({kCls, kMask, kSep, 11, kSep}, {1}, {kUnk}, 1),
           instance({kCls, kUnk, 12, kSep, kMask, 14, 15, kSep}, {4}, {13}, 0)},
          {instance({kCls, 10, kSep, 11, 12, kSep}, {}, {}, 0), instance({kCls, 10, kSep}, {}, {}, 0)}};
}

TEST(ShardStats, BertPlainCountedByHand) {
  TempDir dir;
  const std::string set = dir.file("bert");
  write_bert_set(set, plain_records(), 8);
  ShardStatsOptions o;
  o.bin_sizes = {2, 4};
  const json s = shard_stats(input_of(set), o);
  EXPECT_EQ(s["layout"], "plain");
  const json& c = s["counts"];
  EXPECT_EQ(c["documents"], 5);  // the manifest's
  EXPECT_EQ(c["sentences"], 17);
  EXPECT_EQ(c["corpus_tokens"], 40);
  EXPECT_EQ(c["instances"], 4);
  EXPECT_EQ(c["rows"], 4);
  EXPECT_EQ(c["real_tokens"], 22);
  EXPECT_EQ(c["text_tokens"], 11);
  EXPECT_EQ(s["tokenizer"]["unk_id"], kUnk);
  EXPECT_EQ(s["tokenizer"]["unk_tokens"], 2);
  EXPECT_DOUBLE_EQ(s["tokenizer"]["unk_share"].get<double>(), 2.0 / 11);
  EXPECT_EQ(s["bert"]["predictions"], 2);
  EXPECT_DOUBLE_EQ(s["bert"]["nsp_random_share"].get<double>(), 0.25);
  const json& lengths = s["histograms"]["instance_tokens"];
  EXPECT_EQ(lengths["scale"], "exact");
  EXPECT_EQ(lengths["counts"], json({0, 0, 0, 1, 0, 1, 1, 0, 1}));
  // Padding: stored = unbinned = 4 · 8; bins of 2: 4 + 6 + 6 + 8; of 4: 4 + 8 + 8 + 8; packed
  // (≤ 3): 8 | 6 | 5 + 3 → 3 rows.
  const json& cases = s["padding"]["cases"];
  ASSERT_EQ(cases.size(), 5u);
  const std::vector<std::pair<std::string, uint64_t>> want = {
      {"stored", 32}, {"unbinned", 32}, {"bin2", 24}, {"bin4", 28}, {"packed3", 24}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(cases[i]["case"], want[i].first);
    EXPECT_EQ(cases[i]["tokens_computed"], want[i].second) << want[i].first;
    EXPECT_DOUBLE_EQ(cases[i]["tokens_per_real_token"].get<double>(), double(want[i].second) / 22) << want[i].first;
    EXPECT_DOUBLE_EQ(cases[i]["padding_share"].get<double>(), 1.0 - 22.0 / double(want[i].second));
    EXPECT_DOUBLE_EQ(cases[i]["saving_vs_unbinned"].get<double>(), 1.0 - double(want[i].second) / 32);
  }
  EXPECT_EQ(cases[4]["sequences"], 3);
  EXPECT_EQ(s["padding"]["per_seq_len"], json::parse(R"([{"seq_len": 8, "rows": 4, "real_tokens": 22, "padding_share": 0.3125}])"));

  o.max_pack = 1;
  EXPECT_EQ(shard_stats(input_of(set), o)["padding"]["cases"][4]["tokens_computed"], 32);
  o.bin_sizes = {3};
  const std::string why = error_message([&] { shard_stats(input_of(set), o); });
  EXPECT_NE(why.find("--bin-size 3"), std::string::npos) << why;
  o.bin_sizes = {};  // 64 and 32 divide no 8: none reckoned
  EXPECT_EQ(shard_stats(input_of(set), o)["padding"]["cases"].size(), 3u);
}

// Two packed rows (≤ 2 instances): [CLS] 10 [SEP] + [CLS] [UNK] [SEP] 11 [SEP] (3 + 5 tokens,
// 10 masked), then one instance of 6.
TEST(ShardStats, BertPackedCountsInstancesInRows) {
  TempDir dir;
  const std::string set = dir.file("packed");
  BertRecord row0 = instance({kCls, kMask, kSep, kCls, kUnk, kSep, 11, kSep}, {1}, {10}, 1);
  row0.position_ids = {0, 1, 2, 0, 1, 2, 3, 4};
  row0.sequence_ids = {1, 1, 1, 2, 2, 2, 2, 2};
  row0.next_sentence_positions = {0, 3};
  row0.packed_next_sentence_labels = {1, 0};
  BertRecord row1 = instance({kCls, 10, 11, kSep, 12, kSep}, {}, {}, 0);
  row1.position_ids = {0, 1, 2, 3, 4, 5};
  row1.sequence_ids = {1, 1, 1, 1, 1, 1};
  row1.next_sentence_positions = {0};
  row1.packed_next_sentence_labels = {0};
  write_bert_set(set, {{row0, row1}}, 8, 2);
  const json s = shard_stats(input_of(set), {});
  EXPECT_EQ(s["layout"], "packed");
  EXPECT_EQ(s["counts"]["instances"], 3);
  EXPECT_EQ(s["counts"]["rows"], 2);
  EXPECT_EQ(s["counts"]["real_tokens"], 14);
  EXPECT_EQ(s["counts"]["text_tokens"], 6);
  EXPECT_EQ(s["tokenizer"]["unk_tokens"], 1);
  EXPECT_DOUBLE_EQ(s["bert"]["nsp_random_share"].get<double>(), 1.0 / 3);
  EXPECT_EQ(s["histograms"]["instance_tokens"]["counts"], json({0, 0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(s["histograms"]["row_instances"]["counts"], json({0, 1, 1}));
  EXPECT_EQ(s["histograms"]["row_tokens"]["counts"], json({0, 0, 0, 0, 0, 0, 1, 0, 1}));
  // Stored: 2 rows of 8; unbinned: 3 of 8; packed (≤ 3): 6 | 5 + 3 → 2 rows.
  const json& cases = s["padding"]["cases"];
  EXPECT_EQ(cases[0]["tokens_computed"], 16);
  EXPECT_EQ(cases[1]["tokens_computed"], 24);
  EXPECT_EQ(cases.back()["tokens_computed"], 16);
  // A manifest that says the shards are not packed: refused, naming the shard.
  Manifest m = Manifest::read(path_join(set, kManifestName));
  m.extra.erase("max_pack");
  m.write(path_join(set, kManifestName));
  const std::string why = error_message([&] { shard_stats(input_of(set), {}); });
  EXPECT_NE(why.find("train-00000.hdf5"), std::string::npos) << why;
  EXPECT_NE(why.find("max_pack 2"), std::string::npos) << why;
}

// The plain records binned by 4 (make-pretraining-shards --bin-size 4): bin 0 holds the 3-token
// instance padded to 4, bin 1 the others padded to 8.
TEST(ShardStats, BertBinnedPaddingPerBin) {
  TempDir dir;
  const std::string split = dir.file("binned");
  auto records = plain_records();
  write_bert_set(path_join(split, "bin-00"), {{records[1][1]}}, 4);
  write_bert_set(path_join(split, "bin-01"), {{records[0][0], records[0][1]}, {records[1][0]}}, 8);
  Manifest m;
  m.format = kFormatBertHdf5Binned;
  m.seq_len = 8;
  m.tokenizer = wordpiece();
  m.extra["bin_size"] = 4;
  m.extra["bins"] = {ManifestBin{"bin-00", 0, 4, 1, 1}.to_json(), ManifestBin{"bin-01", 1, 8, 3, 2}.to_json()};
  m.write(path_join(split, kManifestName));
  const json s = shard_stats(input_of(split), {});
  EXPECT_EQ(s["layout"], "binned");
  EXPECT_EQ(s["files"], 3);
  EXPECT_EQ(s["counts"]["instances"], 4);
  EXPECT_EQ(s["tokenizer"]["unk_tokens"], 2);
  const json& per = s["padding"]["per_seq_len"];
  ASSERT_EQ(per.size(), 2u);
  EXPECT_EQ(per[0]["seq_len"], 4);
  EXPECT_EQ(per[0]["rows"], 1);
  EXPECT_DOUBLE_EQ(per[0]["padding_share"].get<double>(), 0.25);
  EXPECT_EQ(per[1]["real_tokens"], 19);
  EXPECT_EQ(s["padding"]["cases"][0]["tokens_computed"], 4 + 3 * 8);  // as stored
  EXPECT_EQ(s["padding"]["cases"][1]["tokens_computed"], 32);         // unbinned
  // A bin whose manifest disagrees with the split's list: refused, naming the bin.
  m.extra["bins"][0]["records"] = 2;
  m.write(path_join(split, kManifestName));
  const std::string why = error_message([&] { shard_stats(input_of(split), {}); });
  EXPECT_NE(why.find("bin-00"), std::string::npos) << why;
}

// ---------------------------------------------------------------------------------------------
// GPT

// Megatron: documents [5 <unk> 7 eod], [8 9][10 eod] (two sequences), [eod]; eod = 2, unk = 0.
std::string write_megatron(const TempDir& dir) {
  const std::string set = dir.file("gpt");
  make_dirs(set);
  MegatronWriter w(path_join(set, "train-00000"), MegatronDType::u16);
  w.add_sequence(std::vector<int32_t>{5, 0, 7, 2});
  w.end_document();
  w.add_sequence(std::vector<int32_t>{8, 9});
  w.add_sequence(std::vector<int32_t>{10, 2});
  w.end_document();
  w.add_sequence(std::vector<int32_t>{2});
  w.end_document();
  w.finalize();
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer.kind = "bpe";
  m.tokenizer.vocab_size = 16;
  m.tokenizer.special_ids = {{"eod", 2}, {"unk", 0}};
  m.tokenizer.files = {{"vocab", "vocab.json", 1, "0"}};
  ShardEntry e = Manifest::describe(set, "train-00000.bin", 4);
  e.companions["train-00000.idx"] = hex64(xxh3_file(path_join(set, "train-00000.idx")));
  m.shards = {e};
  m.stats = {{"documents", 3}};
  m.write(path_join(set, kManifestName));
  return set;
}

TEST(ShardStats, MegatronCountedByHand) {
  TempDir dir;
  const std::string set = write_megatron(dir);
  const json s = shard_stats(input_of(set), {}, stand_ins());
  const json& c = s["counts"];
  EXPECT_EQ(c["documents"], 3);
  EXPECT_EQ(c["sequences"], 4);
  EXPECT_EQ(c["tokens"], 9);
  EXPECT_EQ(c["text_tokens"], 6);
  EXPECT_EQ(s["manifest_documents"], 3);
  EXPECT_EQ(s["tokenizer"]["unk_tokens"], 1);
  EXPECT_DOUBLE_EQ(s["tokenizer"]["unk_share"].get<double>(), 1.0 / 6);
  EXPECT_EQ(s["tokenizer"]["text_bytes"], 5 + 7 + 8 + 9 + 10);
  EXPECT_DOUBLE_EQ(s["tokenizer"]["bytes_per_token"].get<double>(), 39.0 / 6);
  EXPECT_EQ(c["distinct_ids"], 7);  // 0 2 5 7 8 9 10
  // Tokens per document 4, 4, 1; per sequence 4, 2, 2, 1.
  EXPECT_EQ(s["histograms"]["document_tokens"]["counts"], json({0, 1, 0, 2}));
  EXPECT_EQ(s["histograms"]["sequence_tokens"]["counts"], json({0, 1, 2, 1}));
  EXPECT_TRUE(s["padding"].is_null());
  // Without the tokenizer's bytes, or when it cannot be loaded: bytes per token unknown, said why.
  EXPECT_TRUE(shard_stats(input_of(set), {}, {})["tokenizer"]["bytes_per_token"].is_null());
  StatsTextTools failing = stand_ins();
  failing.token_bytes = [](const TokenizerInfo&, const std::string& manifest, const std::string&) -> std::vector<uint32_t> {
    throw Error(Where{manifest}, "the tokenizer that made the shards is not here");
  };
  const json without = shard_stats(input_of(set), {}, failing);
  EXPECT_TRUE(without["tokenizer"]["bytes_per_token"].is_null());
  EXPECT_NE(without["notes"].dump().find("is not here"), std::string::npos) << without["notes"].dump();
  ShardStatsOptions named;  // a tokenizer named on the command line that fails: an error
  named.tokenizer = "elsewhere.json";
  EXPECT_THROW(shard_stats(input_of(set), named, failing), Error);
  // A tokenizer with fewer ids than the shards use is not the one that made them.
  StatsTextTools small = stand_ins();
  small.token_bytes = [](const TokenizerInfo&, const std::string&, const std::string&) { return std::vector<uint32_t>(8, 1); };
  const std::string why = error_message([&] { shard_stats(input_of(set), {}, small); });
  EXPECT_NE(why.find("id 10 occurs"), std::string::npos) << why;
}

// A Megatron shard with an id no vocabulary has (int32 tokens): refused, naming the .bin.
TEST(ShardStats, MegatronIdsPastAnyVocabularyAreRefused) {
  TempDir dir;
  const std::string prefix = dir.file("bad");
  MegatronWriter w(prefix, MegatronDType::i32);
  w.add_sequence(std::vector<int32_t>{5, -3});
  w.end_document();
  w.finalize();
  StatsInput in;
  in.given = prefix;
  in.format = kFormatMegatron;
  in.files = {megatron_bin_path(prefix)};
  const std::string why = error_message([&] { shard_stats(in, {}); });
  EXPECT_NE(why.find(megatron_bin_path(prefix)), std::string::npos) << why;
  EXPECT_NE(why.find("token 1 is -3"), std::string::npos) << why;
}

// llm.c without a manifest: documents cut at each end-of-text (50256): after it when the stream
// does not open with one (make-pretraining-shards ends each document with it), before it when it
// does (llm.c's fineweb.py starts each document with it).
json llmc_stats(const TempDir& dir, std::vector<int64_t> tokens) {
  const std::string path = dir.file("tokens.bin");
  LlmcWriter w(path);
  for (int64_t t : tokens) w.add(t);
  w.commit();
  StatsInput in;
  in.given = path;
  in.format = kFormatLlmc;
  in.files = {path};
  return shard_stats(in, {}, stand_ins());
}

TEST(ShardStats, LlmcDocumentsAreCutAtEachEndOfText) {
  TempDir dir;
  json s = llmc_stats(dir, {7, 8, 50256, 5, 6, 50256, 9, 50256});  // [7 8 eot] [5 6 eot] [9 eot]
  EXPECT_EQ(s["counts"]["documents"], 3);
  EXPECT_EQ(s["counts"]["tokens"], 8);
  EXPECT_TRUE(s["counts"]["text_tokens"].is_null());  // no manifest: no special ids
  EXPECT_FALSE(s["tokenizer"].contains("unk_share"));
  EXPECT_EQ(s["histograms"]["document_tokens"]["counts"], json({0, 0, 3}));  // 3, 3, 2 tokens
  s = llmc_stats(dir, {50256, 5, 6, 50256, 9, 50256, 4});  // [eot 5 6] [eot 9] [eot 4]
  EXPECT_EQ(s["counts"]["documents"], 3);
  EXPECT_EQ(s["histograms"]["document_tokens"]["counts"], json({0, 0, 3}));
  s = llmc_stats(dir, {5, 6, 50256, 9});  // [5 6 eot] [9]
  EXPECT_EQ(s["histograms"]["document_tokens"]["counts"], json({0, 1, 1}));  // 3 and 1 tokens
}

// ---------------------------------------------------------------------------------------------
// Threads, damage

TEST(ShardStats, SameResultAtAnyThreadCount) {
  TempDir dir;
  const std::string docs = write_docs(dir), set = dir.file("bert"), gpt = write_megatron(dir);
  write_bert_set(set, plain_records(), 8);
  for (const std::string& d : {docs, set, gpt}) {
    json one, two;
    {
      tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
      one = without_timing(shard_stats(input_of(d), {}, stand_ins()));
    }
    {
      tbb::global_control c(tbb::global_control::max_allowed_parallelism, 2);
      two = without_timing(shard_stats(input_of(d), {}, stand_ins()));
    }
    EXPECT_EQ(one, two) << d;
  }
}

TEST(ShardStats, DamagedShardsAreRefusedNamingThem) {
  TempDir dir;
  const std::string set = dir.file("bert");
  write_bert_set(set, plain_records(), 8);
  const std::string shard = path_join(set, "train-00001.hdf5");
  std::string bytes = read_file(shard);
  // One byte changed: the xxh3 the manifest records no longer matches.
  bytes[bytes.size() / 2] ^= 0x5a;
  write_file_atomic(shard, bytes);
  std::string why = error_message([&] { shard_stats(input_of(set), {}); });
  EXPECT_NE(why.find(shard), std::string::npos) << why;
  EXPECT_NE(why.find("xxh3"), std::string::npos) << why;
  // Cut short: the size is checked even without --verify's xxh3.
  write_file_atomic(shard, bytes.substr(0, bytes.size() / 2));
  ShardStatsOptions quick;
  quick.verify = false;
  why = error_message([&] { shard_stats(input_of(set), quick); });
  EXPECT_NE(why.find(shard), std::string::npos) << why;
  EXPECT_NE(why.find("bytes"), std::string::npos) << why;
  // A manifest that counts other records than the shard holds.
  write_bert_set(set, plain_records(), 8);
  Manifest m = Manifest::read(path_join(set, kManifestName));
  m.shards[0].records = 3;
  m.write(path_join(set, kManifestName));
  why = error_message([&] { shard_stats(input_of(set), {}); });
  EXPECT_NE(why.find("train-00000.hdf5"), std::string::npos) << why;
  EXPECT_NE(why.find("expected 3 records, found 2"), std::string::npos) << why;
  // A document shard that is not zstd any more, read without a manifest.
  const std::string docs = write_docs(dir), first = path_join(docs, "docs-00000.jsonl.zst");
  std::string z = read_file(first);
  z.resize(z.size() - 4);
  write_file_atomic(first, z);
  StatsInput in;
  in.given = first;
  in.format = kFormatDocs;
  in.files = {first};
  why = error_message([&] { shard_stats(in, {}); });
  EXPECT_NE(why.find(first), std::string::npos) << why;
  // An unfinished run's manifest.
  m.complete = false;
  m.write(path_join(set, kManifestName));
  why = error_message([&] { shard_stats(input_of(set), {}); });
  EXPECT_NE(why.find("did not finish"), std::string::npos) << why;
}

TEST(ShardStats, PrintsTheTables) {
  TempDir dir;
  const std::string set = dir.file("bert");
  write_bert_set(set, plain_records(), 8);
  ShardStatsOptions o;
  o.bin_sizes = {4};
  std::ostringstream out;
  print_shard_stats(shard_stats(input_of(set), o), out);
  const std::string text = out.str();
  for (const char* part : {"bert-hdf5, plain", "| instances | 4 |", "| [UNK] share | 18.18% (2 of the text tokens) |",
                           "| --bin-size 4 (2 bins) | 4 | 28 | 1.273 | 21.43% | 12.50% |",
                           "| --pack --max-pack 3 | 3 | 24 | 1.091 | 8.33% | 25.00% |", "| 8 | 4 | 22 | 31.25% |"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

}  // namespace
}  // namespace pretrain::shard_stats_test
