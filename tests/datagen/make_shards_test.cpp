// make-pretraining-shards as a library (datagen/shards/make_shards.h), on a small corpus and WordPiece
// vocabulary the test writes: the manifest's fields against the files and the run's statistics,
// the stages' outputs (BERT records well formed and their statistics; GPT documents each once with
// EOD), --resume skipping the finished shards whose checksums verify and rewriting from the first
// that does not, byte-identical output at 1 and 2 threads, and the refusal of bad options.
#include "datagen/shards/make_shards.h"

#include <gtest/gtest.h>

#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include <sys/stat.h>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/model_kind.h"
#include "formats/bert_hdf5.h"
#include "formats/megatron.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pretrain::make_shards_test {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::vector<std::string> kWords = {"the", "ship", "light", "tower", "sea", "stone", "bread", "flour", "water",
                                         "lamp", "island", "harbour", "keeper", "storm", "night", "rock", "salt",
                                         "wind", "rope", "boat", "oven", "yeast", "fire", "glass"};
constexpr int64_t kSpecials = 5;  // [PAD] [UNK] [CLS] [SEP] [MASK], ids 0–4

// A corpus in Google BERT's text format (one sentence per line, a blank line between documents):
// `docs` documents of 1–8 sentences of 3–12 words, some with a word outside the vocabulary.
struct Corpus {
  std::string text_path, vocab_path;
  std::vector<std::vector<std::string>> documents;  // sentences
};

Corpus write_corpus(const TempDir& dir, int docs, uint32_t seed) {
  Corpus c;
  c.vocab_path = dir.file("vocab.txt");
  c.text_path = dir.file("corpus.txt");
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n.\n";
  for (const auto& w : kWords) vocab += w + "\n";
  write_file_atomic(c.vocab_path, vocab);
  std::mt19937 gen(seed);
  std::string text;
  for (int d = 0; d < docs; ++d) {
    std::vector<std::string> doc;
    const int sentences = 1 + int(gen() % 8);
    for (int s = 0; s < sentences; ++s) {
      std::string line;
      const int words = 3 + int(gen() % 10);
      for (int w = 0; w < words; ++w) line += (w ? " " : "") + (gen() % 40 == 0 ? std::string("zebra") : kWords[gen() % kWords.size()]);
      line += " .";
      doc.push_back(line);
      text += line + "\n";
    }
    text += "\n";
    c.documents.push_back(doc);
  }
  write_file_atomic(c.text_path, text);
  return c;
}

MakeShardsOptions bert_options(const Corpus& c, const std::string& out) {
  MakeShardsOptions o;
  o.model = ModelKind::bert;
  o.inputs = {c.text_path};
  o.tokenizer = c.vocab_path;
  o.output_dir = out;
  o.bert.seq_len = 32;
  o.bert.max_predictions = 5;
  o.dupe_factor = 3;
  o.num_shards = 3;
  o.seed = 4242;
  o.args = {"make-pretraining-shards", "--test"};
  o.bucket_bytes = 4096;          // several spill buckets
  o.checkpoint_bytes = 2048;      // several tokenize checkpoints
  return o;
}

// Every regular file under `dir`: relative path → xxh3 and size of its bytes (the manifest's without
// its run statistics, which hold times).
std::map<std::string, std::string> output_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), dir).string();
    std::string bytes = read_file(e.path().string());
    if (e.path().filename() == kManifestName) {
      nlohmann::json j = nlohmann::json::parse(bytes);
      j.erase("stats");
      bytes = j.dump();
    }
    out[rel] = hex64(xxh3_bytes(bytes.data(), bytes.size())) + " " + std::to_string(bytes.size());
  }
  return out;
}

class MakeShards : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::warn);
    corpus = write_corpus(dir, 60, 1);
  }
  TempDir dir;
  Corpus corpus;
};

TEST_F(MakeShards, TheManifestDescribesTheShardsAndTheRun) {
  const std::string out = dir.file("out");
  const MakeShardsOptions o = bert_options(corpus, out);
  const MakeShardsStats stats = run_make_shards(o);
  EXPECT_EQ(stats.documents, corpus.documents.size());
  EXPECT_EQ(stats.train_documents, corpus.documents.size());
  EXPECT_EQ(stats.valid_documents, 0u);
  EXPECT_EQ(stats.shards, 3u);
  ASSERT_GT(stats.instances, 30u);

  const Manifest m = Manifest::read(path_join(out, kManifestName));
  EXPECT_EQ(m.format, kFormatBertHdf5);
  EXPECT_EQ(m.version, kManifestVersion);
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.seq_len, 32);
  EXPECT_EQ(m.max_predictions, 5);
  EXPECT_EQ(m.args, o.args);
  ASSERT_TRUE(m.seed.has_value());
  EXPECT_EQ(*m.seed, 4242u);
  EXPECT_EQ(m.tool.rfind("make-pretraining-shards ", 0), 0u) << m.tool;
  EXPECT_EQ(m.tokenizer.kind, "wordpiece");
  EXPECT_EQ(m.tokenizer.vocab_size, kSpecials + 1 + int64_t(kWords.size()));
  EXPECT_EQ(m.tokenizer.vocab_hash, hex64(xxh3_file(corpus.vocab_path)));
  EXPECT_EQ(m.tokenizer.special_ids.at("cls"), 2);
  EXPECT_EQ(m.tokenizer.special_ids.at("sep"), 3);
  EXPECT_EQ(m.tokenizer.special_ids.at("mask"), 4);
  EXPECT_EQ(m.stats.at("instances").get<uint64_t>(), stats.instances);
  EXPECT_EQ(m.stats.at("documents").get<uint64_t>(), stats.documents);

  // Shards train-00000…: equal sizes (±1, the first ones larger), records, bytes and xxh3 true.
  ASSERT_EQ(m.shards.size(), 3u);
  uint64_t records = 0;
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardEntry& e = m.shards[i];
    EXPECT_EQ(e.file, "train-0000" + std::to_string(i) + ".hdf5");
    const std::string path = path_join(out, e.file);
    EXPECT_EQ(e.bytes, file_size(path));
    EXPECT_EQ(e.xxh3, hex64(xxh3_file(path)));
    BertShardReader reader(path);
    EXPECT_EQ(uint64_t(reader.size()), e.records);
    EXPECT_EQ(e.records, stats.instances / 3 + (i < stats.instances % 3 ? 1 : 0)) << e.file;
    records += e.records;
  }
  EXPECT_EQ(records, stats.instances);
  EXPECT_TRUE(verify_manifest(m, out, [](const std::string& p) { return uint64_t(BertShardReader(p).size()); }).empty());
  // Nothing else is left: no work directory, no temporary files.
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(out)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "train-00000.hdf5", "train-00001.hdf5", "train-00002.hdf5"}));
}

