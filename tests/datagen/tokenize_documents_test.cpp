// Stage 1 of make-pretraining-shards: documents → token store. BERT keeps the text format's lines
// as sentences and splits JSON documents' text into sentences; GPT encodes each document whole and
// ends it with the end-of-document id; the store's key says what made it; a checkpointed store
// continues where it stopped; a tokenizer without an end-of-document token and a corrupt input
// are refused naming the file.
#include "datagen/shards/tokenize_documents.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "datagen/shards/token_store.h"
#include "formats/doc_shards.h"
#include "test_util.h"

namespace pretrain::tokenize_documents_test {
namespace {

using testing::TempDir;

class TokenizeDocuments : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::warn);
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n.\n";
    for (const char* w : {"the", "ship", "light", "tower", "sea", "stone", "bread", "water"}) vocab += std::string(w) + "\n";
    write_file_atomic(dir.file("vocab.txt"), vocab);
    tok = load_tokenizer(dir.file("vocab.txt"));
    // Google's text format: a blank line between documents; the third document is blank.
    write_file_atomic(dir.file("corpus.txt"),
                      "the ship .\nthe light tower .\nsea stone\n\nbread and water .\n\n \n\nthe sea .\n");
    write_file_atomic(dir.file("docs.jsonl"),
                      "{\"text\": \"The ship sails. The light shines.\\nBread and water.\"}\n{\"text\": \"Stone.\"}\n");
  }
  // Document d of the store as its sentences.
  static std::vector<std::vector<TokenId32>> sentences(const TokenStore& s, size_t d) {
    std::vector<std::vector<TokenId32>> out;
    for (size_t i = 0; i < s.num_sentences(d); ++i) {
      auto span = s.sentence(d, i);
      out.emplace_back(span.begin(), span.end());
    }
    return out;
  }
  void tokenize(const TokenizeOptions& o, const std::string& input, const std::string& store) {
    TextDocumentReader reader({input});
    tokenize_documents(o, *tok, reader, store, token_store_key(o, *tok, reader));
  }
  TempDir dir;
  std::unique_ptr<Tokenizer> tok;
};

TEST_F(TokenizeDocuments, BertKeepsTheTextFormatsLinesAsSentences) {
  tokenize({.model = ModelKind::bert}, dir.file("corpus.txt"), dir.file("store"));
  const TokenStore store(dir.file("store"));
  ASSERT_EQ(store.num_documents(), 3u) << "the blank document is dropped";
  EXPECT_EQ(sentences(store, 0), (std::vector<std::vector<TokenId32>>{
                                     tok->encode("the ship ."), tok->encode("the light tower ."), tok->encode("sea stone")}));
  EXPECT_EQ(sentences(store, 1), (std::vector<std::vector<TokenId32>>{tok->encode("bread and water .")}));
  EXPECT_EQ(sentences(store, 2), (std::vector<std::vector<TokenId32>>{tok->encode("the sea .")}));
}

TEST_F(TokenizeDocuments, BertSplitsADocumentsTextIntoSentences) {
  tokenize({.model = ModelKind::bert}, dir.file("docs.jsonl"), dir.file("store"));
  const TokenStore store(dir.file("store"));
  ASSERT_EQ(store.num_documents(), 2u);
  EXPECT_EQ(sentences(store, 0), (std::vector<std::vector<TokenId32>>{tok->encode("The ship sails."),
                                                                       tok->encode("The light shines."),
                                                                       tok->encode("Bread and water.")}));
}

TEST_F(TokenizeDocuments, GptEncodesEachDocumentWholeAndEndsItWithEod) {
  const TokenId32 eod = end_of_document_id(*tok);
  EXPECT_EQ(eod, 3) << "a WordPiece vocabulary's [SEP]";
  tokenize({.model = ModelKind::gpt}, dir.file("corpus.txt"), dir.file("store"));
  const TokenStore store(dir.file("store"));
  ASSERT_EQ(store.num_documents(), 3u);
  std::vector<TokenId32> want = tok->encode("the ship .\nthe light tower .\nsea stone");
  want.push_back(eod);
  auto got = store.document_tokens(0);
  EXPECT_EQ(std::vector<TokenId32>(got.begin(), got.end()), want);
}

TEST_F(TokenizeDocuments, TheKeySaysWhatMadeTheStore) {
  TextDocumentReader reader({dir.file("corpus.txt")});
  const TokenizeOptions bert{.model = ModelKind::bert};
  const nlohmann::json key = token_store_key(bert, *tok, reader);
  EXPECT_EQ(key.at("inputs").size(), 1u);
  EXPECT_EQ(key.at("inputs")[0][0], dir.file("corpus.txt"));
  EXPECT_EQ(key, token_store_key(bert, *tok, reader));
  EXPECT_NE(key, token_store_key({.model = ModelKind::gpt}, *tok, reader));
  EXPECT_NE(key, token_store_key({.model = ModelKind::bert, .lang = "de"}, *tok, reader));
  TokenizeOptions lower = bert;
  lower.tokenizer_options.lowercase = true;
  EXPECT_NE(key, token_store_key(lower, *tok, reader));
  tokenize_documents(bert, *tok, reader, dir.file("store"), key);
  EXPECT_TRUE(TokenStore::complete(dir.file("store"), key));
  EXPECT_FALSE(TokenStore::complete(dir.file("store"), token_store_key({.model = ModelKind::gpt}, *tok, reader)));
}

