// The loader over BERT shards: order, sharding over ranks, determinism, resume, masking, packed
// shards, and failure behaviour (errors with file and record, no hangs). The widen step of the
// device copy is device_copy_test.cpp's.
#include "loader/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/bert_hdf5.h"
#include "bert_shards_fixture.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::loader_test {
namespace {

using testing::TempDir;

constexpr int64_t kSeq = 16, kPred = 3, kVocab = 30522, kCls = 101, kSep = 102, kMask = 103;

// Record g of the test data: [CLS] (1000 + g) w w w [SEP] w w [SEP] pad…, masks at 2 and 6, so every
// sample says which record it is (input_ids[1] - 1000) and has a static mask to undo.
BertRecord make_record(int64_t g) {
  BertRecord r;
  const int64_t n = 9 + g % 5;
  for (int64_t j = 0; j < n; ++j) {
    int64_t id = j == 0 ? kCls : j == 1 ? 1000 + g : 2000 + (g * 13 + j) % 20000;
    if (j == 5 || j == n - 1) id = kSep;
    r.input_ids.push_back(int32_t(id));
    r.input_mask.push_back(1);
    r.segment_ids.push_back(j > 5);
  }
  r.masked_lm_positions = {2, 6};
  r.masked_lm_ids = {r.input_ids[2], r.input_ids[6]};
  r.input_ids[2] = kMask;
  r.input_ids[6] = 7;  // "random word"
  r.next_sentence_label = int32_t(g % 2);
  return r;
}

// Shards of the given sizes in `dir`, records numbered across them, and a manifest.
std::vector<std::string> write_shards(const std::string& dir, const std::vector<int64_t>& sizes, bool manifest = true) {
  auto written = testing::write_bert_shards(
      dir, sizes, kSeq, kPred, {{"[PAD]", 0}, {"[UNK]", 100}, {"[CLS]", kCls}, {"[SEP]", kSep}, {"[MASK]", kMask}},
      make_record);
  if (manifest) written.manifest.write(path_join(dir, kManifestName));
  return written.files;
}

LoaderConfig bert_config(const std::string& source) {
  LoaderConfig c;
  c.sources = {source};
  c.kind = ModelKind::bert;
  c.batch_size = 8;
  c.seed = 42;
  c.workers = 2;
  c.prefetch = 3;
  c.shuffle_window = 40;
  return c;
}

// `c` with dynamic masking at `probability`, at most `max_predictions` per sample, reading the
// samples in stored order, `batch` at a time.
LoaderConfig masking_config(LoaderConfig c, int64_t batch, double probability, int64_t max_predictions) {
  c.shuffle = false;
  c.batch_size = batch;
  c.masking.enabled = true;
  c.masking.probability = probability;
  c.masking.max_predictions = max_predictions;
  return c;
}

int64_t record_of(const Batch& b, int64_t row) {
  // input_ids[1] is never masked in the data (the static masks are at 2 and 6).
  return b.input_ids.as<int32_t>()[row * kSeq + 1] - 1000;
}

// Every batch of one epoch, as record numbers per batch.
std::vector<std::vector<int64_t>> epoch_records(Loader& loader) {
  std::vector<std::vector<int64_t>> out;
  while (auto b = loader.next()) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < b->size; ++i) rows.push_back(record_of(*b, i));
    out.push_back(rows);
  }
  return out;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override { files = write_shards(dir.path(), {37, 50, 13, 29}); }
  TempDir dir;
  std::vector<std::string> files;
  static constexpr int64_t kTotal = 37 + 50 + 13 + 29;
};