TEST_F(MakeShards, BertRecordsAreWellFormedAndCountedInTheStatistics) {
  const std::string out = dir.file("out");
  MakeShardsOptions o = bert_options(corpus, out);
  const MakeShardsStats stats = run_make_shards(o);
  uint64_t predictions = 0, as_mask = 0, tokens = 0, n = 0;
  std::set<int32_t> firsts;
  for (int i = 0; i < 3; ++i) {
    BertShardReader reader(path_join(out, "train-0000" + std::to_string(i) + ".hdf5"));
    for (int64_t r = 0; r < reader.size(); ++r, ++n) {
      const BertRecord rec = reader.read(r);
      int64_t len = 0;
      while (len < 32 && rec.input_mask[size_t(len)]) ++len;
      for (int64_t j = len; j < 32; ++j) ASSERT_EQ(rec.input_ids[size_t(j)], 0) << "padding";
      ASSERT_GE(len, 5);
      EXPECT_EQ(rec.input_ids[0], 2) << "[CLS]";
      EXPECT_EQ(rec.input_ids[size_t(len - 1)], 3) << "[SEP]";
      // [CLS] A [SEP] B [SEP]: two [SEP]s where nothing is masked (Google's random replacement
      // draws from the whole vocabulary, [SEP] included, and this vocabulary is small).
      std::set<int32_t> masked_at;
      for (size_t k = 0; k < 5 && rec.masked_lm_positions[k] != 0; ++k) masked_at.insert(rec.masked_lm_positions[k]);
      int seps = 0;
      for (int32_t j = 0; j < len; ++j) seps += rec.input_ids[size_t(j)] == 3 && !masked_at.count(j);
      EXPECT_EQ(seps, 2) << "[CLS] A [SEP] B [SEP]";
      EXPECT_EQ(rec.segment_ids[0], 0);
      EXPECT_EQ(rec.segment_ids[size_t(len - 1)], 1);
      tokens += uint64_t(len);
      int64_t prev = 0;
      for (size_t k = 0; k < 5 && rec.masked_lm_positions[k] != 0; ++k) {
        const int32_t at = rec.masked_lm_positions[k];
        EXPECT_GT(at, prev) << "positions sorted";
        EXPECT_LT(at, len - 1);
        prev = at;
        const int32_t label = rec.masked_lm_ids[k];
        EXPECT_GE(label, 1) << "never [PAD]";  // [UNK] (1) is a word to Google's masking
        EXPECT_NE(label, 2);
        EXPECT_NE(label, 3);
        EXPECT_NE(label, 4);
        ++predictions;
        as_mask += rec.input_ids[size_t(at)] == 4;
      }
      firsts.insert(rec.input_ids[1]);
    }
  }
  EXPECT_EQ(n, stats.instances);
  EXPECT_EQ(predictions, stats.predictions);
  EXPECT_EQ(as_mask, stats.masked_as_mask);
  EXPECT_EQ(tokens, stats.instance_tokens);
  EXPECT_EQ(stats.masked_as_mask + stats.masked_kept + stats.masked_random, stats.predictions);
  EXPECT_GT(firsts.size(), 5u) << "instances are shuffled and varied";

  // dupe_factor: each pass over the documents makes instances, so 1 pass makes fewer.
  MakeShardsOptions one = bert_options(corpus, dir.file("one"));
  one.dupe_factor = 1;
  const MakeShardsStats s1 = run_make_shards(one);
  EXPECT_LT(s1.instances * 2, stats.instances);
  EXPECT_GT(s1.instances * 4, stats.instances);

  // A valid split holds documents out into valid/, with its own manifest.
  MakeShardsOptions v = bert_options(corpus, dir.file("split"));
  v.valid_fraction = 0.3;
  const MakeShardsStats sv = run_make_shards(v);
  EXPECT_EQ(sv.train_documents + sv.valid_documents, sv.documents);
  EXPECT_GT(sv.valid_documents, 5u);
  EXPECT_GT(sv.train_documents, 20u);
  const Manifest valid = Manifest::read(path_join(dir.file("split"), "valid/manifest.json"));
  EXPECT_EQ(valid.total_records(), sv.valid_instances);
  EXPECT_EQ(valid.shards.size(), 1u) << "ceil(3 × 0.3)";
}

