// BERT instances against NVIDIA's create_pretraining_data.py: with PythonRandom and the same
// tokenized input, our instances equal the golden HDF5 files in ../shared/data/golden/ record for
// record. The input's token ids come from the golden WordPiece dumps (same tokenizer, same
// lines), so this checks the instance algorithm alone; the end-to-end test through our own
// tokenizer and the make-pretraining-shards command is tests/compat/test_make_shards_golden.py.
#include "datagen/shards/bert_instances.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <ostream>
#include <sstream>

#include "common/counter_rng.h"
#include "common/error.h"
#include "datagen/shards/python_random.h"
#include "bert_record_expect.h"
#include "formats/sentence_text.h"
#include "test_util.h"

namespace pretrain::bert_instances_test {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// The text's lines as create_pretraining_data.py keeps them (stripped; empty when blank).
std::vector<std::string> read_sentences(const std::string& path) {
  SentenceTextReader reader(path);
  std::vector<std::string> sentences;
  for (std::string_view s; reader.next_sentence(s);) sentences.emplace_back(s);
  return sentences;
}

std::vector<TokenId32> parse_ids(const std::string& line) {
  std::istringstream s(line);
  std::vector<TokenId32> ids;
  for (TokenId32 id; s >> id;) ids.push_back(id);
  return ids;
}

// Documents of the Python script's reader: a blank line of the text starts a new document; a line's
// tokens (from the golden ids dump) make a sentence when not empty. The bert-sample dump has a line
// for every text line; the botchan dump was made from botchan.txt, which lacks the blank lines
// botchan-docs.txt adds, so there only non-blank lines take an ids line.
InMemoryCorpus corpus_from(const std::vector<std::string>& sentences, const std::vector<std::string>& id_lines,
                           bool ids_for_blank_lines) {
  InMemoryCorpus c;
  c.documents.emplace_back();
  size_t next_ids = 0;
  for (const auto& sentence : sentences) {
    if (sentence.empty()) {
      c.documents.emplace_back();
      if (ids_for_blank_lines) ++next_ids;
      continue;
    }
    auto ids = parse_ids(id_lines.at(next_ids++));
    if (!ids.empty()) c.documents.back().push_back(std::move(ids));
  }
  return c;
}

BertMaskVocab uncased_vocab(const std::string& path) { return make_bert_mask_vocab(read_lines(path), path); }

void expect_equal_to_golden(const std::vector<BertInstance>& instances, const std::string& golden) {
  BertShardReader reader(golden);
  ASSERT_EQ(reader.size(), static_cast<int64_t>(instances.size()));
  for (size_t i = 0; i < instances.size(); ++i) {
    BertRecord want = reader.read(static_cast<int64_t>(i));
    BertRecord got = instances[i].to_record(128, 20);
    testing::expect_same_record(got, want, static_cast<int64_t>(i));
    if (::testing::Test::HasFailure()) return;  // the first record that differs says enough
  }
}

BertInstanceOptions golden_options() { return {}; }  // seq 128, 20 predictions, 0.15, 0.1

// Google's script run by NVIDIA's tooling on two real texts (dupe 2, seed 12345): every instance
// equals the golden file's record.
struct GoldenCase {
  const char* name;
  const char* text;     // input text (shared data)
  const char* ids;      // its WordPiece ids, one line per text line
  const char* hdf5;     // NVIDIA's shard
  bool presplit;        // the text is Google's sentence-per-line format
  size_t documents, instances;
};
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.text; }

const GoldenCase kGoldenCases[] = {
    {"BertSampleText", "golden/inputs/bert-sample_text.txt", "golden/wordpiece-uncased-bert-sample_text.ids.txt",
     "golden/nvidia-bert-sample-s128.hdf5", true, 3, 23},
    {"Botchan", "golden/inputs/botchan-docs.txt", "golden/wordpiece-uncased-botchan.ids.txt",
     "golden/nvidia-botchan-s128.hdf5", false, 13, 1330},
};

class BertInstancesGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(BertInstancesGolden, EqualNvidiaGolden) {
  const GoldenCase& c = GetParam();
  PRETRAIN_REQUIRE_SHARED(text, c.text);
  PRETRAIN_REQUIRE_SHARED(ids, c.ids);
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  PRETRAIN_REQUIRE_SHARED(golden, c.hdf5);
  InMemoryCorpus corpus = corpus_from(read_sentences(text), read_lines(ids), c.presplit);
  EXPECT_EQ(corpus.documents.size(), c.documents);
  auto instances = create_training_instances_python(corpus, golden_options(), uncased_vocab(vocab), 2, 12345);
  EXPECT_EQ(instances.size(), c.instances);
  expect_equal_to_golden(instances, golden);
}

INSTANTIATE_TEST_SUITE_P(Texts, BertInstancesGolden, ::testing::ValuesIn(kGoldenCases),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) { return std::string(info.param.name); });

// A small corpus whose every property can be checked by hand.
InMemoryCorpus toy_corpus() {
  InMemoryCorpus c;
  for (int d = 0; d < 20; ++d) {
    c.documents.emplace_back();
    for (int s = 0; s < 1 + d % 7; ++s) {
      std::vector<TokenId32> sentence;
      for (int t = 0; t < 3 + (d * 7 + s * 13) % 40; ++t) sentence.push_back(10 + (d * 31 + s * 17 + t) % 90);
      c.documents.back().push_back(sentence);
    }
  }
  return c;
}