TEST_F(LoaderTest, UnshuffledBatchesAreTheRecordsInOrderWithEveryField) {
  LoaderConfig c = bert_config(dir.path());
  c.shuffle = false;
  c.drop_last = false;
  Loader loader(c);
  EXPECT_EQ(loader.samples_per_epoch(), uint64_t(kTotal));
  EXPECT_EQ(loader.batches_per_epoch(), uint64_t((kTotal + 7) / 8));
  EXPECT_EQ(loader.seq_len(), kSeq);
  EXPECT_EQ(loader.vocab_size(), kVocab);
  int64_t g = 0;
  while (auto b = loader.next()) {
    for (int64_t i = 0; i < b->size; ++i, ++g) {
      const BertRecord want = make_record(g);
      const int32_t* ids = b->input_ids.as<int32_t>() + i * kSeq;
      const int32_t* labels = b->mlm_labels.as<int32_t>() + i * kSeq;
      for (int64_t j = 0; j < kSeq; ++j) {
        const bool real = j < int64_t(want.input_ids.size());
        EXPECT_EQ(ids[j], real ? want.input_ids[size_t(j)] : 0) << g << " " << j;
        EXPECT_EQ(b->input_mask.as<int32_t>()[i * kSeq + j], real ? 1 : 0);
        EXPECT_EQ(b->segment_ids.as<int32_t>()[i * kSeq + j], real ? want.segment_ids[size_t(j)] : 0);
        const int32_t label = j == 2 ? want.masked_lm_ids[0] : j == 6 ? want.masked_lm_ids[1] : -1;
        EXPECT_EQ(labels[j], label) << g << " " << j;
      }
      const int32_t* pos = b->masked_lm_positions.as<int32_t>() + i * kPred;
      EXPECT_EQ(std::vector<int32_t>(pos, pos + kPred), (std::vector<int32_t>{2, 6, 0}));
      EXPECT_EQ(b->masked_lm_ids.as<int32_t>()[i * kPred + 1], want.masked_lm_ids[1]);
      EXPECT_EQ(b->next_sentence_labels.as<int32_t>()[i], want.next_sentence_label);
    }
  }
  EXPECT_EQ(g, kTotal);
  EXPECT_EQ(loader.state().epoch, 1u);
}

TEST_F(LoaderTest, EveryRankCountGivesEverySampleOncePerEpoch) {
  for (int world = 1; world <= 4; ++world) {
    for (bool shuffle : {false, true}) {
      std::multiset<int64_t> seen;
      size_t batches = 0;
      for (int rank = 0; rank < world; ++rank) {
        LoaderConfig c = bert_config(dir.path());
        c.world_size = world;
        c.rank = rank;
        c.shuffle = shuffle;
        c.drop_last = false;
        Loader loader(c);
        auto epoch = epoch_records(loader);
        EXPECT_EQ(epoch.size(), loader.batches_per_epoch()) << world << " " << rank;
        batches += epoch.size();
        for (const auto& rows : epoch) seen.insert(rows.begin(), rows.end());
      }
      std::multiset<int64_t> all;
      for (int64_t g = 0; g < kTotal; ++g) all.insert(g);
      EXPECT_EQ(seen, all) << "world " << world << " shuffle " << shuffle;
      EXPECT_GE(batches, size_t(kTotal / 8));
    }
  }
}

TEST_F(LoaderTest, DropLastGivesEveryRankTheSameNumberOfFullBatches) {
  for (int world : {1, 3}) {
    std::set<int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      LoaderConfig c = bert_config(dir.path());
      c.world_size = world;
      c.rank = rank;
      Loader loader(c);
      auto epoch = epoch_records(loader);
      ASSERT_EQ(epoch.size(), size_t(kTotal / (8 * world)));
      for (const auto& rows : epoch) {
        EXPECT_EQ(rows.size(), 8u);
        for (int64_t r : rows) EXPECT_TRUE(seen.insert(r).second) << "sample " << r << " twice";
      }
    }
  }
}

