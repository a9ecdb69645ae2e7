// The tokenizer files of an HF directory (trainer/hf_tokenizer.h): written from the tokenizer the
// shards' manifest records (its files, load options, casing and special tokens), never from the
// command line saved beside it; a manifest written before that record is read the old way, with
// a warning saying so. When the tokenizer is gone, has changed since, or its record cannot be
// read, nothing is written and the call says so (the trainer warns, naming the path or field).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/manifest.h"
#include "common/utf8.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "trainer/hf_tokenizer.h"

namespace pretrain::hf_tokenizer_test {
namespace {

using nlohmann::json;
using pretrain::testing::TempDir;

// A manifest as make-pretraining-shards writes it: the info of the tokenizer loaded from `path`
// with `options`, and the command line it was given (by default "--tokenizer <path>", with
// "--lowercase" when the options lowercase).
std::string shards_made_with(const TempDir& tmp, const std::string& path, const TokenizerOptions& options = {},
                             std::optional<std::vector<std::string>> args = std::nullopt) {
  Manifest m;
  m.format = kFormatBertHdf5;
  m.tokenizer = load_tokenizer(path, options)->info();
  m.args = args ? *args : std::vector<std::string>{"--model", "bert", "--tokenizer", path};
  if (!args && options.lowercase == true) m.args.push_back("--lowercase");
  make_dirs(tmp.file("shards"));
  m.write(tmp.file("shards/manifest.json"));
  return tmp.file("shards/manifest.json");
}

std::string vocab_file(const TempDir& tmp, const std::string& vocab, const std::string& name = "vocab.txt") {
  write_file_atomic(tmp.file(name), vocab);
  return tmp.file(name);
}

const char* kUncased = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nlight\n##house\na\nb\n";
const char* kCased = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nThe\nthe\nlight\n##house\nA\na\n";

json json_of(const std::string& path) { return json::parse(read_file(path)); }

// The manifest's JSON changed by edit, written back.
template <typename Edit>
void edit_manifest(const std::string& path, Edit edit) {
  json j = json_of(path);
  edit(j);
  write_file_atomic(path, j.dump(2));
}

// What write_hf_tokenizer returned and wrote to stderr.
struct Export {
  bool ok;
  std::string log;
};
Export export_to(const std::string& dir, const std::string& manifest) {
  ::testing::internal::CaptureStderr();
  const bool ok = write_hf_tokenizer(dir, manifest, 512);
  return {ok, ::testing::internal::GetCapturedStderr()};
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HfTokenizer, WordPieceVocabularyAndCasing) {
  TempDir tmp;
  const std::string manifest = shards_made_with(tmp, vocab_file(tmp, kUncased));
  ASSERT_TRUE(write_hf_tokenizer(tmp.file("out"), manifest, 512));
  EXPECT_EQ(read_file(tmp.file("out/vocab.txt")), kUncased);
  const auto config = json_of(tmp.file("out/tokenizer_config.json"));
  EXPECT_EQ(config["tokenizer_class"], "BertTokenizer");
  EXPECT_EQ(config["do_lower_case"], true);
  EXPECT_EQ(config["strip_accents"], true);  // follows lowercasing, as in BERT's uncased vocabularies
  EXPECT_EQ(config["model_max_length"], 512);
  EXPECT_EQ(json_of(tmp.file("out/special_tokens_map.json"))["mask_token"], "[MASK]");
  EXPECT_EQ(json_of(tmp.file("out/special_tokens_map.json"))["cls_token"], "[CLS]");

  TempDir cased;
  ASSERT_TRUE(write_hf_tokenizer(cased.file("out"), shards_made_with(cased, vocab_file(cased, kCased)), 512));
  EXPECT_EQ(json_of(cased.file("out/tokenizer_config.json"))["do_lower_case"], false);
  EXPECT_EQ(json_of(cased.file("out/tokenizer_config.json"))["strip_accents"], false);
  TempDir forced;  // --lowercase given to make-pretraining-shards wins over the vocabulary's casing
  TokenizerOptions lower;
  lower.lowercase = true;
  ASSERT_TRUE(write_hf_tokenizer(forced.file("out"), shards_made_with(forced, vocab_file(forced, kCased), lower), 512));
  EXPECT_EQ(json_of(forced.file("out/tokenizer_config.json"))["do_lower_case"], true);
}

// The record alone says which tokenizer made the shards and how it was loaded: saved arguments
// that are empty, use other flag names, or even name another vocabulary change nothing.
TEST(HfTokenizer, TheRecordAloneNamesTheTokenizerAndItsCasing) {
  TempDir tmp;
  const std::string cased = vocab_file(tmp, kCased), decoy = vocab_file(tmp, kUncased, "decoy.txt");
  TokenizerOptions lower;
  lower.lowercase = true;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"--vocab", cased, "--lower-case"}, {"--tokenizer", decoy, "--no-lowercase"}}) {
    TempDir out;
    const Export e = export_to(out.file("hf"), shards_made_with(out, cased, lower, args));
    ASSERT_TRUE(e.ok) << e.log;
    EXPECT_EQ(read_file(out.file("hf/vocab.txt")), kCased);
    EXPECT_EQ(json_of(out.file("hf/tokenizer_config.json"))["do_lower_case"], true);
    EXPECT_EQ(json_of(out.file("hf/tokenizer_config.json"))["strip_accents"], true);
    EXPECT_EQ(e.log.find("predates"), std::string::npos) << e.log;
  }
  // Cased as loaded, whatever the arguments say.
  TempDir out;
  ASSERT_TRUE(write_hf_tokenizer(out.file("hf"), shards_made_with(out, cased, {}, std::vector<std::string>{"--lowercase"}), 512));
  EXPECT_EQ(json_of(out.file("hf/tokenizer_config.json"))["do_lower_case"], false);
}

