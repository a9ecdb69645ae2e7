// The GPT sample source: every sample of an epoch against a plain reading of the files (the
// documents laid end to end in the epoch's document order and cut every seq_len tokens), llm.c
// windows, blends, concurrent reads, and the errors.
#include <gtest/gtest.h>

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include "common/error.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "loader/megatron_index.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::gpt_source_test {
namespace {

using testing::TempDir;

// A host slot of `batch` GPT rows of int32 tokens.
struct Slot {
  Slot(int64_t batch, int64_t seq_len, int64_t vocab = 0)
      : layout(SlotLayout::make(ModelKind::gpt, batch, seq_len, 0, vocab, false)), bytes(layout.bytes) {}
  HostRows rows() { return HostRows(layout, bytes.data()); }
  std::vector<int32_t> row(int64_t r) const {
    const int32_t* t = reinterpret_cast<const int32_t*>(bytes.data() + layout.tokens) + r * layout.token_row();
    return std::vector<int32_t>(t, t + layout.token_row());
  }
  SlotLayout layout;
  std::vector<uint8_t> bytes;
};

std::vector<int32_t> read_sample(const SampleSource& source, uint64_t epoch, uint64_t position) {
  Slot slot(1, source.seq_len(), source.vocab_size());
  source.read(epoch, position, slot.rows(), 0);
  return slot.row(0);
}

// Sequences of random lengths (some empty) with distinct token values, in documents of 1–3
// sequences; returns every sequence's tokens in stored order.
std::vector<std::vector<int32_t>> write_megatron(const std::string& prefix, int sequences, uint32_t seed,
                                                 int32_t first_token, MegatronDType dtype = MegatronDType::i32) {
  std::mt19937 gen(seed);
  MegatronWriter writer(prefix, dtype);
  std::vector<std::vector<int32_t>> all;
  int32_t token = first_token;
  for (int s = 0; s < sequences; ++s) {
    std::vector<int32_t> seq(gen() % 5 == 0 ? 0 : 1 + gen() % 40);
    for (auto& t : seq) t = token++ % 60000;
    writer.add_sequence(std::span<const int32_t>(seq));
    if (gen() % 2 || s + 1 == sequences) writer.end_document();
    all.push_back(std::move(seq));
  }
  writer.finalize();
  return all;
}

// A set of files of one format, named by its first (Megatron sets list prefixes).
ShardSet shard_set(const char* format, std::vector<std::string> files) {
  ShardSet set;
  set.origin = files.front();
  set.format = format;
  set.files = std::move(files);
  return set;
}

// Two equally weighted Megatron sets of one prefix each, seq_len 8.
GptSourceOptions two_megatron_sets(const std::string& a, const std::string& b) {
  GptSourceOptions o;
  o.sets = {shard_set(kFormatMegatron, {a}), shard_set(kFormatMegatron, {b})};
  o.weights = {1, 1};
  o.seq_len = 8;
  return o;
}

// What the samples of `epoch` must be: the sequences in the epoch's document order, end to end;
// sample `position` is seq_len + 1 of those tokens from shuffle_index[position] · seq_len on.
std::vector<std::vector<int32_t>> reference_epoch(const std::vector<std::vector<int32_t>>& sequences,
                                                  int64_t seq_len, uint64_t seed, uint64_t epoch, bool shuffle) {
  std::vector<int32_t> sizes;
  for (const auto& s : sequences) sizes.push_back(int32_t(s.size()));
  const GptEpochIndex index = build_gpt_epoch_index(sizes, seq_len, true, uint32_t(seed + epoch), shuffle);
  std::vector<int32_t> flat;
  for (int32_t d : index.document_index) flat.insert(flat.end(), sequences[size_t(d)].begin(), sequences[size_t(d)].end());
  std::vector<std::vector<int32_t>> samples;
  for (uint32_t s : index.shuffle_index) {
    const auto start = flat.begin() + long(size_t(s) * size_t(seq_len));
    samples.emplace_back(start, start + seq_len + 1);
  }
  return samples;
}

TEST(GptSource, MegatronSamplesAreTheShuffledDocumentsCut) {
  TempDir dir;
  auto a = write_megatron(dir.file("a"), 300, 1, 0);
  auto b = write_megatron(dir.file("b"), 200, 2, 20000, MegatronDType::u16);
  std::vector<std::vector<int32_t>> all = a;
  all.insert(all.end(), b.begin(), b.end());  // one set of two prefixes = one dataset
  int64_t tokens = 0;
  for (const auto& s : all) tokens += int64_t(s.size());
  for (bool shuffle : {true, false}) {
    for (int64_t seq_len : {1, 7, 64}) {
      GptSourceOptions o;
      o.sets = {shard_set(kFormatMegatron, {dir.file("a"), dir.file("b")})};
      o.seq_len = seq_len;
      o.seed = 4294967295u;  // epoch 1 wraps to Megatron seed 0
      o.shuffle = shuffle;
      auto source = make_gpt_source(o);
      ASSERT_EQ(source->samples_per_epoch(), uint64_t((tokens - 1) / seq_len));
      EXPECT_EQ(source->seq_len(), seq_len);
      EXPECT_EQ(source->vocab_size(), 0);
      for (uint64_t epoch : {0, 1}) {
        std::set<uint64_t> ids;
        const auto expected = reference_epoch(all, seq_len, o.seed, epoch, shuffle);
        ASSERT_EQ(expected.size(), source->samples_per_epoch());
        for (uint64_t p = 0; p < source->samples_per_epoch(); ++p) {
          ASSERT_EQ(read_sample(*source, epoch, p), expected[p])
              << "shuffle " << shuffle << " seq_len " << seq_len << " epoch " << epoch << " position " << p;
          ids.insert(source->sample_id(epoch, p));
        }
        EXPECT_EQ(ids.size(), source->samples_per_epoch());
      }
    }
  }
}

TEST(GptSource, EpochsHaveTheirOwnOrder) {
  TempDir dir;
  write_megatron(dir.file("a"), 400, 3, 0);
  GptSourceOptions o;
  o.sets = {shard_set(kFormatMegatron, {dir.file("a")})};
  o.seq_len = 16;
  o.seed = 99;
  auto source = make_gpt_source(o);
  std::vector<uint64_t> e0, e1;
  for (uint64_t p = 0; p < source->samples_per_epoch(); ++p) {
    e0.push_back(source->sample_id(0, p));
    e1.push_back(source->sample_id(1, p));
  }
  EXPECT_NE(e0, e1);
  // The same seed gives the same epoch in another source object.
  auto again = make_gpt_source(o);
  for (uint64_t p = 0; p < 20; ++p) EXPECT_EQ(read_sample(*source, 1, p), read_sample(*again, 1, p));
}

std::vector<int32_t> write_llmc(const std::string& path, size_t tokens, int32_t first, LlmcFormat format) {
  LlmcWriter writer(path, format);
  std::vector<int32_t> t(tokens);
  for (size_t i = 0; i < tokens; ++i) t[i] = int32_t((size_t(first) + i) % 65000);
  writer.add(std::span<const int32_t>(t));
  writer.commit();
  return t;
}

TEST(GptSource, LlmcWindowsDoNotCrossFiles) {
  TempDir dir;
  const auto f0 = write_llmc(dir.file("f0.bin"), 53, 0, LlmcFormat::gpt2);     // (53-1)/5 = 10 windows
  const auto f1 = write_llmc(dir.file("f1.bin"), 5, 100, LlmcFormat::gpt2);    // none
  const auto f2 = write_llmc(dir.file("f2.bin"), 31, 1000, LlmcFormat::llama3);  // 6 windows
  std::vector<std::vector<int32_t>> windows;
  for (const auto* f : {&f0, &f1, &f2})
    for (size_t s = 0; s + 6 <= f->size(); s += 5) windows.emplace_back(f->begin() + long(s), f->begin() + long(s) + 6);
  ASSERT_EQ(windows.size(), 16u);
  GptSourceOptions o;
  o.sets = {shard_set(kFormatLlmc, {dir.file("f0.bin"), dir.file("f1.bin"), dir.file("f2.bin")})};
  o.seq_len = 5;
  o.shuffle = false;
  auto plain = make_gpt_source(o);
  ASSERT_EQ(plain->samples_per_epoch(), 16u);
  for (uint64_t p = 0; p < 16; ++p) EXPECT_EQ(read_sample(*plain, 3, p), windows[p]) << p;
  o.shuffle = true;
  o.seed = 5;
  auto shuffled = make_gpt_source(o);
  std::vector<uint64_t> order0, order1;
  for (uint64_t p = 0; p < 16; ++p) {
    order0.push_back(shuffled->sample_id(0, p));
    order1.push_back(shuffled->sample_id(1, p));
    EXPECT_EQ(read_sample(*shuffled, 0, p), windows[order0.back()]);
  }
  EXPECT_NE(order0, order1);
  std::sort(order0.begin(), order0.end());
  for (uint64_t p = 0; p < 16; ++p) EXPECT_EQ(order0[p], p);
}

TEST(GptSource, BlendTakesComponentsInMegatronsInterleaving) {
  TempDir dir;
  write_megatron(dir.file("a"), 100, 4, 0);
  write_megatron(dir.file("b"), 30, 5, 30000);
  write_llmc(dir.file("c.bin"), 200, 50000, LlmcFormat::gpt2);
  const std::vector<ShardSet> sets{shard_set(kFormatMegatron, {dir.file("a")}), shard_set(kFormatMegatron, {dir.file("b")}),
                                   shard_set(kFormatLlmc, {dir.file("c.bin")})};
  GptSourceOptions o;
  o.sets = sets;
  o.weights = {0.2, 0.5, 0.3};  // b is small: it wraps into further epochs within one blend epoch
  o.seq_len = 8;
  o.seed = 17;
  auto blend = make_gpt_source(o);
  std::vector<std::unique_ptr<SampleSource>> parts;
  uint64_t total = 0;
  for (const ShardSet& set : sets) {
    GptSourceOptions one = o;
    one.sets = {set};
    one.weights = {};
    parts.push_back(make_gpt_source(one));
    total += parts.back()->samples_per_epoch();
  }
  ASSERT_EQ(blend->samples_per_epoch(), total);
  const auto w = megatron_normalize(megatron_normalize(o.weights));
  const BlendIndex index = build_blending_indices(w, int64_t(total));
  ASSERT_GT(index.counts[1], int64_t(parts[1]->samples_per_epoch()));
  for (uint64_t epoch : {0, 1}) {
    for (uint64_t p = 0; p < total; ++p) {
      const size_t d = size_t(index.dataset[p]);
      const uint64_t g = epoch * uint64_t(index.counts[d]) + uint64_t(index.sample[p]);
      const uint64_t n = parts[d]->samples_per_epoch();
      ASSERT_EQ(read_sample(*blend, epoch, p), read_sample(*parts[d], g / n, g % n)) << epoch << " " << p;
      EXPECT_EQ(blend->sample_id(epoch, p), p);
    }
  }
  // samples_per_epoch sets the blend's length, also for one set.
  o.samples_per_epoch = 1000;
  EXPECT_EQ(make_gpt_source(o)->samples_per_epoch(), 1000u);
  GptSourceOptions single = o;
  single.sets = {sets[1]};
  single.weights = {};
  auto wrapped = make_gpt_source(single);
  ASSERT_EQ(wrapped->samples_per_epoch(), 1000u);
  const uint64_t n = parts[1]->samples_per_epoch();
  for (uint64_t p = 0; p < 1000; p += 37)
    EXPECT_EQ(read_sample(*wrapped, 2, p), read_sample(*parts[1], (2000 + p) / n, (2000 + p) % n));
}

TEST(GptSource, ConcurrentReadsEqualSerialReads) {
  TempDir dir;
  write_megatron(dir.file("a"), 2000, 6, 0);
  write_llmc(dir.file("c.bin"), 5000, 7, LlmcFormat::gpt2);
  GptSourceOptions o;
  o.sets = {shard_set(kFormatMegatron, {dir.file("a")}), shard_set(kFormatLlmc, {dir.file("c.bin")})};
  o.weights = {2, 1};
  o.seq_len = 12;
  o.seed = 3;
  auto source = make_gpt_source(o);
  const int64_t n = int64_t(source->samples_per_epoch());
  const uint64_t epochs = 3;  // readers of several epochs at once share the epoch cache
  Slot serial(n * int64_t(epochs), o.seq_len), parallel(n * int64_t(epochs), o.seq_len);
  for (uint64_t e = 0; e < epochs; ++e)
    for (int64_t p = 0; p < n; ++p) source->read(e, uint64_t(p), serial.rows(), int64_t(e) * n + p);
  auto fresh = make_gpt_source(o);
  HostRows rows = parallel.rows();
  tbb::parallel_for(int64_t(0), n * int64_t(epochs), [&](int64_t i) {
    fresh->read(uint64_t(i % int64_t(epochs)), uint64_t(i / int64_t(epochs)), rows,
                (i % int64_t(epochs)) * n + i / int64_t(epochs));
  });
  EXPECT_EQ(serial.bytes, parallel.bytes);
}

TEST(GptSource, FingerprintSaysWhatDefinesTheSamples) {
  TempDir dir;
  write_megatron(dir.file("a"), 50, 8, 0);
  write_megatron(dir.file("b"), 50, 9, 0);
  GptSourceOptions o = two_megatron_sets(dir.file("a"), dir.file("b"));
  const uint64_t base = make_gpt_source(o)->fingerprint();
  auto changed = [&](auto edit) {
    GptSourceOptions c = o;
    edit(c);
    return make_gpt_source(c)->fingerprint() != base;
  };
  EXPECT_FALSE(changed([](GptSourceOptions& c) { c.seed = 77; }));
  EXPECT_FALSE(changed([](GptSourceOptions& c) { c.weights = {3, 3}; }));  // the same after normalising
  EXPECT_TRUE(changed([](GptSourceOptions& c) { c.weights = {1, 2}; }));
  EXPECT_TRUE(changed([](GptSourceOptions& c) { c.seq_len = 9; }));
  EXPECT_TRUE(changed([](GptSourceOptions& c) { c.shuffle = false; }));
  EXPECT_TRUE(changed([](GptSourceOptions& c) { c.samples_per_epoch = 10; }));
  EXPECT_TRUE(changed([](GptSourceOptions& c) { std::swap(c.sets[0], c.sets[1]); }));
}

TEST(GptSource, ManifestGivesVocabularyAndIdsAreChecked) {
  TempDir dir;
  write_megatron(dir.file("a"), 50, 10, 0);  // ids up to several hundred
  GptSourceOptions o;
  o.sets = {shard_set(kFormatMegatron, {dir.file("a")})};
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer.kind = "bpe";
  m.tokenizer.vocab_size = 100;
  m.tokenizer.special_ids = {{"eod", 99}};
  o.sets[0].manifest = m;
  o.seq_len = 8;
  o.shuffle = false;
  auto source = make_gpt_source(o);
  EXPECT_EQ(source->vocab_size(), 100);
  EXPECT_EQ(source->special_ids(), (std::map<std::string, int64_t>{{"eod", 99}}));
  // A sample with an id >= 100 fails naming the .bin and the sequence (its record).
  bool failed = false;
  for (uint64_t p = 0; p < source->samples_per_epoch() && !failed; ++p) {
    try {
      read_sample(*source, 0, p);
    } catch (const Error& e) {
      failed = true;
      EXPECT_NE(std::string(e.what()).find(dir.file("a.bin")), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("record"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(failed);
}

TEST(GptSource, CorruptIndexNamesTheFile) {
  TempDir dir;
  write_megatron(dir.file("a"), 50, 11, 0);
  {
    std::fstream f(dir.file("a.idx"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(9 + 8 + 1);  // the sequence count
    const uint64_t huge = 1ULL << 40;
    f.write(reinterpret_cast<const char*>(&huge), sizeof huge);
  }
  GptSourceOptions o;
  o.sets = {shard_set(kFormatMegatron, {dir.file("a")})};
  o.seq_len = 8;
  try {
    make_gpt_source(o);
    FAIL() << "a corrupt .idx was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.idx"), std::string::npos) << e.what();
  }
}

TEST(GptSource, BadOptionsAreUsageErrors) {
  TempDir dir;
  write_megatron(dir.file("a"), 50, 12, 0);
  write_megatron(dir.file("tiny"), 1, 13, 0);
  GptSourceOptions o = two_megatron_sets(dir.file("a"), dir.file("a"));
  EXPECT_NO_THROW(make_gpt_source(o));
  auto refused = [&](auto edit) {
    GptSourceOptions c = o;
    edit(c);
    try {
      make_gpt_source(c);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused([](GptSourceOptions& c) { c.add_extra_token = false; }).find("seq_len + 1"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.weights = {1}; }).find("weights"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.weights = {1, -1}; }).find("weight"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.weights = {0, 0}; }).find("weight"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.weights = {1, std::nan("")}; }).find("weight"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.weights = {1, INFINITY}; }).find("weight"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.seq_len = 0; }).find("seq_len"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.samples_per_epoch = -1; }).find("samples_per_epoch"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.sets.clear(); }).find("no sources"), std::string::npos);
  EXPECT_NE(refused([](GptSourceOptions& c) { c.sets[0].format = kFormatBertHdf5; }).find("not GPT data"), std::string::npos);
  EXPECT_NE(refused([&](GptSourceOptions& c) { c.sets[1] = shard_set(kFormatMegatron, {dir.file("tiny")}); c.seq_len = 100; })
                .find("fewer than one sample"), std::string::npos);
  // One set: weights are not looked at.
  GptSourceOptions one = o;
  one.sets.resize(1);
  one.weights = {-5, 2, 3};
  EXPECT_NO_THROW(make_gpt_source(one));
}