TEST_F(MakeShards, GptShardsHoldEveryDocumentOnceEndingInEod) {
  const std::string out = dir.file("gpt");
  MakeShardsOptions o = bert_options(corpus, out);
  o.model = ModelKind::gpt;
  o.num_shards = 2;
  run_make_shards(o);
  const Manifest m = Manifest::read(path_join(out, kManifestName));
  EXPECT_EQ(m.format, kFormatMegatron);
  ASSERT_EQ(m.shards.size(), 2u);
  auto tok = load_tokenizer(corpus.vocab_path);
  const int32_t eod = tok->special_ids().at("sep");  // a WordPiece vocabulary's end of document
  std::multiset<std::vector<int32_t>> want, got;
  for (const auto& doc : corpus.documents) {
    std::string text;  // the document's lines, encoded whole as Megatron's preprocess_data.py does
    for (size_t k = 0; k < doc.size(); ++k) text += (k ? "\n" : "") + doc[k];
    std::vector<int32_t> ids = tok->encode(text);
    ids.push_back(eod);
    want.insert(ids);
  }
  for (const auto& e : m.shards) {
    MegatronReader r(path_join(out, e.file));
    EXPECT_EQ(r.num_sequences(), e.records);
    EXPECT_EQ(e.companions.size(), 1u) << "the .idx";
    for (size_t i = 0; i < r.num_sequences(); ++i) {
      const TokenSpan s = r.sequence(i);
      std::vector<int32_t> ids;
      for (size_t k = 0; k < s.size; ++k) ids.push_back(int32_t(s[k]));
      got.insert(ids);
    }
  }
  EXPECT_EQ(got, want);
}

TEST_F(MakeShards, ResumeSkipsVerifiedShardsAndRewritesTheBadOnes) {
  const std::string whole = dir.file("whole"), cut = dir.file("cut");
  run_make_shards(bert_options(corpus, whole));
  const auto reference = output_files(whole);

  // Interrupted after one shard: the manifest lists it, marked incomplete.
  MakeShardsOptions o = bert_options(corpus, cut);
  o.stop_after_shards = 1;
  EXPECT_THROW(run_make_shards(o), MakeShardsInterrupted);
  Manifest m = Manifest::read(path_join(cut, kManifestName));
  EXPECT_FALSE(m.complete);
  ASSERT_EQ(m.shards.size(), 1u);

  // A hard link holds the old file: if the shard is rewritten (a new file renamed over it) the
  // two names stop being the same file.
  const std::string links = dir.file("links");
  fs::create_directories(links);
  auto hold = [&](int i) {
    const std::string name = "train-0000" + std::to_string(i) + ".hdf5";
    fs::remove(path_join(links, name));
    fs::create_hard_link(path_join(cut, name), path_join(links, name));
  };
  auto kept = [&](int i) {
    const std::string name = "train-0000" + std::to_string(i) + ".hdf5";
    return fs::equivalent(path_join(cut, name), path_join(links, name));
  };
  hold(0);
  o.stop_after_shards = 0;
  o.resume = true;
  run_make_shards(o);
  EXPECT_TRUE(kept(0)) << "the finished shard was written again";
  EXPECT_EQ(output_files(cut), reference) << "resumed output differs from an uninterrupted run";

  // A complete output: every shard verifies and is kept.
  for (int i = 0; i < 3; ++i) hold(i);
  run_make_shards(o);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(kept(i)) << i;
  EXPECT_EQ(output_files(cut), reference);

  // Shard 1 damaged (same size, one byte changed): 0 and 2 are kept, 1 is rewritten (under mpirun
  // the shards are committed out of order, so a good one after a bad one is kept too).
  for (int i = 0; i < 3; ++i) hold(i);
  {
    const std::string p = path_join(cut, "train-00001.hdf5");
    std::string bytes = read_file(p);
    bytes[bytes.size() / 2] ^= 0x01;
    fs::remove(p);  // not through the hard link
    write_file_atomic(p, bytes);
  }
  hold(1);
  run_make_shards(o);
  EXPECT_TRUE(kept(0));
  EXPECT_FALSE(kept(1)) << "a shard whose checksum fails is kept";
  EXPECT_TRUE(kept(2)) << "a shard that verifies, after the bad one, was written again";
  EXPECT_EQ(output_files(cut), reference);

  // Interrupted after two shards, then shard 1 damaged: the interrupted run's manifest (complete
  // = false) lists what it finished, and those shards are verified too: 0 kept, 1 rewritten.
  const std::string cut2 = dir.file("cut2");
  MakeShardsOptions o2 = bert_options(corpus, cut2);
  o2.stop_after_shards = 2;
  EXPECT_THROW(run_make_shards(o2), MakeShardsInterrupted);
  ASSERT_EQ(Manifest::read(path_join(cut2, kManifestName)).shards.size(), 2u);
  {
    const std::string p = path_join(cut2, "train-00001.hdf5");
    std::string bytes = read_file(p);
    bytes[bytes.size() / 2] ^= 0x01;
    write_file_atomic(p, bytes);
  }
  fs::create_directories(dir.file("links2"));
  fs::create_hard_link(path_join(cut2, "train-00000.hdf5"), dir.file("links2/train-00000.hdf5"));
  o2.stop_after_shards = 0;
  o2.resume = true;
  run_make_shards(o2);
  EXPECT_TRUE(fs::equivalent(path_join(cut2, "train-00000.hdf5"), dir.file("links2/train-00000.hdf5")));
  EXPECT_EQ(output_files(cut2), reference) << "a damaged shard of an interrupted run was kept";

  // Other options: nothing is kept (the manifest's key differs), and the new output is whole.
  for (int i = 0; i < 3; ++i) hold(i);
  o.seed = 4243;
  run_make_shards(o);
  EXPECT_FALSE(kept(0));
  EXPECT_NE(output_files(cut), reference);
  EXPECT_EQ(Manifest::read(path_join(cut, kManifestName)).seed.value_or(0), 4243u);

  // Without --resume every shard is written again, even when it would verify.
  o.seed = 4242;
  o.resume = false;
  run_make_shards(o);
  for (int i = 0; i < 3; ++i) hold(i);
  run_make_shards(o);
  EXPECT_FALSE(kept(0));
  EXPECT_EQ(output_files(cut), reference);
}