// A byte-level BPE vocabulary: GPT-2's 256 byte symbols (printable bytes stand for themselves,
// the others for U+0100 on), one merge and <|endoftext|>.
std::string tiny_encoder_json() {
  json vocab = json::object();
  char32_t next = 0x100;
  for (char32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string symbol;
    append_utf8(printable ? b : next++, symbol);
    vocab[symbol] = int(b);
  }
  vocab["ab"] = 256;
  vocab["<|endoftext|>"] = 257;
  return vocab.dump();
}

// GPT-2's two files, under either pair of names, come out as vocab.json + merges.txt.
TEST(HfTokenizer, BytePairEncodingWritesBothFilesFromTheRecord) {
  TempDir tmp;
  const std::string vocab = tiny_encoder_json(), merges = "#version: 0.2\na b\n";
  write_file_atomic(tmp.file("gpt2-encoder.json"), vocab);
  write_file_atomic(tmp.file("gpt2-vocab.bpe"), merges);
  const Export e = export_to(tmp.file("hf"), shards_made_with(tmp, tmp.file("gpt2-vocab.bpe"), {}, std::vector<std::string>{}));
  ASSERT_TRUE(e.ok) << e.log;
  EXPECT_EQ(read_file(tmp.file("hf/vocab.json")), vocab);
  EXPECT_EQ(read_file(tmp.file("hf/merges.txt")), merges);
  const json config = json_of(tmp.file("hf/tokenizer_config.json"));
  EXPECT_EQ(config["tokenizer_class"], "GPT2Tokenizer");
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
}

// A manifest written before the record: the tokenizer is found among the saved arguments, as it
// always was, and one warning says why.
TEST(HfTokenizer, AManifestBeforeTheRecordFallsBackToTheSavedArgumentsWithOneWarning) {
  TempDir tmp;
  TokenizerOptions lower;
  lower.lowercase = true;
  const std::string manifest = shards_made_with(tmp, vocab_file(tmp, kCased), lower);
  edit_manifest(manifest, [](json& j) {
    for (const char* key : {"files", "options", "casing", "special_tokens"}) j["tokenizer"].erase(key);
  });
  ASSERT_FALSE(Manifest::read(manifest).tokenizer.has_record());
  const Export e = export_to(tmp.file("hf"), manifest);
  ASSERT_TRUE(e.ok) << e.log;
  EXPECT_EQ(occurrences(e.log, "predates the tokenizer record"), 1u) << e.log;
  EXPECT_EQ(occurrences(e.log, "warn:"), 1u) << e.log;
  EXPECT_NE(e.log.find(manifest), std::string::npos) << e.log;
  EXPECT_EQ(read_file(tmp.file("hf/vocab.txt")), kCased);
  EXPECT_EQ(json_of(tmp.file("hf/tokenizer_config.json"))["do_lower_case"], true);  // the saved --lowercase
}

