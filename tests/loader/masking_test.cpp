// Dynamic masking (loader/masking.h) as LDDL does it, on fixed seeds: each candidate token picked
// with probability p, picks capped at max_predictions by a uniform subset, 80/10/10, specials and
// padding never picked, the choices a function of (seed, epoch, sample) only, static masks undone
// first; and what a bad configuration gets (from mask_row itself and from the Loader that builds the
// plan).
//
// Statistical bounds: every rate is checked against its expectation within 6 standard deviations of
// the binomial it follows (sd = sqrt(q(1 - q) / n)). The seeds are fixed, so the tests are
// deterministic; the bound says a correct implementation fails on a fresh seed with probability
// below 1e-8 per check, while a wrong rule (p off by a few points, 80/10/10 swapped, a biased
// subset) lands far outside it at these sample sizes.
#include "loader/masking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/bert_hdf5.h"
#include "loader/loader.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::masking_test {
namespace {

using testing::TempDir;

constexpr int64_t kVocab = 30522, kPad = 0, kUnk = 100, kCls = 101, kSep = 102, kMask = 103;

MaskingPlan make_plan(double p, int64_t max_predictions, uint64_t seed = 1234) {
  MaskingPlan plan;
  plan.probability = p;
  plan.max_predictions = max_predictions;
  plan.mask_id = kMask;
  plan.vocab_size = kVocab;
  plan.seed = seed;
  plan.special.assign(size_t(kVocab), false);
  for (int64_t id : {kPad, kCls, kSep, kMask}) plan.special[size_t(id)] = true;  // [UNK] is a word
  return plan;
}

// One stored row: ids of its real tokens (the rest is padding) and optional static masks.
struct Row {
  std::vector<int32_t> ids;
  std::vector<int32_t> positions, labels;  // a static mask: ids[positions[k]] was labels[k]
};

// [CLS] a… [SEP] b… [SEP] with `len` real tokens, words in [1000, 29000), some [UNK]s.
Row make_row(int64_t len, std::mt19937& gen) {
  Row r;
  std::uniform_int_distribution<int32_t> word(1000, 28999);
  const int64_t sep = std::max<int64_t>(2, len / 2);
  for (int64_t j = 0; j < len; ++j) {
    int32_t id = gen() % 20 == 0 ? int32_t(kUnk) : word(gen);
    if (j == 0) id = kCls;
    if (j == sep || j == len - 1) id = kSep;
    r.ids.push_back(id);
  }
  return r;
}

// A host slot of BERT rows, as the loader's sources fill it.
struct Slot {
  Slot(int64_t batch, int64_t seq_len, int64_t max_predictions, bool narrow = false)
      : layout(SlotLayout::make(ModelKind::bert, batch, seq_len, max_predictions, kVocab, narrow)), bytes(layout.bytes) {}
  HostRows rows() { return HostRows(layout, bytes.data()); }