TEST_F(MakeShards, ResumeRewritesAGptShardWhoseIndexIsDamaged) {
  // A Megatron shard is two files; the manifest lists the .idx as the .bin's companion.
  const std::string whole = dir.file("whole"), out = dir.file("gpt");
  MakeShardsOptions o = bert_options(corpus, whole);
  o.model = ModelKind::gpt;
  run_make_shards(o);
  const auto reference = output_files(whole);
  o.output_dir = out;
  run_make_shards(o);
  {
    const std::string p = path_join(out, "train-00001.idx");
    std::string bytes = read_file(p);
    bytes[bytes.size() - 1] ^= 0x01;  // the last document index
    write_file_atomic(p, bytes);
  }
  o.resume = true;
  run_make_shards(o);
  EXPECT_EQ(output_files(out), reference) << "a shard with a damaged .idx was kept";
}

TEST_F(MakeShards, OutputIsByteIdenticalAtOneAndTwoThreads) {
  for (const std::string kind : {"bert", "gpt", "bert-binned", "bert-packed"}) {
    std::vector<std::map<std::string, std::string>> outs;
    for (int threads : {1, 2}) {
      tbb::global_control cap(tbb::global_control::max_allowed_parallelism, size_t(threads));
      const std::string out = dir.file(kind + "-" + std::to_string(threads));
      MakeShardsOptions o = bert_options(corpus, out);
      o.model = kind == "gpt" ? ModelKind::gpt : ModelKind::bert;
      o.bin_size = kind == "bert-binned" ? 8 : 0;
      o.pack = kind == "bert-packed";
      o.valid_fraction = 0.2;
      o.store_resident_budget = 1;  // the token store read through windows past its budget
      run_make_shards(o);
      outs.push_back(output_files(out));
    }
    ASSERT_GE(outs[0].size(), 5u);  // shards, manifests, a valid split
    EXPECT_EQ(outs[0], outs[1]) << kind;
  }
}

// Every record of a BERT shard set (plain, or every bin of a binned one), unpadded, as text; with
// the padded length each record was stored at.
struct StoredRecord {
  std::string record;
  int64_t stored_length;
  bool operator<(const StoredRecord& o) const { return record < o.record; }
};
std::vector<StoredRecord> bert_records(const std::string& dir) {
  const Manifest m = Manifest::read(path_join(dir, kManifestName));
  std::vector<StoredRecord> out;
  if (m.format == kFormatBertHdf5Binned) {
    for (const auto& bin : m.extra.at("bins")) {
      auto more = bert_records(path_join(dir, bin.at("dir").get<std::string>()));
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }
  for (const ShardEntry& e : m.shards) {
    BertShardReader reader(path_join(dir, e.file));
    for (int64_t r = 0; r < reader.size(); ++r) {
      const BertRecord rec = reader.read(r);
      size_t n = 0;
      while (n < rec.input_mask.size() && rec.input_mask[n]) ++n;
      std::string text;
      for (size_t j = 0; j < n; ++j) text += cat(rec.input_ids[j], "/", rec.segment_ids[j], " ");
      for (size_t k = 0; k < rec.masked_lm_positions.size(); ++k)
        text += cat(rec.masked_lm_positions[k], ":", rec.masked_lm_ids[k], " ");
      out.push_back({cat(text, "nsp ", rec.next_sentence_label, " length ", n), reader.seq_len()});
    }
  }
  return out;
}

// For each RNG, `o` made into plain shards and, changed by `change`, into shards of another kind
// (binned, packed), to compare: the counter RNG's runs with a valid split, the python RNG's without
// (it holds none out).
struct PlainAndChanged {
  std::string tag;  // "counter" or "python"
  std::string plain_dir, changed_dir;
  MakeShardsOptions changed;
  MakeShardsStats plain_stats, changed_stats;
  std::vector<std::string> splits;  // "" (train), and "valid" but for the python RNG
};
std::vector<PlainAndChanged> plain_and_changed(MakeShardsOptions o, const TempDir& dir, const std::string& name,
                                               const std::function<void(MakeShardsOptions&)>& change) {
  std::vector<PlainAndChanged> runs;
  for (ShardRng rng : {ShardRng::counter, ShardRng::python}) {
    PlainAndChanged r;
    r.tag = rng == ShardRng::python ? "python" : "counter";
    r.splits = rng == ShardRng::python ? std::vector<std::string>{""} : std::vector<std::string>{"", "valid"};
    o.rng = rng;
    o.valid_fraction = rng == ShardRng::python ? 0 : 0.2;
    o.output_dir = r.plain_dir = dir.file("plain-" + r.tag);
    r.plain_stats = run_make_shards(o);
    r.changed = o;
    change(r.changed);
    r.changed.output_dir = r.changed_dir = dir.file(name + "-" + r.tag);
    r.changed_stats = run_make_shards(r.changed);
    runs.push_back(r);
  }
  return runs;
}

TEST_F(MakeShards, BinnedShardsHoldTheSameRecordsEachInItsBin) {
  for (const PlainAndChanged& r : plain_and_changed(bert_options(corpus, ""), dir, "binned",
                                                    [](MakeShardsOptions& o) { o.bin_size = 8; })) {
    for (const std::string& split : r.splits) {
      const std::string binned = path_join(r.changed_dir, split);
      auto plain = bert_records(path_join(r.plain_dir, split));
      auto bins = bert_records(binned);
      ASSERT_FALSE(plain.empty());
      ASSERT_EQ(plain.size(), bins.size()) << r.tag << " " << split;
      for (const StoredRecord& record : bins) {
        const int64_t n = std::stoll(record.record.substr(record.record.rfind(' ') + 1));
        EXPECT_EQ(record.stored_length, ((n - 1) / 8 + 1) * 8) << "LDDL's bin (n − 1) / 8, padded to its edge: " << record.record;
      }
      std::sort(plain.begin(), plain.end());
      std::sort(bins.begin(), bins.end());
      for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i].record, bins[i].record) << r.tag << " " << split;
      const Manifest m = Manifest::read(path_join(binned, kManifestName));
      EXPECT_EQ(m.format, kFormatBertHdf5Binned);
      EXPECT_TRUE(m.complete);
      uint64_t listed = 0;
      for (uint64_t n : m.extra.at("bin_records").get<std::vector<uint64_t>>()) listed += n;
      EXPECT_EQ(listed, bins.size());
    }
    EXPECT_EQ(r.changed_stats.instances, bert_records(r.changed_dir).size());
  }
}