TEST_F(TokenizeDocuments, AResumedStoreContinuesFromItsCheckpoint) {
  std::string big;
  for (int d = 0; d < 600; ++d) big += "the ship " + std::to_string(d) + " .\nsea stone .\n\n";
  write_file_atomic(dir.file("big.txt"), big);
  TokenizeOptions o{.model = ModelKind::bert};
  tokenize(o, dir.file("big.txt"), dir.file("whole"));
  TextDocumentReader reader({dir.file("big.txt")});
  const nlohmann::json key = token_store_key(o, *tok, reader);
  {
    // What a kill leaves: a store checkpointed after two input documents, never committed. Its
    // documents are markers, which a run that tokenized them again would replace.
    make_dirs(dir.file("cut"));
    TokenStoreWriter w(dir.file("cut"));
    w.add_document({{99}});
    w.add_document({{98}, {97}});
    w.checkpoint(2, key);
  }
  ASSERT_TRUE(TokenStoreWriter::resume_point(dir.file("cut"), key).has_value());
  o.resume = true;
  tokenize_documents(o, *tok, reader, dir.file("cut"), key);
  const TokenStore whole(dir.file("whole")), cut(dir.file("cut"));
  ASSERT_EQ(cut.num_documents(), 600u);
  EXPECT_EQ(sentences(cut, 0), (std::vector<std::vector<TokenId32>>{{99}})) << "the checkpointed documents are kept";
  EXPECT_EQ(sentences(cut, 1), (std::vector<std::vector<TokenId32>>{{98}, {97}}));
  for (size_t d : {size_t{2}, size_t{3}, size_t{599}}) EXPECT_EQ(sentences(cut, d), sentences(whole, d)) << d;
  EXPECT_TRUE(TokenStore::complete(dir.file("cut"), key));
}

// 600 documents, every seventh blank (dropped from the store, but counted in its input block).
std::string blocks_corpus() {
  std::string big;
  for (int d = 0; d < 600; ++d) big += d % 7 == 3 ? " \n\n" : "the ship " + std::to_string(d) + " .\nsea stone .\n\n";
  return big;
}

std::vector<std::string> store_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const char* name : {"tokens.bin", "sentences.bin", "documents.bin", "store.json"})
    files.push_back(read_file(path_join(dir, name)));
  return files;
}

// mpirun's stage 1 without the collectives: the parts tokenized one after the other, then each
// writes its own blocks into the one store in `out`, the last part first (ranks finish in any
// order). Returns the input files the parts skipped undecoded.
uint64_t tokenize_as_parts(const Tokenizer& tok, const TokenizeOptions& whole, const std::string& input, int parts,
                           const std::string& out) {
  std::vector<std::vector<TokenStoreCounts>> blocks;
  uint64_t skipped = 0;
  nlohmann::json key;
  for (int p = 0; p < parts; ++p) {
    TokenizeOptions o = whole;
    o.part = p, o.parts = parts;
    TextDocumentReader reader({input});
    key = token_store_key(whole, tok, reader);
    const std::string part_dir = cat(out, "-part-", p);
    tokenize_documents(o, tok, reader, part_dir, key);
    skipped += reader.files_skipped();
    blocks.push_back(part_block_counts(TokenStore(part_dir), part_dir));
  }
  const TokenStoreCounts total = part_block_offsets(blocks, 0).back();
  TokenStorePieces::create(out, total);
  for (int p = parts - 1; p >= 0; --p) {
    const TokenStore part(cat(out, "-part-", p));
    TokenStorePieces pieces(out);
    write_part_blocks(part, blocks[size_t(p)], part_block_offsets(blocks, size_t(p)), pieces);
    pieces.finish();
  }
  TokenStoreWriter(out, total).commit(key);
  return skipped;
}

// Before, rank 0 alone copied every part's documents, sentence by sentence.
TEST_F(TokenizeDocuments, PartsWriteTheirBlocksInPlaceIntoTheOneProcessStore) {
  write_file_atomic(dir.file("big.txt"), blocks_corpus());
  const TokenizeOptions whole{.model = ModelKind::bert};
  tokenize(whole, dir.file("big.txt"), dir.file("whole"));
  for (int parts : {2, 3, 5}) {
    const std::string out = dir.file(cat("store-", parts));
    EXPECT_EQ(tokenize_as_parts(*tok, whole, dir.file("big.txt"), parts, out), 0u) << "one text file: nothing to skip";
    EXPECT_EQ(store_files(out), store_files(dir.file("whole"))) << parts << " parts";
  }
  // A part whose blocks.bin disagrees with its store is refused, naming the file.
  const std::string part = dir.file("store-3-part-0");
  write_file_atomic(path_join(part, "blocks.bin"), std::string(8, '\x7f'));
  try {
    part_block_counts(TokenStore(part), part);
    ADD_FAILURE() << "no error for a damaged blocks.bin";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.bin"), std::string::npos) << e.what();
  }
}