  void put(int64_t row, const Row& r) {
    const int64_t s = layout.seq_len;
    std::vector<int32_t> ids(size_t(s), 0), pos(r.positions), lab(r.labels);
    std::vector<int8_t> seg(size_t(s), 0), mask(size_t(s), 0);
    for (size_t j = 0; j < r.ids.size(); ++j) ids[j] = r.ids[j], mask[j] = 1;
    for (size_t k = 0; k < r.positions.size(); ++k) ids[size_t(r.positions[k])] = k % 2 ? 7 : int32_t(kMask);
    rows().put_bert(row, ids.data(), seg.data(), mask.data(), pos.data(), lab.data(), int64_t(pos.size()), 1);
  }
  int64_t id(int64_t row, int64_t j) const {
    const size_t at = size_t(row * layout.seq_len + j);
    if (layout.token_dtype == TensorDType::u16) return reinterpret_cast<const uint16_t*>(bytes.data() + layout.input_ids)[at];
    return reinterpret_cast<const int32_t*>(bytes.data() + layout.input_ids)[at];
  }
  int64_t label(int64_t row, int64_t k) const {
    const size_t at = size_t(row * layout.max_predictions + k);
    if (layout.token_dtype == TensorDType::u16) return reinterpret_cast<const uint16_t*>(bytes.data() + layout.masked_lm_ids)[at];
    return reinterpret_cast<const int32_t*>(bytes.data() + layout.masked_lm_ids)[at];
  }
  int64_t position(int64_t row, int64_t k) const {
    return reinterpret_cast<const uint16_t*>(bytes.data() + layout.masked_lm_positions)[size_t(row * layout.max_predictions + k)];
  }
  // The picked positions of a row: masked_lm_positions up to the first 0 (NVIDIA's convention).
  std::vector<int64_t> picked(int64_t row) const {
    std::vector<int64_t> out;
    for (int64_t k = 0; k < layout.max_predictions && position(row, k) != 0; ++k) out.push_back(position(row, k));
    return out;
  }
  // Everything mask_row may change in a row, widened: ids, then positions, then labels.
  std::vector<int64_t> state(int64_t row) const {
    std::vector<int64_t> out;
    for (int64_t j = 0; j < layout.seq_len; ++j) out.push_back(id(row, j));
    for (int64_t k = 0; k < layout.max_predictions; ++k) out.push_back(position(row, k)), out.push_back(label(row, k));
    return out;
  }
  SlotLayout layout;
  std::vector<uint8_t> bytes;
};

// Whether a stored id may be picked under make_plan().
bool candidate(int32_t id) { return id != kPad && id != kCls && id != kSep && id != kMask; }

double six_sigma(double q, double n) { return 6 * std::sqrt(q * (1 - q) / n); }

// Masks `rows` rows of random lengths in [min_len, seq] and checks, for every row, the invariants
// that hold whatever the draws: positions ascending and distinct, 0-padded after the last pick,
// each a real, non-special, non-[CLS] token; its label the original id; unpicked tokens unchanged.
// Returns (candidates, picks, [MASK]ed, kept, randomised) and the random ids drawn.
struct Tally {
  int64_t candidates = 0, picks = 0, masked = 0, kept = 0, randomised = 0, capped_rows = 0;
  std::vector<int64_t> random_ids;
};
Tally mask_and_check(const MaskingPlan& plan, int64_t seq, int64_t slot_predictions, int rows, int64_t min_len,
                     uint32_t data_seed, uint64_t epoch = 0) {
  std::mt19937 gen(data_seed);
  Slot slot(1, seq, slot_predictions);
  Tally t;
  for (int r = 0; r < rows; ++r) {
    const Row row = make_row(min_len + int64_t(gen() % uint32_t(seq - min_len + 1)), gen);
    slot.put(0, row);
    mask_row(plan, slot.rows(), 0, epoch, uint64_t(r));
    int64_t here = 0;
    for (size_t j = 1; j < row.ids.size(); ++j) here += candidate(row.ids[j]);
    t.candidates += here;
    const std::vector<int64_t> picked = slot.picked(0);
    EXPECT_LE(int64_t(picked.size()), plan.max_predictions);
    if (here > plan.max_predictions) t.capped_rows += int64_t(picked.size()) == plan.max_predictions;
    for (size_t k = 0; k < picked.size(); ++k) {
      const int64_t at = picked[k];
      if (k > 0) {
        EXPECT_LT(picked[k - 1], at) << "positions ascending and distinct";
      }
      EXPECT_GT(at, 0);
      if (at >= int64_t(row.ids.size())) {
        ADD_FAILURE() << "padding picked at " << at;
        continue;
      }
      const int32_t original = row.ids[size_t(at)];
      EXPECT_TRUE(candidate(original)) << "special id " << original << " picked at " << at;
      EXPECT_EQ(slot.label(0, int64_t(k)), original) << "label is the original id";
      const int64_t now = slot.id(0, at);
      if (now == kMask) ++t.masked;
      else if (now == original) ++t.kept;
      else ++t.randomised, t.random_ids.push_back(now);
    }
    for (int64_t k = int64_t(picked.size()); k < slot_predictions; ++k) {
      EXPECT_EQ(slot.position(0, k), 0);
      EXPECT_EQ(slot.label(0, k), 0);
    }
    const std::set<int64_t> at(picked.begin(), picked.end());
    for (int64_t j = 0; j < seq; ++j) {
      if (!at.count(j)) {
        EXPECT_EQ(slot.id(0, j), j < int64_t(row.ids.size()) ? row.ids[size_t(j)] : 0) << "unpicked " << j;
      }
    }
    t.picks += int64_t(picked.size());
  }
  return t;
}

TEST(Masking, EachCandidateIsPickedWithProbabilityP) {
  for (double p : {0.15, 0.5}) {
    // No cap (max_predictions = seq_len), so the picks are Binomial(candidates, p).
    const Tally t = mask_and_check(make_plan(p, 128), 128, 128, 300, 8, 7);
    ASSERT_GT(t.candidates, 15000);
    const double share = double(t.picks) / double(t.candidates);
    EXPECT_NEAR(share, p, six_sigma(p, double(t.candidates))) << t.picks << " of " << t.candidates;
  }
}

TEST(Masking, PicksBecomeMaskRandomOrThemselvesAt80_10_10) {
  const Tally t = mask_and_check(make_plan(0.3, 128), 128, 128, 400, 64, 11);
  ASSERT_GT(t.picks, 8000);
  const double n = double(t.picks);
  // A random id equals the original with probability 1/vocab: counted as kept, far inside the bound.
  EXPECT_NEAR(double(t.masked) / n, 0.8, six_sigma(0.8, n));
  EXPECT_NEAR(double(t.kept) / n, 0.1, six_sigma(0.1, n));
  EXPECT_NEAR(double(t.randomised) / n, 0.1, six_sigma(0.1, n));
  // Random ids are uniform over the whole vocabulary (LDDL draws from len(vocab)), not the words seen.
  int64_t low = 0;
  for (int64_t id : t.random_ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, kVocab);
    low += id < 1000;  // below every word of the data: only a vocabulary-wide draw gives these
  }
  const double q = 1000.0 / double(kVocab), m = double(t.random_ids.size());
  EXPECT_NEAR(double(low) / m, q, six_sigma(q, m));
}

