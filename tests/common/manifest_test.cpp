// common/manifest.h: manifest.json round trips, verification of the shards it lists, malformed
// input named, and the tokenizer record (files, options, casing, special tokens).
#include "common/manifest.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "test_util.h"

namespace pretrain::manifest_test {
namespace {

using testing::TempDir;

TEST(Manifest, RoundTripsAndVerifies) {
  TempDir dir;
  write_file_atomic(dir.file("a.bin"), "0123456789");
  write_file_atomic(dir.file("a.idx"), "idx");
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer.kind = "wordpiece";
  m.tokenizer.vocab_hash = "abcd";
  m.tokenizer.vocab_size = 30522;
  m.tokenizer.special_ids = {{"[CLS]", 101}, {"[SEP]", 102}};
  m.seq_len = 128;
  m.tool = "test";
  m.args = {"--x", "1"};
  m.seed = 12345;
  ShardEntry e = Manifest::describe(dir.path(), "a.bin", 2);
  e.companions["a.idx"] = hex64(xxh3_file(dir.file("a.idx")));
  m.shards.push_back(e);
  m.write(dir.file(kManifestName));

  Manifest r = Manifest::read(dir.file(kManifestName));
  EXPECT_EQ(r.to_json(), m.to_json());
  EXPECT_EQ(r.tokenizer.special_ids.at("[SEP]"), 102);
  EXPECT_EQ(*r.seed, 12345u);
  EXPECT_TRUE(verify_manifest(r, dir.path(), [](const std::string&) { return uint64_t{2}; }).empty());

  auto wrong_count = verify_manifest(r, dir.path(), [](const std::string&) { return uint64_t{3}; });
  ASSERT_EQ(wrong_count.size(), 1u);
  EXPECT_NE(wrong_count[0].message.find("expected 2 records, found 3"), std::string::npos);

  write_file_atomic(dir.file("a.bin"), "0123456780");  // same size, other bytes
  auto bad = verify_manifest(r, dir.path());
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].file, "a.bin");
  EXPECT_NE(bad[0].message.find("xxh3"), std::string::npos);

  std::remove(dir.file("a.idx").c_str());
  auto missing = verify_manifest(r, dir.path());
  ASSERT_FALSE(missing.empty());
}

TEST(Manifest, MalformedInputNamesTheProblem) {
  TempDir dir;
  write_file_atomic(dir.file("m.json"), "{not json");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1})");
  try {
    Manifest::read(dir.file("m.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'shards'"), std::string::npos) << e.what();
  }
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1,"shards":[{"file":"../x","records":1,"bytes":1,"xxh3":"0"}]})");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":99,"shards":[]})");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  // Counts must be integers: a float (here past 2^64) was cast, undefined behaviour out of range.
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1,"shards":[{"file":"x","records":1e30,"bytes":1,"xxh3":"0"}]})");
  try {
    Manifest::read(dir.file("m.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: malformed manifest:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("but is 1e+30"), std::string::npos) << e.what();
  }
}

// The tokenizer record as make-pretraining-shards writes it (docs/formats.md, "Manifest").
TokenizerInfo gpt2_record() {
  TokenizerInfo t;
  t.kind = "bpe";
  t.vocab_hash = "1111222233334444";
  t.vocab_size = 50257;
  t.special_ids = {{"eod", 50256}};
  t.files = {{"vocab", "vocab/gpt2-encoder.json", 1042301, "0123456789abcdef"},
             {"merges", "vocab/gpt2-vocab.bpe", 456318, "fedcba9876543210"}};
  t.options = {{"lowercase", nullptr}, {"python_compat", false}, {"max_input_chars_per_word", 100}};
  t.casing = {.lowercase = false, .strip_accents = false};
  t.special_tokens = {{"eod", {50256, "<|endoftext|>"}}};
  return t;
}

TEST(Manifest, TheTokenizerRecordRoundTrips) {
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer = gpt2_record();
  const nlohmann::json j = m.to_json();
  const nlohmann::json& t = j["tokenizer"];
  // The shape other readers rely on: the old fields where they were, the record beside them.
  EXPECT_EQ(t["kind"], "bpe");
  EXPECT_EQ(t["vocab_hash"], "1111222233334444");
  EXPECT_EQ(t["special_ids"]["eod"], 50256);
  EXPECT_EQ(t["files"][1], nlohmann::json({{"role", "merges"}, {"path", "vocab/gpt2-vocab.bpe"}, {"bytes", 456318},
                                           {"xxh3", "fedcba9876543210"}}));
  EXPECT_EQ(t["casing"], nlohmann::json({{"lowercase", false}, {"strip_accents", false}}));
  EXPECT_EQ(t["special_tokens"]["eod"], nlohmann::json({{"id", 50256}, {"token", "<|endoftext|>"}}));
  EXPECT_TRUE(t["options"]["lowercase"].is_null());

  const Manifest r = Manifest::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(r.to_json(), j);
  ASSERT_TRUE(r.tokenizer.has_record());
  EXPECT_EQ(r.tokenizer.record_error, "");
  ASSERT_EQ(r.tokenizer.files.size(), 2u);
  EXPECT_EQ(r.tokenizer.files[0].path, "vocab/gpt2-encoder.json");
  EXPECT_EQ(r.tokenizer.files[0].bytes, 1042301u);
  EXPECT_EQ(r.tokenizer.files[1].role, "merges");
  EXPECT_EQ(r.tokenizer.special_tokens.at("eod").token, "<|endoftext|>");
  EXPECT_EQ(r.tokenizer.options, m.tokenizer.options);

  // Unknown casing (a tokenizer that could not be probed) is null, and comes back unset.
  m.tokenizer.casing = {.lowercase = true, .strip_accents = std::nullopt};
  const Manifest unknown = Manifest::from_json(m.to_json());
  EXPECT_TRUE(m.to_json()["tokenizer"]["casing"]["strip_accents"].is_null());
  EXPECT_TRUE(unknown.tokenizer.casing.lowercase);
  EXPECT_FALSE(unknown.tokenizer.casing.strip_accents.has_value());
}

// A manifest without the record (written before it, or of documents, which have no tokenizer)
// reads as before and is written back without one.
TEST(Manifest, AManifestWithoutTheRecordStaysWithout) {
  const auto j = nlohmann::json::parse(R"({"format":"bert-hdf5","version":1,"shards":[],
      "tokenizer":{"kind":"wordpiece","vocab_hash":"abcd","vocab_size":10,"special_ids":{"cls":2}}})");
  const Manifest m = Manifest::from_json(j);
  EXPECT_FALSE(m.tokenizer.has_record());
  EXPECT_EQ(m.tokenizer.record_error, "");
  EXPECT_EQ(m.tokenizer.special_ids.at("cls"), 2);
  EXPECT_EQ(m.to_json()["tokenizer"], j["tokenizer"]);
  Manifest docs;
  docs.format = kFormatDocs;
  EXPECT_FALSE(docs.to_json()["tokenizer"].contains("files"));
}

