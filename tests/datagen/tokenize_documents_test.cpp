// Stage 1 of make-pretraining-shards: documents → token store. BERT keeps the text format's lines
// as sentences and splits JSON documents' text into sentences; GPT encodes each document whole and
// ends it with the end-of-document id; the store's key says what made it; a checkpointed store
// continues where it stopped; the input in pieces, tokenized by any number of ranks and resumed
// by piece, makes the same store; a tokenizer without an end-of-document token and a corrupt input
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
#include "datagen/shards/input_pieces.h"
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
    TokenStoreWriter w(dir.file("cut"), token_store_width(tok->vocab_size()));
    w.add_document({{99}});
    w.add_document({{98}, {97}});
    w.checkpoint(2, key);
  }
  ASSERT_TRUE(TokenStoreWriter::resume_point(dir.file("cut"), key, token_store_width(tok->vocab_size())).has_value());
  o.resume = true;
  tokenize_documents(o, *tok, reader, dir.file("cut"), key);
  const TokenStore whole(dir.file("whole")), cut(dir.file("cut"));
  ASSERT_EQ(cut.num_documents(), 600u);
  EXPECT_EQ(sentences(cut, 0), (std::vector<std::vector<TokenId32>>{{99}})) << "the checkpointed documents are kept";
  EXPECT_EQ(sentences(cut, 1), (std::vector<std::vector<TokenId32>>{{98}, {97}}));
  for (size_t d : {size_t{2}, size_t{3}, size_t{599}}) EXPECT_EQ(sentences(cut, d), sentences(whole, d)) << d;
  EXPECT_TRUE(TokenStore::complete(dir.file("cut"), key));
}