TEST(HfTokenizer, AChangedFileIsNamedWithItsChecksum) {
  TempDir tmp;
  const std::string vocab = vocab_file(tmp, kUncased);
  const std::string manifest = shards_made_with(tmp, vocab);
  std::string same_size = kUncased;
  same_size[same_size.size() - 2] = 'c';  // "b" → "c": the same bytes count, other bytes
  write_file_atomic(vocab, same_size);
  Export e = export_to(tmp.file("changed"), manifest);
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.log.find(vocab + " has changed since it made the shards (xxh3 "), std::string::npos) << e.log;
  EXPECT_NE(e.log.find(Manifest::read(manifest).tokenizer.files.at(0).xxh3), std::string::npos) << e.log;
  EXPECT_FALSE(file_exists(tmp.file("changed/vocab.txt")));
  const std::string longer = std::string(kUncased) + "c\n";
  write_file_atomic(vocab, longer);
  e = export_to(tmp.file("longer"), manifest);
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.log.find(cat(vocab, " has changed since it made the shards (", longer.size(), " bytes")), std::string::npos)
      << e.log;
}

TEST(HfTokenizer, GoneOrChangedTokenizerWritesNothing) {
  TempDir tmp;
  const std::string manifest = shards_made_with(tmp, vocab_file(tmp, kUncased));
  write_file_atomic(tmp.file("vocab.txt"), std::string(kUncased) + "c\n");  // changed since
  EXPECT_FALSE(write_hf_tokenizer(tmp.file("changed"), manifest, 512));
  EXPECT_FALSE(file_exists(tmp.file("changed/vocab.txt")));
  std::filesystem::remove(tmp.file("vocab.txt"));  // gone
  const Export e = export_to(tmp.file("gone"), manifest);
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.log.find("vocab '" + tmp.file("vocab.txt") + "') cannot be found"), std::string::npos) << e.log;
  EXPECT_FALSE(write_hf_tokenizer(tmp.file("none"), "", 512));  // shards without a manifest
}

// A record someone damaged: the export warns, naming the manifest and what is wrong, and writes
// nothing; it never throws.
TEST(HfTokenizer, ADamagedRecordIsAWarningNeverACrash) {
  const std::vector<std::pair<const char*, void (*)(json&)>> damages = {
      {"tokenizer.files", [](json& t) { t["files"] = "vocab.txt"; }},
      {"tokenizer.files", [](json& t) { t["files"] = json::array(); }},
      {"tokenizer.files[0].bytes", [](json& t) { t["files"][0]["bytes"] = "48"; }},
      {"'path' in tokenizer.files[0]", [](json& t) { t["files"][0].erase("path"); }},
      {"'casing' in tokenizer", [](json& t) { t.erase("casing"); }},
      {"tokenizer.casing.lowercase", [](json& t) { t["casing"]["lowercase"] = 1; }},
      {"tokenizer.options", [](json& t) { t["options"] = json::array(); }},
      {"tokenizer option 'lowercase'", [](json& t) { t["options"]["lowercase"] = "yes"; }},
      {"tokenizer option 'max_input_chars_per_word'", [](json& t) { t["options"]["max_input_chars_per_word"] = 1.5; }},
      {"tokenizer.special_tokens.cls.id", [](json& t) { t["special_tokens"]["cls"]["id"] = "2"; }},
      {"cannot be found", [](json& t) { t["files"][0]["path"] = "no-such-vocab.txt"; }},
      {"is not the tokenizer that made the shards", [](json& t) { t["kind"] = "bpe"; }},
  };
  for (const auto& [says, damage] : damages) {
    TempDir tmp;
    const std::string manifest = shards_made_with(tmp, vocab_file(tmp, kUncased));
    edit_manifest(manifest, [damage = damage](json& j) { damage(j["tokenizer"]); });
    Export e{};
    EXPECT_NO_THROW(e = export_to(tmp.file("hf"), manifest)) << says;
    EXPECT_FALSE(e.ok) << says;
    EXPECT_NE(e.log.find(says), std::string::npos) << e.log;
    EXPECT_NE(e.log.find("model files only"), std::string::npos) << e.log;
    EXPECT_FALSE(file_exists(tmp.file("hf/vocab.txt"))) << says;
  }
}

TEST(HfTokenizer, FindsTheShardsManifest) {
  TempDir tmp;
  const std::string manifest = shards_made_with(tmp, vocab_file(tmp, kUncased));
  EXPECT_EQ(find_shards_manifest({tmp.file("shards")}), manifest);
  EXPECT_EQ(find_shards_manifest({manifest}), manifest);
  EXPECT_EQ(find_shards_manifest({tmp.file("shards/train-00000.hdf5")}), manifest);
  EXPECT_EQ(find_shards_manifest({tmp.file("elsewhere")}), "");
}

}  // namespace
}  // namespace pretrain::hf_tokenizer_test