// Through the Loader: batches hold the source's samples in order, targets shifted by one.
TEST(GptSource, LoaderBatchesAreTheSourcesSamples) {
  TempDir dir;
  auto sequences = write_megatron(dir.file("a"), 300, 14, 0);
  Loader loader(LoaderConfig{.sources = {dir.file("a")}, .kind = ModelKind::gpt, .batch_size = 5, .seq_len = 16,
                             .seed = 21, .drop_last = false, .epochs = 2, .workers = 2});
  const auto expected0 = reference_epoch(sequences, 16, 21, 0, true);
  const auto expected1 = reference_epoch(sequences, 16, 21, 1, true);
  ASSERT_EQ(loader.samples_per_epoch(), expected0.size());
  uint64_t seen = 0;
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    uint64_t position = 0;
    while (auto batch = loader.next()) {
      ASSERT_EQ(batch->epoch, epoch);
      const int32_t* tokens = batch->tokens.as<int32_t>();
      const int32_t* targets = batch->targets.as<int32_t>();
      for (int64_t r = 0; r < batch->size; ++r, ++position) {
        const auto& want = (epoch == 0 ? expected0 : expected1)[position];
        for (int64_t i = 0; i < 16; ++i) {
          ASSERT_EQ(tokens[r * 16 + i], want[size_t(i)]) << epoch << " " << position << " " << i;
          ASSERT_EQ(targets[r * 16 + i], want[size_t(i) + 1]) << epoch << " " << position << " " << i;
        }
      }
    }
    EXPECT_EQ(position, expected0.size());
    seen += position;
  }
  EXPECT_EQ(seen, 2 * expected0.size());
  EXPECT_FALSE(loader.next());
}

// Shared golden data (Megatron's preprocess_data.py output): epoch 0 against the plain reading.
TEST(GptSource, GoldenMegatronFiles) {
  PRETRAIN_REQUIRE_SHARED(bin, "golden/megatron-botchan-int32.bin");
  const std::string prefix = megatron_prefix(bin);
  MegatronReader reader(prefix);
  std::vector<std::vector<int32_t>> sequences;
  for (size_t i = 0; i < reader.num_sequences(); ++i) sequences.push_back(reader.sequence(i).to_int32());
  GptSourceOptions o;
  o.sets = {shard_set(kFormatMegatron, {prefix})};
  o.seq_len = 128;
  o.seed = 1234;
  auto source = make_gpt_source(o);
  ASSERT_GT(source->samples_per_epoch(), 10u);
  const auto expected = reference_epoch(sequences, 128, 1234, 0, true);
  for (uint64_t p = 0; p < source->samples_per_epoch(); ++p) ASSERT_EQ(read_sample(*source, 0, p), expected[p]) << p;
}

}  // namespace
}  // namespace pretrain::gpt_source_test