TEST(Masking, SpecialsPaddingAndPositionZeroAreNeverPicked) {
  // p = 1 with room for all: exactly the candidates are picked, [UNK] among them.
  Slot slot(1, 32, 32);
  Row row;
  row.ids = {kCls, 2000, int32_t(kUnk), kSep, 2001, kPad, kMask, 2002, kSep};
  slot.put(0, row);
  mask_row(make_plan(1.0, 32), slot.rows(), 0, 0, 0);
  EXPECT_EQ(slot.picked(0), (std::vector<int64_t>{1, 2, 4, 7}));
  // Position 0 is never picked, even when it holds a word: NVIDIA's arrays end at the first 0.
  row.ids = {2000, 2001, 2002};
  slot.put(0, row);
  mask_row(make_plan(1.0, 32), slot.rows(), 0, 0, 0);
  EXPECT_EQ(slot.picked(0), (std::vector<int64_t>{1, 2}));
}

TEST(Masking, PicksOverTheCapAreAUniformSortedSubset) {
  // p = 1: all 62 candidates of [CLS] w×62 [SEP] are picked, then cut to 5.
  constexpr int64_t kSeqLen = 64, kCap = 5, kCandidates = 62;
  constexpr int kRows = 3000;
  Slot slot(1, kSeqLen, 8);  // the slot may hold more than the plan's cap
  std::vector<int64_t> hits(size_t(kSeqLen), 0);
  for (int r = 0; r < kRows; ++r) {
    Row row;
    row.ids.push_back(kCls);
    for (int64_t j = 0; j < kCandidates; ++j) row.ids.push_back(int32_t(3000 + j));
    row.ids.push_back(kSep);
    slot.put(0, row);
    mask_row(make_plan(1.0, kCap), slot.rows(), 0, 0, uint64_t(r));
    const auto picked = slot.picked(0);
    ASSERT_EQ(int64_t(picked.size()), kCap);
    EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
    EXPECT_EQ(std::set<int64_t>(picked.begin(), picked.end()).size(), size_t(kCap));
    for (int64_t at : picked) ++hits[size_t(at)];
    EXPECT_EQ(slot.position(0, kCap), 0) << "nothing past the cap";
  }
  EXPECT_EQ(hits[0], 0);
  EXPECT_EQ(hits[size_t(kSeqLen - 1)], 0) << "[SEP]";
  // Each candidate is in the subset with probability 5/62 (a uniform subset), so no end of the row
  // is favoured, as a "first 5 picked" rule would do.
  const double q = double(kCap) / double(kCandidates);
  for (int64_t j = 1; j <= kCandidates; ++j)
    EXPECT_NEAR(double(hits[size_t(j)]) / kRows, q, six_sigma(q, kRows)) << "position " << j;

  // With p < 1 the cap binds only on rows that pick more: the rest keep every pick.
  const Tally t = mask_and_check(make_plan(0.15, 10), 128, 16, 300, 8, 5);
  EXPECT_GT(t.capped_rows, 20) << "rows of ~120 candidates pick ~18 and are cut to 10";
  EXPECT_LT(t.picks, 300 * 10 + 1);
}