TEST_F(LoaderTest, RanksTakeTheirSliceOfEachGlobalBatch) {
  // A world of 2 with batch 4 sees exactly the global batches of a world of 1 with batch 8.
  LoaderConfig one = bert_config(dir.path());
  Loader single(one);
  auto whole = epoch_records(single);
  std::vector<std::vector<int64_t>> parts[2];
  for (int rank = 0; rank < 2; ++rank) {
    LoaderConfig c = bert_config(dir.path());
    c.batch_size = 4;
    c.world_size = 2;
    c.rank = rank;
    Loader loader(c);
    parts[rank] = epoch_records(loader);
  }
  ASSERT_EQ(parts[0].size(), whole.size());
  for (size_t k = 0; k < whole.size(); ++k) {
    std::vector<int64_t> joined = parts[0][k];
    joined.insert(joined.end(), parts[1][k].begin(), parts[1][k].end());
    EXPECT_EQ(joined, whole[k]) << "global batch " << k;
  }
}

TEST_F(LoaderTest, OrderDependsOnSeedAndEpochButNotOnWorkersOrPrefetch) {
  auto run = [&](uint64_t seed, int workers, int prefetch, int epochs) {
    LoaderConfig c = bert_config(dir.path());
    c.seed = seed;
    c.workers = workers;
    c.prefetch = prefetch;
    Loader loader(c);
    std::vector<std::vector<std::vector<int64_t>>> out;
    for (int e = 0; e < epochs; ++e) out.push_back(epoch_records(loader));
    return out;
  };
  auto a = run(42, 1, 1, 2), b = run(42, 4, 5, 2), c = run(43, 2, 3, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a[0], a[1]) << "the second epoch repeats the first's order";
  std::vector<int64_t> first;
  for (const auto& rows : a[0]) first.insert(first.end(), rows.begin(), rows.end());
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(first, sorted) << "not shuffled";
}

TEST_F(LoaderTest, RestoringAStateGivesTheBatchesOfAnUninterruptedRun) {
  LoaderConfig c = bert_config(dir.path());
  c.drop_last = false;
  std::vector<std::vector<int64_t>> straight;
  {
    Loader loader(c);
    for (int e = 0; e < 3; ++e)
      for (auto& rows : epoch_records(loader)) straight.push_back(rows);
  }
  const size_t per_epoch = straight.size() / 3;
  for (size_t k : {size_t(0), size_t(3), per_epoch - 1, per_epoch, per_epoch + 2}) {
    Loader first(c);
    std::string saved;
    size_t taken = 0;
    while (taken < k) {
      auto b = first.next();
      if (b) ++taken;
    }
    saved = first.state().to_json();
    // The same loader, rewound after reading further, and a new loader: both continue from k.
    for (int i = 0; i < 4; ++i) first.next();
    Loader second(c);
    for (Loader* l : {&first, &second}) {
      l->restore(LoaderState::from_json(saved));
      std::vector<std::vector<int64_t>> rest;
      while (rest.size() < straight.size() - k) {
        auto b = l->next();
        if (!b) continue;
        std::vector<int64_t> rows;
        for (int64_t i = 0; i < b->size; ++i) rows.push_back(record_of(*b, i));
        rest.push_back(rows);
      }
      EXPECT_TRUE(std::equal(rest.begin(), rest.end(), straight.begin() + std::ptrdiff_t(k))) << "after " << k;
    }
  }
}

TEST_F(LoaderTest, RestoreRefusesAStateFromAnotherRun) {
  LoaderConfig c = bert_config(dir.path());
  Loader loader(c);
  LoaderState s = loader.state();
  s.seed = 7;
  EXPECT_THROW(loader.restore(s), UsageError);
  s = loader.state();
  s.fingerprint ^= 1;
  EXPECT_THROW(loader.restore(s), UsageError);
  s = loader.state();
  s.consumed = 5;  // not a batch boundary
  EXPECT_THROW(loader.restore(s), UsageError);
  EXPECT_THROW(LoaderState::from_json("{\"epoch\": 1}"), Error);
  EXPECT_THROW(LoaderState::from_json("not json"), Error);
  EXPECT_TRUE(loader.next().has_value()) << "a refused restore leaves the loader working";
}

TEST_F(LoaderTest, EpochsLimitEndsTheStream) {
  LoaderConfig c = bert_config(dir.path());
  c.epochs = 2;
  Loader loader(c);
  EXPECT_EQ(epoch_records(loader).size(), size_t(kTotal / 8));
  EXPECT_EQ(epoch_records(loader).size(), size_t(kTotal / 8));
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_FALSE(loader.next().has_value());
}