BertMaskVocab toy_vocab() {
  std::vector<std::string> entries{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 5; i < 100; ++i) entries.push_back(i % 3 == 0 ? "##w" + std::to_string(i) : "w" + std::to_string(i));
  return make_bert_mask_vocab(entries, "toy");
}

TEST(BertInstances, InstancesAreWellFormed) {
  InMemoryCorpus corpus = toy_corpus();
  BertMaskVocab vocab = toy_vocab();
  for (bool wwm : {false, true}) {
    BertInstanceOptions o;
    o.seq_len = 32;
    o.max_predictions = 5;
    o.whole_word_mask = wwm;
    std::vector<BertInstance> out;
    for (size_t d = 0; d < corpus.num_documents(); ++d) {
      CounterRng rng(7, d, 0);
      create_instances_from_document(corpus, d, o, vocab, rng, out);
    }
    ASSERT_FALSE(out.empty());
    for (const auto& inst : out) {
      ASSERT_LE(inst.tokens.size(), 32u);
      ASSERT_EQ(inst.tokens.size(), inst.segment_ids.size());
      EXPECT_EQ(inst.tokens.front(), vocab.cls);
      EXPECT_EQ(inst.tokens.back(), vocab.sep);
      ASSERT_FALSE(inst.masked_lm_positions.empty());
      ASSERT_LE(inst.masked_lm_positions.size(), 5u);
      EXPECT_TRUE(std::is_sorted(inst.masked_lm_positions.begin(), inst.masked_lm_positions.end()));
      for (size_t k = 0; k < inst.masked_lm_positions.size(); ++k) {
        int32_t p = inst.masked_lm_positions[k];
        ASSERT_GT(p, 0);
        ASSERT_LT(p, static_cast<int32_t>(inst.tokens.size()) - 1);
        EXPECT_NE(inst.masked_lm_labels[k], vocab.cls);  // [CLS]/[SEP] are never masked
        EXPECT_NE(inst.masked_lm_labels[k], vocab.sep);
      }
    }
  }
}

TEST(BertInstances, CounterRngGivesTheSameInstancesInAnyDocumentOrder) {
  InMemoryCorpus corpus = toy_corpus();
  BertMaskVocab vocab = toy_vocab();
  auto make = [&](size_t d) {
    std::vector<BertInstance> out;
    CounterRng rng(99, d, 3);
    create_instances_from_document(corpus, d, BertInstanceOptions{}, vocab, rng, out);
    return out;
  };
  auto forward = make(4), again = make(4);
  make(11);
  auto after = make(4);
  ASSERT_EQ(forward.size(), after.size());
  for (size_t i = 0; i < forward.size(); ++i) EXPECT_EQ(forward[i].tokens, after[i].tokens);
  EXPECT_EQ(forward.size(), again.size());
}

TEST(BertInstances, SentencesLongerThanTheSequenceAreTruncatedAndOneSentenceDocumentsWork) {
  InMemoryCorpus corpus;
  corpus.documents.push_back({std::vector<TokenId32>(500, 7)});                    // one long sentence
  corpus.documents.push_back({std::vector<TokenId32>(3, 8)});                      // one short sentence
  corpus.documents.push_back({std::vector<TokenId32>(300, 9), std::vector<TokenId32>(2, 10)});
  BertMaskVocab vocab = toy_vocab();
  BertInstanceOptions o;
  o.seq_len = 32;
  for (uint64_t pass = 0; pass < 20; ++pass) {
    std::vector<BertInstance> out;
    for (size_t d = 0; d < corpus.num_documents(); ++d) {
      CounterRng rng(1, d, pass);
      create_instances_from_document(corpus, d, o, vocab, rng, out);
    }
    ASSERT_GE(out.size(), 3u);
    for (const auto& inst : out) {
      ASSERT_LE(inst.tokens.size(), 32u);
      // A one-sentence chunk always takes a random B, and truncation keeps both sides non-empty.
      size_t a_len = std::count(inst.segment_ids.begin(), inst.segment_ids.end(), 0);
      EXPECT_GE(a_len, 3u);
      EXPECT_GE(inst.tokens.size() - a_len, 2u);
    }
  }
}

TEST(BertInstances, VocabularyWithoutMaskIsAnError) {
  std::vector<std::string> entries{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"};
  try {
    make_bert_mask_vocab(entries, "my-vocab.txt");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("my-vocab.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[MASK]"), std::string::npos) << e.what();
  }
}

TEST(BertInstances, RepeatedVocabEntryKeepsItsPlaceAndTakesTheLaterId) {
  BertMaskVocab v = make_bert_mask_vocab({"[CLS]", "[SEP]", "[MASK]", "a", "b", "a"}, "v");
  EXPECT_EQ(v.vocab_words, (std::vector<TokenId32>{0, 1, 2, 5, 4}));
}

}  // namespace
}  // namespace pretrain::bert_instances_test