// A damaged record does not make the manifest unreadable (the loader needs none of it): the rest
// is read, the record is left empty, and record_error says what is wrong.
TEST(Manifest, ADamagedTokenizerRecordIsNamedNotFatal) {
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer = gpt2_record();
  const nlohmann::json good = m.to_json();
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> damages = {
      {"tokenizer.files", [](nlohmann::json& t) { t["files"] = nlohmann::json::object(); }},
      {"tokenizer.files", [](nlohmann::json& t) { t["files"] = nlohmann::json::array(); }},
      {"tokenizer.files[1].bytes", [](nlohmann::json& t) { t["files"][1]["bytes"] = -1; }},
      {"'xxh3' in tokenizer.files[0]", [](nlohmann::json& t) { t["files"][0].erase("xxh3"); }},
      {"a path in tokenizer.files[0]", [](nlohmann::json& t) { t["files"][0]["path"] = ""; }},
      {"'options' in tokenizer", [](nlohmann::json& t) { t.erase("options"); }},
      {"tokenizer.options to be an object", [](nlohmann::json& t) { t["options"] = "lowercase"; }},
      {"tokenizer.casing.strip_accents", [](nlohmann::json& t) { t["casing"]["strip_accents"] = "no"; }},
      {"'lowercase' in tokenizer.casing", [](nlohmann::json& t) { t["casing"] = nlohmann::json::array(); }},
      {"tokenizer.special_tokens.eod.token", [](nlohmann::json& t) { t["special_tokens"]["eod"]["token"] = 3; }},
      {"tokenizer.special_tokens to be an object", [](nlohmann::json& t) { t["special_tokens"] = 1; }},
  };
  for (const auto& [says, damage] : damages) {
    nlohmann::json j = good;
    damage(j["tokenizer"]);
    Manifest r;
    ASSERT_NO_THROW(r = Manifest::from_json(j)) << says;
    EXPECT_NE(r.tokenizer.record_error.find(says), std::string::npos) << says << ": " << r.tokenizer.record_error;
    EXPECT_FALSE(r.tokenizer.has_record()) << says;
    EXPECT_TRUE(r.tokenizer.special_tokens.empty()) << says;
    EXPECT_EQ(r.tokenizer.vocab_hash, "1111222233334444") << says;  // the rest as written
    EXPECT_EQ(r.format, kFormatMegatron) << says;
  }
}

}  // namespace
}  // namespace pretrain::manifest_test