TEST_F(LoaderTest, Int64IdsAndWideTokensGiveTheSameValues) {
  LoaderConfig c = bert_config(dir.path());
  c.shuffle = false;
  Loader narrow(c);
  c.narrow_tokens = false;
  c.id_dtype = TensorDType::i64;
  Loader wide(c);
  auto a = narrow.next(), b = wide.next();
  ASSERT_TRUE(a && b);
  for (const auto& [name, t] : a->tensors()) {
    Tensor u;
    for (const auto& [n2, t2] : b->tensors())
      if (n2 == name) u = t2;
    ASSERT_EQ(t.numel(), u.numel()) << name;
    EXPECT_EQ(u.dtype, TensorDType::i64);
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(int64_t(t.as<int32_t>()[i]), u.as<int64_t>()[i]) << name << " " << i;
  }
  EXPECT_THROW(a->input_ids.as<int64_t>(), Error);
}

TEST_F(LoaderTest, DynamicMaskingFollowsLddlAndIsDeterministic) {
  const LoaderConfig c = masking_config(bert_config(dir.path()), 16, 0.3, 4);
  auto run = [&](int workers) {
    LoaderConfig cc = c;
    cc.workers = workers;
    Loader loader(cc);
    std::vector<std::vector<int32_t>> out;
    for (int e = 0; e < 2; ++e)
      while (auto b = loader.next()) {
        for (const auto& [name, t] : b->tensors()) out.emplace_back(t.as<int32_t>(), t.as<int32_t>() + t.numel());
      }
    return out;
  };
  EXPECT_EQ(run(1), run(3));

  Loader loader(c);
  EXPECT_EQ(loader.max_predictions(), 4);
  int64_t candidates = 0, picked = 0, masked = 0, differs = 0, g = 0;
  std::map<int64_t, std::vector<int32_t>> first_epoch;
  for (int e = 0; e < 2; ++e) {
    g = 0;
    while (auto b = loader.next()) {
      for (int64_t i = 0; i < b->size; ++i, ++g) {
        const BertRecord orig = make_record(g);
        const int32_t* ids = b->input_ids.as<int32_t>() + i * kSeq;
        const int32_t* pos = b->masked_lm_positions.as<int32_t>() + i * 4;
        const int32_t* lab = b->masked_lm_ids.as<int32_t>() + i * 4;
        const int32_t* dense = b->mlm_labels.as<int32_t>() + i * kSeq;
        std::set<int32_t> at;
        for (int p = 0; p < 4 && pos[p] != 0; ++p) {
          at.insert(pos[p]);
          if (p > 0) {
            EXPECT_LT(pos[p - 1], pos[p]) << "positions in order";
          }
          // The label is the original id (the static mask of the shard undone first).
          const int32_t want = orig.input_ids[size_t(pos[p])] == kMask || pos[p] == 6
                                   ? orig.masked_lm_ids[pos[p] == 2 ? 0 : 1]
                                   : orig.input_ids[size_t(pos[p])];
          EXPECT_EQ(lab[p], want);
          EXPECT_EQ(dense[pos[p]], want);
          EXPECT_NE(want, kCls);
          EXPECT_NE(want, kSep);
          masked += ids[pos[p]] == kMask;
        }
        picked += int64_t(at.size());
        for (int64_t j = 0; j < kSeq; ++j) {
          if (!at.count(int32_t(j))) {
            EXPECT_EQ(dense[j], -1);
            if (j < int64_t(orig.input_ids.size())) {
              const int32_t want = j == 2 ? orig.masked_lm_ids[0] : j == 6 ? orig.masked_lm_ids[1] : orig.input_ids[size_t(j)];
              EXPECT_EQ(ids[j], want) << "unpicked token changed at " << j;
            } else {
              EXPECT_EQ(ids[j], 0);
            }
          }
        }
        candidates += int64_t(orig.input_ids.size()) - 3;  // [CLS], two [SEP]
        std::vector<int32_t> row(pos, pos + 4);
        if (e == 0) first_epoch[g] = row;
        else differs += first_epoch[g] != row;  // the same picks are possible, just rare
      }
    }
  }
  // 2 epochs × 129 records × ~10 candidates × 0.3, capped at 4: ≈ 2.9 picks per record.
  EXPECT_GT(picked, 2 * kTotal * 2);
  EXPECT_LT(picked, 2 * kTotal * 4 + 1);
  EXPECT_GT(masked, picked * 6 / 10);
  EXPECT_LT(masked, picked * 95 / 100);
  EXPECT_GT(differs, kTotal / 2) << "each epoch masks anew";
  (void)candidates;
}