// The instances of a packed shard set: each row cut back into its instances by sequence_ids and
// next_sentence_positions, in bert_records' text, so a packed run compares with an unpacked one;
// every row must be a well-formed packed row.
std::vector<std::string> unpacked_records(const std::string& dir, uint64_t* rows = nullptr) {
  const Manifest m = Manifest::read(path_join(dir, kManifestName));
  std::vector<std::string> out;
  for (const ShardEntry& e : m.shards) {
    BertShardReader reader(path_join(dir, e.file));
    EXPECT_EQ(reader.max_pack(), m.extra.at("max_pack").get<int64_t>());
    BertBatch batch;
    reader.read_range(0, reader.size(), batch);
    if (rows) *rows += uint64_t(batch.size);
    for (int64_t r = 0; r < batch.size; ++r) {
      EXPECT_EQ(packed_row_problem(batch, r), "") << e.file << " record " << r;
      const BertRecord row = batch.record(r);
      for (size_t k = 0; k < row.next_sentence_positions.size() && row.packed_next_sentence_labels[k] >= 0; ++k) {
        const int32_t start = row.next_sentence_positions[k];
        size_t n = 0;
        std::string text;
        for (size_t j = size_t(start); j < row.sequence_ids.size() && row.sequence_ids[j] == int32_t(k + 1); ++j, ++n)
          text += cat(row.input_ids[j], "/", row.segment_ids[j], " ");
        size_t predictions = 0;
        for (size_t p = 0; p < row.masked_lm_positions.size(); ++p) {
          const int32_t at = row.masked_lm_positions[p];
          if (at == 0 || row.sequence_ids[size_t(at)] != int32_t(k + 1)) continue;
          text += cat(at - start, ":", row.masked_lm_ids[p], " ");
          ++predictions;
        }
        for (size_t p = predictions; p < size_t(batch.max_predictions); ++p) text += "0:0 ";  // unpacked padding
        out.push_back(cat(text, "nsp ", row.packed_next_sentence_labels[k], " length ", n));
      }
    }
  }
  return out;
}

TEST_F(MakeShards, PackedShardsHoldTheSameInstancesAsUnpacked) {
  MakeShardsOptions o = bert_options(corpus, "");
  o.bert.seq_len = 64, o.bert.max_predictions = 10;  // rows longer than the test's documents hold several
  for (const PlainAndChanged& r : plain_and_changed(o, dir, "packed", [](MakeShardsOptions& p) { p.pack = true; })) {
    uint64_t rows = 0, instances = 0;
    for (const std::string& split : r.splits) {
      std::vector<std::string> plain;
      for (const StoredRecord& record : bert_records(path_join(r.plain_dir, split))) plain.push_back(record.record);
      std::vector<std::string> packed = unpacked_records(path_join(r.changed_dir, split), &rows);
      ASSERT_FALSE(plain.empty());
      std::sort(plain.begin(), plain.end());
      std::sort(packed.begin(), packed.end());
      ASSERT_EQ(plain.size(), packed.size()) << r.tag << " " << split;
      for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i], packed[i]) << r.tag << " " << split;
      instances += packed.size();
      const Manifest m = Manifest::read(path_join(path_join(r.changed_dir, split), kManifestName));
      EXPECT_EQ(m.extra.at("max_pack"), 3);
      EXPECT_EQ(m.extra.at("key").at("max_pack"), 3);
      const Manifest unpacked = Manifest::read(path_join(path_join(r.plain_dir, split), kManifestName));
      EXPECT_FALSE(unpacked.extra.contains("max_pack"));
      EXPECT_FALSE(unpacked.extra.at("key").contains("pack"));
    }
    const MakeShardsStats& stats = r.changed_stats;
    EXPECT_LT(rows, instances * 8 / 10) << r.tag << ": rows should hold several instances";
    EXPECT_EQ(stats.packed_rows + stats.valid_packed_rows, rows);
    EXPECT_EQ(stats.instances, r.plain_stats.instances);
    EXPECT_EQ(stats.valid_instances, r.plain_stats.valid_instances);
    EXPECT_EQ(stats.instance_tokens, r.plain_stats.instance_tokens);
    const nlohmann::json j = stats.to_json(o.bert.seq_len);
    EXPECT_DOUBLE_EQ(j.at("tokens_per_real_token").get<double>(), double(rows * 64) / double(stats.instance_tokens));
    EXPECT_FALSE(r.plain_stats.to_json(o.bert.seq_len).contains("tokens_per_real_token"));
  }
}

TEST_F(MakeShards, BinnedRunResumesToTheSameOutput) {
  MakeShardsOptions o = bert_options(corpus, dir.file("whole"));
  o.bin_size = 8;
  run_make_shards(o);
  o.output_dir = dir.file("cut");
  o.stop_after_shards = 2;
  EXPECT_THROW(run_make_shards(o), MakeShardsInterrupted);
  EXPECT_FALSE(Manifest::read(path_join(o.output_dir, kManifestName)).complete) << "a cut binned run looks unfinished";
  o.stop_after_shards = 0;
  o.resume = true;
  run_make_shards(o);
  EXPECT_EQ(output_files(dir.file("whole")), output_files(o.output_dir));
}