// Document shards whose manifest counts them: a part skips, undecoded, the files none of whose
// documents are in its blocks, and the store is still the one-process store. Before, every rank
// decoded every file.
TEST_F(TokenizeDocuments, PartsSkipWholeDocumentFilesWithNoneOfTheirBlocks) {
  {
    DocShardWriter w(dir.file("docs"), {.shard_bytes = 300});  // ~4 documents a file
    for (int d = 0; d < 600; ++d)
      w.add({.id = std::to_string(d), .text = d % 7 == 3 ? "" : "The ship " + std::to_string(d) + " sails. Sea stone."});
    w.finish();
  }
  const TokenizeOptions whole{.model = ModelKind::bert};
  tokenize(whole, dir.file("docs"), dir.file("whole"));
  for (int parts : {2, 3}) {
    const std::string out = dir.file(cat("store-", parts));
    const uint64_t skipped = tokenize_as_parts(*tok, whole, dir.file("docs"), parts, out);
    EXPECT_EQ(store_files(out), store_files(dir.file("whole"))) << parts << " parts";
    // Of ~150 files each part needs those touching its 1/parts of the 16-document blocks.
    EXPECT_GT(skipped, 100u * uint64_t(parts - 1)) << parts << " parts";
  }
}

// A part checkpoints as a whole store does: killed after a checkpoint (PRETRAIN_FAULT), it goes
// on from there on --resume and ends as the uninterrupted part, blocks.bin included. Before,
// parts kept no checkpoints and an interrupted one started over.
TEST_F(TokenizeDocuments, AnInterruptedPartResumesFromItsCheckpoint) {
  write_file_atomic(dir.file("big.txt"), blocks_corpus());
  TokenizeOptions o{.model = ModelKind::bert, .checkpoint_bytes = 2000};
  o.part = 1, o.parts = 3;
  tokenize(o, dir.file("big.txt"), dir.file("whole"));
  ::setenv("PRETRAIN_FAULT", "0:tokenize-checkpoint", 1);
  EXPECT_THROW(tokenize(o, dir.file("big.txt"), dir.file("cut")), Error);
  ::unsetenv("PRETRAIN_FAULT");
  TextDocumentReader reader({dir.file("big.txt")});
  const nlohmann::json key = token_store_key(o, *tok, reader);
  const auto from = TokenStoreWriter::resume_point(dir.file("cut"), key);
  ASSERT_TRUE(from.has_value());
  ASSERT_GT(from->documents, 0u);
  ASSERT_LT(from->input_documents, 500u) << "the checkpoint is not near the end";
  // A marker in the checkpointed tokens: a run that tokenized them again would replace it.
  {
    const std::string path = dir.file("cut/tokens.bin.partial");
    std::string bytes = read_file(path);
    bytes[0] = '\x63', bytes[1] = bytes[2] = bytes[3] = 0;
    write_file_atomic(path, bytes);
  }
  o.resume = true;
  tokenize(o, dir.file("big.txt"), dir.file("cut"));
  const TokenStore whole(dir.file("whole")), cut(dir.file("cut"));
  EXPECT_EQ(cut.sentence(0, 0)[0], 99) << "the checkpointed documents are kept";
  ASSERT_EQ(cut.num_documents(), whole.num_documents());
  for (size_t d = 1; d < whole.num_documents(); ++d) ASSERT_EQ(sentences(cut, d), sentences(whole, d)) << d;
  EXPECT_EQ(read_file(dir.file("cut/blocks.bin")), read_file(dir.file("whole/blocks.bin")));
}

TEST_F(TokenizeDocuments, NoEndOfDocumentTokenOrACorruptInputIsAnErrorNamingTheFile) {
  write_file_atomic(dir.file("no-sep.txt"), "[PAD]\n[UNK]\nthe\n");
  auto plain = load_tokenizer(dir.file("no-sep.txt"));
  try {
    end_of_document_id(*plain);
    ADD_FAILURE() << "no error for a tokenizer without an end-of-document token";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no-sep.txt"), std::string::npos) << e.what();
  }
  write_file_atomic(dir.file("corrupt.jsonl"), "{\"text\": \"fine.\"}\n{\"text\": broken\n");
  try {
    tokenize({.model = ModelKind::bert}, dir.file("corrupt.jsonl"), dir.file("store"));
    ADD_FAILURE() << "no error for a corrupt input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path_join(dir.file("store"), "store.json"))) << "no store was committed";
}

}  // namespace
}  // namespace pretrain::tokenize_documents_test