TEST_F(LoaderTest, DynamicMaskingReadsRoleNamedSpecialIds) {
  // make-pretraining-shards' manifests name special ids by role, as our tokenizers do.
  Manifest m = Manifest::read(path_join(dir.path(), kManifestName));
  m.tokenizer.special_ids = {{"pad", 0}, {"unk", 100}, {"cls", kCls}, {"sep", kSep}, {"mask", kMask}};
  m.write(path_join(dir.path(), kManifestName));
  LoaderConfig c = bert_config(dir.path());
  c.masking.enabled = true;
  c.masking.probability = 0.5;
  Loader loader(c);
  int64_t masks = 0;
  while (auto b = loader.next())
    for (int64_t i = 0; i < b->masked_lm_positions.numel(); ++i) {
      const int32_t at = b->masked_lm_positions.as<int32_t>()[i];
      if (at == 0) continue;
      const int32_t label = b->masked_lm_ids.as<int32_t>()[i];
      EXPECT_NE(label, kCls);
      EXPECT_NE(label, kSep);
      masks += b->input_ids.as<int32_t>()[(i / kPred) * kSeq + at] == kMask;
    }
  EXPECT_GT(masks, 0);
  m.tokenizer.special_ids.erase("mask");
  m.write(path_join(dir.path(), kManifestName));
  EXPECT_THROW(Loader{c}, UsageError) << "no [MASK] id anywhere";
}

TEST_F(LoaderTest, AWorkerErrorSurfacesFromNextWithTheFile) {
  // Truncate the third shard (in file order) after the loader has been built from the manifest's
  // sizes? The manifest check would catch that; so build from the files and damage one.
  TempDir other;
  auto damaged = write_shards(other.path(), {20, 20}, false);
  {
    std::string bytes = read_file(damaged[1]);
    std::filesystem::resize_file(damaged[1], bytes.size() / 2);
  }
  LoaderConfig c = bert_config(damaged[0]);
  c.sources.push_back(damaged[1]);
  c.shuffle = false;
  c.shuffle_window = 1;
  try {
    Loader loader(c);  // opening the shard to count its records may fail already: also fine
    for (int i = 0; i < 10; ++i) loader.next();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(damaged[1]), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, AnIdOutsideTheVocabularyNamesFileAndRecord) {
  Manifest m = Manifest::read(path_join(dir.path(), kManifestName));
  m.tokenizer.vocab_size = 1500;  // record 0 has id 2000 + …
  m.write(path_join(dir.path(), kManifestName));
  LoaderConfig c = bert_config(dir.path());
  c.shuffle = false;
  Loader loader(c);
  try {
    loader.next();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(files[0] + ": record 0"), std::string::npos) << what;
    EXPECT_NE(what.find("vocabulary size 1500"), std::string::npos) << what;
  }
  EXPECT_THROW(loader.next(), Error) << "the loader stays failed";
}