TEST_F(MakeShards, BadOptionsAreRefusedBeforeAnythingIsWritten) {
  struct Case {
    std::function<void(MakeShardsOptions&)> change;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](MakeShardsOptions& o) { o.inputs.clear(); }, "no inputs"},
      {[](MakeShardsOptions& o) { o.num_shards = 0; }, "--num-shards"},
      {[](MakeShardsOptions& o) { o.valid_fraction = 1; }, "--valid-fraction"},
      {[](MakeShardsOptions& o) { o.valid_fraction = -0.1; }, "--valid-fraction"},
      {[](MakeShardsOptions& o) { o.dupe_factor = 0; }, "--dupe-factor"},
      {[](MakeShardsOptions& o) { o.bert.seq_len = 4; }, "--seq-len"},
      {[](MakeShardsOptions& o) { o.bert.seq_len = 65536; }, "--seq-len"},
      {[](MakeShardsOptions& o) { o.bert.max_predictions = 0; }, "--max-predictions"},
      {[](MakeShardsOptions& o) { o.bert.max_predictions = 256; }, "--max-predictions"},
      {[](MakeShardsOptions& o) { o.bert.masked_lm_prob = 0; }, "--masked-lm-prob"},
      {[](MakeShardsOptions& o) { o.bert.masked_lm_prob = 1.5; }, "--masked-lm-prob"},
      {[](MakeShardsOptions& o) { o.bert.short_seq_prob = -0.5; }, "--short-seq-prob"},
      {[](MakeShardsOptions& o) { o.compression_level = 10; }, "--compression-level"},
      {[](MakeShardsOptions& o) { o.rng = ShardRng::python; o.valid_fraction = 0.1; }, "--rng python"},
      {[](MakeShardsOptions& o) { o.bin_size = 7; }, "--bin-size 7 must divide --seq-len 32"},
      {[](MakeShardsOptions& o) { o.bin_size = 4; }, "--bin-size"},
      {[](MakeShardsOptions& o) { o.model = ModelKind::gpt; o.bin_size = 8; }, "--bin-size"},
      {[](MakeShardsOptions& o) { o.pack = true, o.bin_size = 8; }, "--pack with --bin-size"},
      {[](MakeShardsOptions& o) { o.pack = true, o.model = ModelKind::gpt; }, "--pack"},
      {[](MakeShardsOptions& o) { o.max_pack = 2; }, "--max-pack"},
      {[](MakeShardsOptions& o) { o.pack = true, o.max_pack = 0; }, "--max-pack must be in [1, 127]"},
      {[](MakeShardsOptions& o) { o.pack = true, o.max_pack = 128; }, "--max-pack must be in [1, 127]"},
  };
  const std::string out = dir.file("refused");
  for (const Case& c : cases) {
    MakeShardsOptions o = bert_options(corpus, out);
    c.change(o);
    try {
      run_make_shards(o);
      ADD_FAILURE() << "no error; wanted one about " << c.says;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out)) << c.says << ": output made before the options were checked";
  }

  // A vocabulary without [MASK] is refused for BERT before any output.
  write_file_atomic(dir.file("nomask.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  MakeShardsOptions o = bert_options(corpus, out);
  o.tokenizer = dir.file("nomask.txt");
  try {
    run_make_shards(o);
    ADD_FAILURE() << "no error for a vocabulary without [MASK]";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("nomask.txt")), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));

  // A missing input is an error naming it; an input with no text is one too, and no shard is made.
  o = bert_options(corpus, out);
  o.inputs = {dir.file("missing.txt")};
  try {
    run_make_shards(o);
    ADD_FAILURE() << "no error for a missing input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing.txt")), std::string::npos) << e.what();
  }
  write_file_atomic(dir.file("blank.txt"), "\n \n\n");
  o.inputs = {dir.file("blank.txt")};
  try {
    run_make_shards(o);
    ADD_FAILURE() << "no error for an input without text";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no text found"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path_join(out, "train-00000.hdf5")));
}

// The corpus's documents in `parts` text files (each document whole in one), and options that cut
// them into one piece each and move small chunks between work files, so that every work file of
// every stage is there to free.
std::vector<std::string> corpus_in_parts(const TempDir& dir, const Corpus& c, int parts) {
  std::vector<std::string> files;
  for (int p = 0; p < parts; ++p) {
    std::string text;
    for (size_t d = size_t(p); d < c.documents.size(); d += size_t(parts)) {
      for (const auto& line : c.documents[d]) text += line + "\n";
      text += "\n";
    }
    files.push_back(dir.file(cat("part-", p, ".txt")));
    write_file_atomic(files.back(), text);
  }
  return files;
}

MakeShardsOptions pieces_options(const Corpus& c, const TempDir& dir, const std::string& out, ModelKind model) {
  MakeShardsOptions o = bert_options(c, out);
  o.model = model;
  o.inputs = corpus_in_parts(dir, c, 4);
  o.piece_bytes = 1;
  o.move_chunk_bytes = 4096;  // pieces moved into the store, and GPT's spread, in several chunks
  o.num_shards = 5;
  o.valid_fraction = 0.2;
  return o;
}

// The files under <out>/.work, relative.
std::set<std::string> work_files(const std::string& out) {
  std::set<std::string> names;
  if (!fs::exists(path_join(out, ".work"))) return names;
  for (const auto& e : fs::recursive_directory_iterator(path_join(out, ".work")))
    if (e.is_regular_file()) names.insert(fs::relative(e.path(), path_join(out, ".work")).string());
  return names;
}

size_t count_starting(const std::set<std::string>& names, const std::string& prefix) {
  return size_t(std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.starts_with(prefix); }));
}

// Runs o with PRETRAIN_FAULT=0:<point> (an Error, as a kill would leave the files) or, for
// "shards-N", stopped after N shards.
void run_until(MakeShardsOptions o, const std::string& point) {
  if (point.starts_with("shards-")) {
    o.stop_after_shards = std::stoi(point.substr(7));
    EXPECT_THROW(run_make_shards(o), MakeShardsInterrupted) << point;
    return;
  }
  ::setenv("PRETRAIN_FAULT", ("0:" + point).c_str(), 1);
  EXPECT_THROW(run_make_shards(o), Error) << point;
  ::unsetenv("PRETRAIN_FAULT");
}