TEST(Masking, TheChoicesAreAFunctionOfSeedEpochAndSampleOnly) {
  std::mt19937 gen(3);
  std::vector<Row> rows;
  for (int i = 0; i < 50; ++i) rows.push_back(make_row(100, gen));
  const MaskingPlan plan = make_plan(0.15, 20, 99);
  auto masked = [&](const MaskingPlan& pl, int i, uint64_t epoch, uint64_t sample, int64_t row_in_slot = 0, bool narrow = false) {
    Slot slot(4, 128, 20, narrow);
    for (int64_t r = 0; r < 4; ++r) slot.put(r, rows[size_t((i + r) % 50)]);
    slot.put(row_in_slot, rows[size_t(i)]);
    mask_row(pl, slot.rows(), row_in_slot, epoch, sample);
    return slot.state(row_in_slot);
  };
  int same_epoch1 = 0, same_sample = 0, same_seed = 0;
  for (int i = 0; i < 50; ++i) {
    const auto a = masked(plan, i, 3, 1000 + uint64_t(i));
    // The same key gives the same mask, in any row of any slot, with 16- or 32-bit ids.
    EXPECT_EQ(masked(plan, i, 3, 1000 + uint64_t(i), 2), a) << i;
    EXPECT_EQ(masked(plan, i, 3, 1000 + uint64_t(i), 1, true), a) << i;
    // Another epoch, sample or seed masks anew: with ~14 picks of ~97 candidates the same picks
    // and replacements come back with probability well below 1e-9.
    same_epoch1 += masked(plan, i, 4, 1000 + uint64_t(i)) == a;
    same_sample += masked(plan, i, 3, 5000 + uint64_t(i)) == a;
    same_seed += masked(make_plan(0.15, 20, 100), i, 3, 1000 + uint64_t(i)) == a;
  }
  EXPECT_EQ(same_epoch1, 0);
  EXPECT_EQ(same_sample, 0);
  EXPECT_EQ(same_seed, 0);
}

TEST(Masking, StaticMasksAreUndoneBeforeMaskingAnew) {
  std::mt19937 gen(17);
  for (int i = 0; i < 40; ++i) {
    const Row clean = make_row(60, gen);
    Row stored = clean;  // as a statically masked shard holds it: [MASK] at 5, a random id at 9 …
    for (int32_t at : {5, 9, 20}) {
      stored.positions.push_back(at);
      stored.labels.push_back(clean.ids[size_t(at)]);
    }
    Slot a(1, 64, 12), b(1, 64, 12);
    a.put(0, clean);
    b.put(0, stored);
    ASSERT_NE(a.state(0), b.state(0));
    mask_row(make_plan(0.15, 12), a.rows(), 0, 1, uint64_t(i));
    mask_row(make_plan(0.15, 12), b.rows(), 0, 1, uint64_t(i));
    EXPECT_EQ(a.state(0), b.state(0)) << "row " << i << ": the stored mask leaks through";
    // A probability so small nothing is picked leaves exactly the clean row, with no predictions.
    b.put(0, stored);
    mask_row(make_plan(1e-12, 12), b.rows(), 0, 1, uint64_t(i));
    for (int64_t j = 0; j < 64; ++j) EXPECT_EQ(b.id(0, j), j < 60 ? clean.ids[size_t(j)] : 0) << j;
    EXPECT_TRUE(b.picked(0).empty());
    for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(b.label(0, k), 0);
  }
}

TEST(Masking, APlanWithMorePredictionsThanTheSlotIsRefused) {
  // The loader widens the slot to the plan's max_predictions; a plan larger than its slot would
  // write past the row's masked_lm arrays.
  Slot slot(2, 32, 4);
  std::mt19937 gen(1);
  slot.put(0, make_row(32, gen));
  slot.put(1, make_row(32, gen));
  const auto row1 = slot.state(1);
  EXPECT_THROW(mask_row(make_plan(1.0, 5), slot.rows(), 0, 0, 0), Error);
  EXPECT_EQ(slot.state(1), row1) << "the next row is untouched";
  EXPECT_NO_THROW(mask_row(make_plan(1.0, 4), slot.rows(), 0, 0, 0));
  EXPECT_EQ(slot.picked(0).size(), 4u);
}