TEST_F(LoaderTest, BadSourcesAreRefusedAtConstruction) {
  auto expect_error = [&](LoaderConfig c, const std::string& needle) {
    try {
      Loader loader(c);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(bert_config(dir.file("missing.hdf5")), "missing.hdf5");
  LoaderConfig gpt = bert_config(dir.path());
  gpt.kind = ModelKind::gpt;
  gpt.seq_len = 8;
  expect_error(gpt, "bert-hdf5");
  LoaderConfig seq = bert_config(dir.path());
  seq.seq_len = 128;
  expect_error(seq, "128");
  LoaderConfig rank = bert_config(dir.path());
  rank.rank = 2;
  rank.world_size = 2;
  expect_error(rank, "rank 2");
  LoaderConfig device = bert_config(dir.path());
  device.device = "tpu";
  expect_error(device, "tpu");
  // A shard changed since the manifest was written.
  {
    std::ofstream(files[2], std::ios::app) << "junk";
  }
  expect_error(bert_config(dir.path()), files[2]);
}

TEST_F(LoaderTest, AnIncompleteManifestIsRefused) {
  Manifest m = Manifest::read(path_join(dir.path(), kManifestName));
  m.complete = false;
  m.write(path_join(dir.path(), kManifestName));
  EXPECT_THROW(Loader{bert_config(dir.path())}, Error);
}

TEST_F(LoaderTest, ABinnedSplitWithoutBinsIsRefused) {
  // make-pretraining-shards --bin-size: the split's manifest lists bins (binned_source_test.cpp).
  Manifest m = Manifest::read(path_join(dir.path(), kManifestName));
  m.format = kFormatBertHdf5Binned;
  m.shards.clear();
  m.write(path_join(dir.path(), kManifestName));
  try {
    Loader loader(bert_config(dir.path()));
    ADD_FAILURE() << "a binned manifest without bins loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lists no bins"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, HoldingEveryslotIsAnErrorNotAHang) {
  LoaderConfig c = bert_config(dir.path());
  c.prefetch = 2;
  Loader loader(c);
  auto a = loader.next(), b = loader.next();
  ASSERT_TRUE(a && b);
  EXPECT_THROW(loader.next(), Error);
  a->release();
  EXPECT_TRUE(loader.next().has_value());
}

TEST_F(LoaderTest, BatchesOutliveTheLoaderAndDestructionMidEpochReturns) {
  std::optional<Batch> kept;
  {
    LoaderConfig c = bert_config(dir.path());
    c.shuffle = false;
    Loader loader(c);
    kept = loader.next();
  }  // the pipeline was full and waiting for slots: the destructor must stop it
  ASSERT_TRUE(kept);
  EXPECT_EQ(record_of(*kept, 3), 3);
  for (int i = 0; i < 20; ++i) {
    LoaderConfig c = bert_config(dir.path());
    c.prefetch = 1 + i % 4;
    Loader loader(c);
    if (i % 2) loader.next();
  }
}

TEST_F(LoaderTest, StatsCountWhatWasHandedOut) {
  LoaderConfig c = bert_config(dir.path());
  Loader loader(c);
  auto epoch = epoch_records(loader);
  const LoaderStats s = loader.stats();
  EXPECT_EQ(s.batches, epoch.size());
  EXPECT_EQ(s.samples, epoch.size() * 8);
  EXPECT_GT(s.samples_per_second, 0);
  EXPECT_GE(s.wait_seconds, 0);
  EXPECT_GT(s.read_seconds, 0);
}

TEST_F(LoaderTest, CudaDeviceFailsClearlyWithoutAGpu) {
  LoaderConfig c = bert_config(dir.path());
  c.device = "cuda:0";
  try {
    Loader loader(c);
    GTEST_SKIP() << "a GPU is here: the gpu tests cover this";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

// NVIDIA's own file (made by their create_pretraining_data.py): the loader reads every record as
// the format reader does.
TEST(LoaderGolden, NvidiaShardReadsAsTheFormatReaderReadsIt) {
  PRETRAIN_REQUIRE_SHARED(path, "golden/nvidia-bert-sample-s128.hdf5");
  BertShardReader reader(path);
  BertBatch all;
  reader.read_range(0, reader.size(), all);
  LoaderConfig c;
  c.sources = {path};
  c.batch_size = 5;
  c.shuffle = false;
  c.drop_last = false;
  Loader loader(c);
  EXPECT_EQ(loader.vocab_size(), 0) << "no manifest: ids travel as int32";
  int64_t g = 0;
  while (auto b = loader.next())
    for (int64_t i = 0; i < b->size; ++i, ++g) {
      const BertRecord want = all.record(g);
      for (int64_t j = 0; j < all.seq_len; ++j) {
        ASSERT_EQ(b->input_ids.as<int32_t>()[i * all.seq_len + j], want.input_ids[size_t(j)]) << g;
        ASSERT_EQ(b->segment_ids.as<int32_t>()[i * all.seq_len + j], want.segment_ids[size_t(j)]) << g;
      }
      for (int64_t p = 0; p < all.max_predictions; ++p)
        ASSERT_EQ(b->masked_lm_ids.as<int32_t>()[i * all.max_predictions + p], want.masked_lm_ids[size_t(p)]);
      ASSERT_EQ(b->next_sentence_labels.as<int32_t>()[i], want.next_sentence_label);
    }
  EXPECT_EQ(g, reader.size());
}

// ---------------------------------------------------------------- packed shards
// Record g of packed test data: 1 + g % 3 instances of 5 + (g + j) % 4 tokens one after another
// ([CLS] marker w [SEP] w… [SEP]; the first instance's marker is 1000 + g), a static mask at each
// instance's third token, NSP label (g + j) % 2.
constexpr int64_t kPackSeq = 32, kPack = 3;

BertRecord make_packed_record(int64_t g) {
  BertRecord r;
  const int64_t n = 1 + g % 3;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t len = 5 + (g + j) % 4, at = int64_t(r.input_ids.size());
    for (int64_t t = 0; t < len; ++t) {
      int64_t id = t == 0 ? kCls : t == 1 ? (j == 0 ? 1000 + g : 3000 + j) : 2000 + (g * 7 + j * 3 + t) % 500;
      if (t == 3 || t == len - 1) id = kSep;
      r.input_ids.push_back(int32_t(id));
      r.input_mask.push_back(1);
      r.segment_ids.push_back(t > 3);
      r.position_ids.push_back(int32_t(t));
      r.sequence_ids.push_back(int32_t(j + 1));
    }
    r.masked_lm_positions.push_back(int32_t(at + 2));
    r.masked_lm_ids.push_back(r.input_ids[size_t(at + 2)]);
    r.input_ids[size_t(at + 2)] = kMask;
    r.next_sentence_positions.push_back(int32_t(at));
    r.packed_next_sentence_labels.push_back(int32_t((g + j) % 2));
  }
  r.next_sentence_label = r.packed_next_sentence_labels[0];
  return r;
}

std::vector<std::string> write_packed_shards(const std::string& dir, const std::vector<int64_t>& sizes) {
  auto written = testing::write_bert_shards(
      dir, sizes, kPackSeq, kPack, {{"[PAD]", 0}, {"[UNK]", 100}, {"[CLS]", kCls}, {"[SEP]", kSep}, {"[MASK]", kMask}},
      make_packed_record, kPack);
  written.manifest.write(path_join(dir, kManifestName));
  return written.files;
}

TEST(PackedLoader, EveryPackedFieldArrivesAsStored) {
  TempDir dir;
  write_packed_shards(dir.path(), {11, 14});
  LoaderConfig c = bert_config(dir.path());
  c.shuffle = false;
  c.drop_last = false;
  c.batch_size = 4;
  for (TensorDType dtype : {TensorDType::i32, TensorDType::i64}) {
    c.id_dtype = dtype;
    Loader loader(c);
    EXPECT_EQ(loader.max_pack(), kPack);
    auto at = [](const Tensor& t, int64_t i) {
      return t.dtype == TensorDType::i64 ? t.as<int64_t>()[i] : int64_t(t.as<int32_t>()[i]);
    };
    int64_t g = 0;
    while (auto b = loader.next()) {
      ASSERT_TRUE(b->packed());
      EXPECT_EQ(b->next_sentence_labels.ndim, 2);
      EXPECT_EQ(b->next_sentence_labels.shape[1], kPack);
      EXPECT_EQ(b->next_sentence_positions.shape[1], kPack);
      EXPECT_EQ(b->tensors().size(), 10u);
      for (int64_t i = 0; i < b->size; ++i, ++g) {
        BertBatch want(1, kPackSeq, kPack, kPack);
        want.set(0, make_packed_record(g));
        for (int64_t j = 0; j < kPackSeq; ++j) {
          const int64_t e = i * kPackSeq + j;
          EXPECT_EQ(at(b->input_ids, e), want.input_ids[size_t(j)]) << g << " " << j;
          EXPECT_EQ(at(b->position_ids, e), want.position_ids[size_t(j)]) << g << " " << j;
          EXPECT_EQ(at(b->sequence_ids, e), want.sequence_ids[size_t(j)]) << g << " " << j;
          EXPECT_EQ(at(b->input_mask, e), want.input_mask[size_t(j)]) << g << " " << j;
          int64_t label = -1;
          for (int64_t p = 0; p < kPack; ++p)
            if (want.masked_lm_positions[size_t(p)] == j && j > 0) label = want.masked_lm_ids[size_t(p)];
          EXPECT_EQ(at(b->mlm_labels, e), label) << g << " " << j;
        }
        for (int64_t k = 0; k < kPack; ++k) {
          EXPECT_EQ(at(b->next_sentence_positions, i * kPack + k), want.next_sentence_positions[size_t(k)]);
          EXPECT_EQ(at(b->next_sentence_labels, i * kPack + k), want.packed_next_sentence_labels[size_t(k)])
              << g << " slot " << k << " (-1: no instance)";
        }
      }
    }
    EXPECT_EQ(g, 25);
  }
}

TEST(PackedLoader, DynamicMaskingStaysOffEveryInstancesSpecialTokens) {
  TempDir dir;
  write_packed_shards(dir.path(), {30});
  const LoaderConfig c = masking_config(bert_config(dir.path()), 5, 0.5, 3);
  Loader loader(c);
  int64_t g = 0, picked = 0;
  while (auto b = loader.next()) {
    for (int64_t i = 0; i < b->size; ++i, ++g) {
      const BertRecord orig = make_packed_record(g);
      const int32_t* pos = b->masked_lm_positions.as<int32_t>() + i * 3;
      const int32_t* seq = b->sequence_ids.as<int32_t>() + i * kPackSeq;
      for (int64_t p = 0; p < 3 && pos[p] != 0; ++p, ++picked) {
        const int32_t id = b->masked_lm_ids.as<int32_t>()[i * 3 + p];
        // The static mask is undone first: the label is the original id, never a special one.
        int32_t original = orig.input_ids[size_t(pos[p])];
        for (size_t m = 0; m < orig.masked_lm_positions.size(); ++m)
          if (orig.masked_lm_positions[m] == pos[p]) original = orig.masked_lm_ids[m];
        EXPECT_EQ(id, original) << g << " " << pos[p];
        EXPECT_NE(id, kCls);
        EXPECT_NE(id, kSep);
        EXPECT_GT(seq[pos[p]], 0) << "a pick on padding";
      }
    }
  }
  EXPECT_GT(picked, 30) << "masking picked almost nothing";
}

TEST(PackedLoader, PackedAndUnpackedShardsAreNotMixed) {
  TempDir packed, plain;
  write_packed_shards(packed.path(), {8});
  auto written = testing::write_bert_shards(plain.path(), {8}, kPackSeq, kPack, {{"[CLS]", kCls}}, make_record);
  written.manifest.write(path_join(plain.path(), kManifestName));
  LoaderConfig c = bert_config(packed.path());
  c.sources.push_back(plain.path());
  try {
    Loader loader(c);
    ADD_FAILURE() << "packed and unpacked shards mixed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_pack"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(written.files[0]), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::loader_test