// The files of an output without its work files.
std::map<std::string, std::string> shards_only(const std::string& dir) {
  auto files = output_files(dir);
  std::erase_if(files, [](const auto& f) { return f.first.starts_with(".work"); });
  return files;
}

// Each stage's work files go once the stages after it have what they need: the pieces once moved
// into the store; the store once every BERT instance is made (store.json stays, saying so); a
// spill bucket once the shards it feeds are committed; the rest at the end. --keep-work keeps
// them all, and the output is the same. Before, the store and every bucket stayed to the end,
// the disk holding store + buckets + shards (38.5 GB at the peak for 14.1 GB of shards).
TEST_F(MakeShards, EachWorkFileGoesOnceTheStagesAfterItHaveWhatTheyNeed) {
  const MakeShardsOptions o = pieces_options(corpus, dir, dir.file("cut"), ModelKind::bert);
  run_until(o, "tokenized");
  std::set<std::string> work = work_files(o.output_dir);
  EXPECT_TRUE(work.count("store/tokens.bin") && work.count("store/store.json"));
  EXPECT_EQ(count_starting(work, "pieces/"), 0u) << "the pieces are moved into the store";

  run_until(o, "store-freed");
  work = work_files(o.output_dir);
  EXPECT_EQ(count_starting(work, "store/"), 1u) << "only store.json: " << *work.begin();
  const nlohmann::json store_json = nlohmann::json::parse(read_file(path_join(o.output_dir, ".work/store/store.json")));
  EXPECT_TRUE(store_json.value("freed", false));
  EXPECT_EQ(store_json.at("taken_by").at("stage"), "bert-instances");
  const size_t buckets = count_starting(work, "spill-train/bucket-");
  EXPECT_GE(buckets, 5u);
  EXPECT_TRUE(work.count("spill-train/spill.json") && work.count("spill-valid/spill.json"));

  MakeShardsOptions resumed = o;
  resumed.resume = true;
  run_until(resumed, "shards-4");
  work = work_files(o.output_dir);
  EXPECT_LT(count_starting(work, "spill-train/bucket-"), buckets) << "the buckets of committed shards are gone";
  EXPECT_TRUE(work.count("spill-train/spill.json")) << "its counts stay to the end";
  EXPECT_EQ(count_starting(work, "commits-train/train-"), 3u) << "each committed shard's record counts (the 4th "
                                                                   "stopped the run before its own)";

  run_make_shards(resumed);
  EXPECT_TRUE(work_files(o.output_dir).empty());
  MakeShardsOptions kept = o;
  kept.output_dir = dir.file("kept");
  kept.keep_work = true;
  run_make_shards(kept);
  work = work_files(kept.output_dir);
  EXPECT_TRUE(TokenStore::complete(path_join(kept.output_dir, ".work/store"),
                                   nlohmann::json::parse(read_file(path_join(kept.output_dir, ".work/store/store.json"))).at("key")));
  EXPECT_EQ(count_starting(work, "spill-train/bucket-"), buckets);
  EXPECT_EQ(shards_only(kept.output_dir), output_files(o.output_dir)) << "--keep-work changes the output";
}

// GPT: the store is freed behind the spread into the shards' buckets (its blocks given back, the
// file's size kept), each bucket once its shard is committed.
TEST_F(MakeShards, GptFreesTheStoreAsItIsSpreadAndEachBucketOnceWritten) {
  const Corpus big = write_corpus(dir, 1500, 2);  // a store of several pages, spread in several chunks
  MakeShardsOptions o = pieces_options(big, dir, dir.file("cut"), ModelKind::gpt);
  o.move_chunk_bytes = 16384;
  run_until(o, "gpt-spread-chunk");
  const std::string tokens = path_join(o.output_dir, ".work/store/tokens.bin");
  struct stat st {};
  ASSERT_EQ(::stat(tokens.c_str(), &st), 0);
  EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t(st.st_size)) << "no block of the store was given back";
  EXPECT_EQ(nlohmann::json::parse(read_file(path_join(o.output_dir, ".work/store/store.json"))).at("taken_by").at("stage"),
            "gpt-spread");
  MakeShardsOptions resumed = o;
  resumed.resume = true;
  run_until(resumed, "shards-3");
  const std::set<std::string> work = work_files(o.output_dir);
  EXPECT_EQ(count_starting(work, "store/"), 1u) << "the store is gone once spread";
  size_t token_files = 0;
  for (const std::string& n : work) token_files += n.starts_with("gpt/bucket-") && n.ends_with(".tokens");
  EXPECT_EQ(token_files, 5u + 1u - 2u) << "5 train and 1 valid bucket, 3 of them written (the 3rd stopped the run "
                                         "before its bucket went)";
  run_make_shards(resumed);
  EXPECT_TRUE(work_files(o.output_dir).empty());
  MakeShardsOptions whole = o;
  whole.output_dir = dir.file("whole");
  whole.keep_work = true;
  run_make_shards(whole);
  EXPECT_EQ(shards_only(whole.output_dir), output_files(o.output_dir));
}

// Killed at each stage boundary, then --resume: the uninterrupted output, though each stage's
// inputs are gone once the next has committed what it needs.
TEST_F(MakeShards, ResumeGoesOnFromEachStageBoundaryWithTheWorkFilesGone) {
  for (ModelKind model : {ModelKind::bert, ModelKind::gpt}) {
    MakeShardsOptions o = pieces_options(corpus, dir, dir.file(cat(model_kind_name(model), "-whole")), model);
    run_make_shards(o);
    const auto reference = output_files(o.output_dir);
    const std::vector<std::string> points =
        model == ModelKind::bert
            ? std::vector<std::string>{"tokenize-checkpoint", "store-move-chunk", "tokenized", "instances", "store-freed",
                                       "shards-1", "shards-3"}
            : std::vector<std::string>{"store-move-chunk", "tokenized", "gpt-spread-chunk", "store-freed", "shards-2"};
    for (const std::string& point : points) {
      o.output_dir = dir.file(cat(model_kind_name(model), "-", point));
      o.resume = false;
      run_until(o, point);
      o.resume = true;
      run_make_shards(o);
      EXPECT_EQ(output_files(o.output_dir), reference) << model_kind_name(model) << " killed at " << point;
    }
  }
}