// 600 documents, every seventh blank (dropped from the store, but read as an input document).
std::string blank_sevenths_corpus() {
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

// Document shards of ~4 documents a file (the manifest counts them), every seventh blank.
void write_doc_shards(const std::string& dir) {
  DocShardWriter w(dir, {.shard_bytes = 300});
  for (int d = 0; d < 600; ++d)
    w.add({.id = std::to_string(d), .text = d % 7 == 3 ? "" : "The ship " + std::to_string(d) + " sails. Sea stone."});
  w.finish();
}

// mpirun's stage 1 without the collectives: `ranks` ranks' runs of pieces tokenized one rank
// after the other, then moved into the store the last piece first (ranks finish in any order).
// Returns the input files the pieces' readers skipped undecoded.
uint64_t tokenize_as_ranks(const Tokenizer& tok, const TokenizeOptions& o, const std::string& input, int ranks,
                           const std::string& out) {
  TextDocumentReader whole({input});
  const nlohmann::json key = token_store_key(o, tok, whole);
  const std::vector<InputPiece> pieces = plan_input_pieces(whole.units(), o.piece_bytes);
  std::vector<TokenStoreCounts> counts(pieces.size());
  uint64_t skipped = 0;
  for (int r = 0; r < ranks; ++r) {
    const auto [first, end] = pieces_of_rank(pieces, r, ranks);
    for (size_t p = first; p < end; ++p) {
      TextDocumentReader reader({input});
      reader.set_range(pieces[p].begin, pieces[p].end);
      tokenize_documents(o, tok, reader, piece_dir(out, p), piece_key(key, p, pieces[p]));
      skipped += reader.files_skipped();
      counts[p] = *TokenStoreJoin::piece_counts(piece_dir(out, p), piece_key(key, p, pieces[p]));
    }
  }
  TokenStoreJoin::begin(out, counts, token_store_width(tok.vocab_size()), key);
  TokenStoreCounts total;
  for (const auto& c : counts) total += c;
  for (size_t p = pieces.size(); p-- > 0;) {
    TokenStoreCounts at;
    for (size_t q = 0; q < p; ++q) at += counts[q];
    TokenStoreJoin::move_piece(out, piece_dir(out, p), at, 4096);
  }
  TokenStoreJoin::commit(out, total, token_store_width(tok.vocab_size()), key);
  return skipped;
}

// Before, each rank took blocks of 16 documents dealt round-robin, so every rank decoded every
// document to count them; now a rank reads its pieces' files alone, and the pieces, tokenized by
// any number of ranks, make the one-process store.
TEST_F(TokenizeDocuments, PiecesTokenizedByAnyNumberOfRanksMakeTheOneProcessStore) {
  write_doc_shards(dir.file("docs"));
  write_file_atomic(dir.file("big.txt"), blank_sevenths_corpus());
  for (const std::string& input : {dir.file("docs"), dir.file("big.txt")}) {
    const TokenizeOptions o{.model = ModelKind::bert, .piece_bytes = 600};
    tokenize(o, input, dir.file("whole"));
    TextDocumentReader whole({input});
    const size_t pieces = plan_input_pieces(whole.units(), o.piece_bytes).size();
    if (input == dir.file("docs")) {
      EXPECT_GT(pieces, 10u) << "~150 counted files of ~300 bytes";
    } else {
      EXPECT_EQ(pieces, 1u) << "an uncounted file is one piece";
    }
    for (int ranks : {1, 2, 3, 5}) {
      const std::string out = dir.file(cat("store-", ranks));
      const uint64_t skipped = tokenize_as_ranks(*tok, o, input, ranks, out);
      EXPECT_EQ(store_files(out), store_files(dir.file("whole"))) << input << ", " << ranks << " ranks";
      if (pieces > 1) {
        EXPECT_GT(skipped, 50u) << "the later pieces skip the files before them undecoded";
      }
      EXPECT_TRUE(std::filesystem::is_empty(path_join(dir.path(), "pieces"))) << "moved pieces are gone";
    }
    std::filesystem::remove_all(dir.file("whole"));
  }
}

// Text-format files cut into pieces at each file: a document that runs on into the next file
// belongs to the piece it begins in, which reads on to its end; the next piece drops its lines.
TEST_F(TokenizeDocuments, ATextDocumentAcrossAPieceBoundaryIsReadOnceByThePieceItBeginsIn) {
  const std::vector<std::string> texts = {"the ship .\nsea\n", "stone .\n\nbread\n", "water\n", "\n \nthe sea .\n",
                                          "", "light\n\n", "tower\n"};
  std::vector<std::string> inputs;
  for (size_t k = 0; k < texts.size(); ++k) {
    inputs.push_back(dir.file(cat("t", k, ".txt")));
    write_file_atomic(inputs.back(), texts[k]);
  }
  std::vector<std::vector<std::string>> whole;
  {
    TextDocumentReader reader(inputs);
    for (RawDocument d; reader.next(d);) whole.push_back(d.sentences);
  }
  TextDocumentReader plan(inputs);
  const std::vector<InputPiece> pieces = plan_input_pieces(plan.units(), 1);
  ASSERT_GE(pieces.size(), texts.size() - 1) << "a piece a file (the empty one shares its piece)";
  std::vector<std::vector<std::string>> joined;
  for (const InputPiece& p : pieces) {
    TextDocumentReader reader(inputs);
    reader.set_range(p.begin, p.end);
    for (RawDocument d; reader.next(d);) joined.push_back(d.sentences);
  }
  EXPECT_EQ(joined, whole);
  ASSERT_GE(whole.size(), 4u);
  EXPECT_EQ(whole[0], (std::vector<std::string>{"the ship .", "sea", "stone ."}));
  EXPECT_EQ(whole[1], (std::vector<std::string>{"bread", "water"})) << "across three files";
}

// A piece checkpoints as a whole store does: killed after a checkpoint (PRETRAIN_FAULT), a resumed
// run keeps the pieces finished, goes on from the checkpoint of the one cut, and moves them into
// the same store. Before, an interrupted multi-rank tokenize at another rank count started over.
TEST_F(TokenizeDocuments, AnInterruptedPieceResumesFromItsCheckpoint) {
  write_doc_shards(dir.file("docs"));
  TokenizeOptions o{.model = ModelKind::bert, .checkpoint_bytes = 500, .piece_bytes = 5000};
  tokenize(o, dir.file("docs"), dir.file("whole/store"));
  TextDocumentReader reader({dir.file("docs")});
  const nlohmann::json key = token_store_key(o, *tok, reader);
  const std::vector<InputPiece> pieces = plan_input_pieces(reader.units(), o.piece_bytes);
  ASSERT_GE(pieces.size(), 3u);
  const std::string store = dir.file("cut/store");
  ::setenv("PRETRAIN_FAULT", "0:tokenize-checkpoint", 1);
  EXPECT_THROW(tokenize_in_pieces(o, *tok, {dir.file("docs")}, store, key, Communicator::self()), Error);
  ::unsetenv("PRETRAIN_FAULT");
  const auto from = TokenStoreWriter::resume_point(piece_dir(store, 0), piece_key(key, 0, pieces[0]), 2);
  ASSERT_TRUE(from.has_value()) << "piece 0 checkpointed";
  // A marker in the checkpointed tokens: a run that tokenized them again would replace it.
  {
    const std::string path = path_join(piece_dir(store, 0), "tokens.bin.partial");
    std::string bytes = read_file(path);
    bytes[0] = '\x63', bytes[1] = 0;
    write_file_atomic(path, bytes);
  }
  o.resume = true;
  tokenize_in_pieces(o, *tok, {dir.file("docs")}, store, key, Communicator::self());
  const TokenStore whole(dir.file("whole/store")), cut(store);
  EXPECT_EQ(cut.sentence(0, 0)[0], 99) << "the checkpointed documents are kept";
  ASSERT_EQ(cut.num_documents(), whole.num_documents());
  for (size_t d = 1; d < whole.num_documents(); ++d) ASSERT_EQ(sentences(cut, d), sentences(whole, d)) << d;
  EXPECT_FALSE(std::filesystem::exists(dir.file("cut/pieces")));
}

// Killed while the pieces are moved into the store (after a chunk of a piece is moved and the
// piece's file cut back): a resumed run goes on with the join, at the pieces it left, and the
// store is the uninterrupted one. Pieces moved are gone; a piece being moved is never tokenized again.
TEST_F(TokenizeDocuments, AnInterruptedJoinResumesWhereItStopped) {
  write_doc_shards(dir.file("docs"));
  TokenizeOptions o{.model = ModelKind::bert, .piece_bytes = 5000, .move_chunk_bytes = 4096};
  tokenize(o, dir.file("docs"), dir.file("whole/store"));
  TextDocumentReader reader({dir.file("docs")});
  const nlohmann::json key = token_store_key(o, *tok, reader);
  const std::string store = dir.file("cut/store");
  ::setenv("PRETRAIN_FAULT", "0:store-move-chunk", 1);
  EXPECT_THROW(tokenize_in_pieces(o, *tok, {dir.file("docs")}, store, key, Communicator::self()), Error);
  ::unsetenv("PRETRAIN_FAULT");
  ASSERT_TRUE(TokenStoreJoin::begun(store, key).has_value());
  o.resume = true;
  tokenize_in_pieces(o, *tok, {dir.file("docs")}, store, key, Communicator::self());
  EXPECT_EQ(store_files(store), store_files(dir.file("whole/store")));
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