// --- what the Loader makes of a bad masking configuration ---------------------------------------

class MaskingConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    Manifest m;
    m.format = kFormatBertHdf5;
    m.seq_len = 16;
    m.max_predictions = 3;
    m.tokenizer.kind = "wordpiece";
    m.tokenizer.vocab_size = kVocab;
    m.tokenizer.vocab_hash = "0123456789abcdef";
    m.tokenizer.special_ids = {{"[PAD]", kPad}, {"[UNK]", kUnk}, {"[CLS]", kCls}, {"[SEP]", kSep}, {"[MASK]", kMask}};
    BertShardWriter w(path_join(dir.path(), "shard-0.hdf5"), 16, 3);
    std::mt19937 gen(5);
    for (int i = 0; i < 20; ++i) {
      const Row row = make_row(12, gen);
      BertRecord r;
      r.input_ids = row.ids;
      r.input_mask.assign(row.ids.size(), 1);
      r.segment_ids.assign(row.ids.size(), 0);
      w.append(r);
    }
    w.commit();
    m.shards.push_back(Manifest::describe(dir.path(), "shard-0.hdf5", 20));
    manifest = m;
    m.write(path_join(dir.path(), kManifestName));
  }
  LoaderConfig config() const {
    LoaderConfig c;
    c.sources = {dir.path()};
    c.batch_size = 4;
    c.workers = 1;
    c.masking.enabled = true;
    return c;
  }
  void expect_refused(const LoaderConfig& c, const std::string& needle) {
    try {
      Loader loader(c);
      ADD_FAILURE() << "no error; wanted one saying " << needle;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  TempDir dir;
  Manifest manifest;
};

TEST_F(MaskingConfig, AGoodOneMasksFromTheManifest) {
  Loader loader(config());
  EXPECT_EQ(loader.max_predictions(), 3);
  int64_t masks = 0;
  while (auto b = loader.next())
    for (int64_t i = 0; i < b->input_ids.numel(); ++i) masks += b->input_ids.as<int32_t>()[i] == kMask;
  EXPECT_GT(masks, 0);
}

TEST_F(MaskingConfig, BadOnesAreRefusedWithTheReason) {
  for (double p : {0.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    LoaderConfig c = config();
    c.masking.probability = p;
    expect_refused(c, "masking probability must be in (0, 1]");
  }
  LoaderConfig c = config();
  c.masking.max_predictions = -1;
  expect_refused(c, "max_predictions must not be negative");
  c = config();
  c.masking.max_predictions = 17;  // more predictions than tokens
  expect_refused(c, "must be in [0, seq_len]");
  c = config();
  c.kind = ModelKind::gpt;
  c.seq_len = 8;
  expect_refused(c, "dynamic masking is for BERT loaders");
  c = config();
  c.masking.mask_id = kVocab;
  expect_refused(c, "needs mask_id");

  Manifest m = manifest;
  m.tokenizer.special_ids.erase("[MASK]");
  m.write(path_join(dir.path(), kManifestName));
  expect_refused(config(), "needs mask_id");
  c = config();
  c.masking.mask_id = kMask;  // given: enough
  EXPECT_NO_THROW(Loader{c});

  m.tokenizer.special_ids.clear();
  m.write(path_join(dir.path(), kManifestName));
  c = config();
  c.masking.mask_id = kMask;
  expect_refused(c, "needs the special ids");
  c.masking.special_ids = {kPad, kCls, kSep, kMask};
  EXPECT_NO_THROW(Loader{c});

  // Without a manifest nothing says the vocabulary size.
  std::filesystem::remove(path_join(dir.path(), kManifestName));
  c = config();
  c.sources = {path_join(dir.path(), "shard-0.hdf5")};
  c.masking.mask_id = kMask;
  c.masking.special_ids = {kPad, kCls, kSep, kMask};
  expect_refused(c, "needs vocab_size");
  c.masking.vocab_size = kVocab;
  EXPECT_NO_THROW(Loader{c});
}

}  // namespace
}  // namespace pretrain::masking_test