// A freed work file that a resumed run needs again (a committed shard damaged since, files
// deleted by hand) is an error naming it, never read as if it were there.
TEST_F(MakeShards, AFreedWorkFileThatIsNeededAgainIsAnErrorNamingIt) {
  auto damage = [](const std::string& path) {
    std::string bytes = read_file(path);
    bytes[bytes.size() / 2] ^= 0x01;
    write_file_atomic(path, bytes);
  };
  auto refused = [](const MakeShardsOptions& o, const std::string& says) {
    try {
      run_make_shards(o);
      ADD_FAILURE() << "no error; expected one saying " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  MakeShardsOptions o = pieces_options(corpus, dir, dir.file("bert"), ModelKind::bert);
  run_until(o, "shards-4");
  damage(path_join(o.output_dir, "train-00000.hdf5"));
  o.resume = true;
  refused(o, "spill bucket was freed");
  refused(o, path_join(o.output_dir, ".work/spill-train/bucket-0.bin"));

  o = pieces_options(corpus, dir, dir.file("bert2"), ModelKind::bert);
  run_until(o, "store-freed");
  fs::remove(path_join(o.output_dir, ".work/spill-valid/spill.json"));
  o.resume = true;
  refused(o, "the token store was freed once every instance was made, but these spill buckets are not whole");

  o = pieces_options(corpus, dir, dir.file("gpt"), ModelKind::gpt);
  run_until(o, "shards-3");
  damage(path_join(o.output_dir, "train-00000.bin"));
  o.resume = true;
  refused(o, "the bucket of shard train-00000.bin is gone");

  o = pieces_options(corpus, dir, dir.file("gpt2"), ModelKind::gpt);
  run_until(o, "gpt-spread-chunk");
  fs::remove(path_join(o.output_dir, ".work/gpt/bucket-0.sizes"));
  o.resume = true;
  refused(o, "the spread's buckets are not whole, and the token store was partly freed");
}

// The store freed by a run with other options (another seed) is made again, not read: the
// resumed run's output is that of a fresh run with its options.
TEST_F(MakeShards, AStoreFreedByARunWithOtherOptionsIsMadeAgain) {
  for (ModelKind model : {ModelKind::bert, ModelKind::gpt}) {
    MakeShardsOptions o = pieces_options(corpus, dir, dir.file(cat(model_kind_name(model), "-a")), model);
    run_until(o, model == ModelKind::bert ? "store-freed" : "gpt-spread-chunk");
    o.seed = 99;
    o.resume = true;
    run_make_shards(o);
    MakeShardsOptions fresh = o;
    fresh.output_dir = dir.file(cat(model_kind_name(model), "-b"));
    fresh.resume = false;
    run_make_shards(fresh);
    EXPECT_EQ(output_files(o.output_dir), output_files(fresh.output_dir)) << model_kind_name(model);
  }
}

// The manifest's tokenizer record: the vocabulary as the tool was given it, with its size and
// xxh3; the options it was loaded with; its casing, as the tokenizer decided it when loaded (from
// the options, else from the vocabulary); and its special tokens. --export reads this alone.
TEST_F(MakeShards, TheManifestRecordsTheTokenizerAsItWasLoaded) {
  MakeShardsOptions o = bert_options(corpus, dir.file("cased"));
  o.dupe_factor = 1;
  o.num_shards = 1;
  o.tokenizer_options.lowercase = false;
  o.tokenizer_options.python_compat = true;
  run_make_shards(o);
  const TokenizerInfo t = Manifest::read(path_join(o.output_dir, kManifestName)).tokenizer;
  ASSERT_TRUE(t.has_record());
  ASSERT_EQ(t.files.size(), 1u);
  EXPECT_EQ(t.files[0].role, "vocab");
  EXPECT_EQ(t.files[0].path, corpus.vocab_path);
  EXPECT_EQ(t.files[0].bytes, file_size(corpus.vocab_path));
  EXPECT_EQ(t.files[0].xxh3, hex64(xxh3_file(corpus.vocab_path)));
  EXPECT_EQ(t.options["lowercase"], false);
  EXPECT_EQ(t.options["python_compat"], true);
  EXPECT_TRUE(t.options["strip_accents"].is_null());
  EXPECT_FALSE(t.casing.lowercase);
  EXPECT_EQ(t.casing.strip_accents, false);  // follows lowercase
  ASSERT_EQ(t.special_tokens.count("mask"), 1u);
  EXPECT_EQ(t.special_tokens.at("mask").id, 4);
  EXPECT_EQ(t.special_tokens.at("mask").token, "[MASK]");
  EXPECT_EQ(t.special_tokens.at("cls").token, "[CLS]");
  EXPECT_EQ(t.special_tokens.size(), t.special_ids.size());

  // No casing given: the vocabulary has no uppercase letter, so the tokenizer lowercases.
  o = bert_options(corpus, dir.file("default"));
  o.dupe_factor = 1;
  o.num_shards = 1;
  run_make_shards(o);
  const TokenizerInfo d = Manifest::read(path_join(o.output_dir, kManifestName)).tokenizer;
  EXPECT_TRUE(d.options["lowercase"].is_null());
  EXPECT_EQ(d.options["python_compat"], false);
  EXPECT_TRUE(d.casing.lowercase);
  EXPECT_EQ(d.casing.strip_accents, true);
}

}  // namespace
}  // namespace pretrain::make_shards_test
