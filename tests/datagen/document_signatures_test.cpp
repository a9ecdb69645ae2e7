// Stage 1: a file's signature file is the same bytes at any thread count; documents too short for a
// shingle get no signature; --no-near signs exact hashes only; a record count that differs from the
// manifest is refused naming the file.
#include "datagen/dedup/document_signatures.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include "common/file.h"
#include "common/progress.h"
#include "dedup_fixture.h"
#include "test_util.h"

namespace pretrain::document_signatures_test {
namespace {

using namespace dedup_fixture;
using testing::TempDir;

TEST(DocumentSignatures, SameBytesAtAnyThreadCount) {
  Progress::set_enabled(false);
  TempDir dir;
  std::vector<Document> docs;
  for (int i = 0; i < 300; ++i) docs.push_back(doc(std::to_string(i), random_text(i, 20 + i % 50)));
  write_jsonl(dir.file("in.jsonl"), docs);
  DedupInputFile file{0, "in", dir.file("in.jsonl"), file_size(dir.file("in.jsonl")), -1, ""};
  SignOptions o;
  for (int threads : {1, 3}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
    EXPECT_EQ(sign_input_file(file, 42, o, dir.file("sig-" + std::to_string(threads)), nullptr), 300u);
  }
  EXPECT_EQ(read_file(dir.file("sig-1")), read_file(dir.file("sig-3")));
  SignatureFile f(dir.file("sig-1"));
  EXPECT_EQ(f.id(299), "299");
  // The stored signature is the document's.
  MinhashFunctions functions(o.minhash);
  DocSignature expected = sign_document(docs[7], o, functions);
  std::vector<uint32_t> sig(static_cast<size_t>(f.hashes()));
  f.signature(7, sig.data());
  EXPECT_EQ(sig, expected.signature);
}

TEST(DocumentSignatures, ShortDocumentsAndExactOnly) {
  SignOptions o;
  MinhashFunctions functions(o.minhash);
  EXPECT_FALSE(sign_document(doc("1", "only four words here"), o, functions).has_minhash);
  DocSignature five = sign_document(doc("2", "now there are five words"), o, functions);
  EXPECT_TRUE(five.has_minhash);
  EXPECT_EQ(five.band_keys.size(), 14u);
  EXPECT_EQ(five.signature.size(), 112u);
  o.near = false;
  DocSignature exact_only = sign_document(doc("3", random_text(1, 100)), o, functions);
  EXPECT_FALSE(exact_only.has_minhash);
  EXPECT_EQ(exact_only.exact, exact_hash(random_text(1, 100), o.exact));
}

TEST(DocumentSignatures, RecordCountMustMatchTheManifest) {
  Progress::set_enabled(false);
  TempDir dir;
  write_jsonl(dir.file("in.jsonl"), {doc("1", "a b c d e f"), doc("2", "g h i j k l")});
  DedupInputFile file{0, "in", dir.file("in.jsonl"), file_size(dir.file("in.jsonl")), 3, ""};
  std::string message = testing::error_message([&] { sign_input_file(file, 1, SignOptions{}, dir.file("sig"), nullptr); });
  EXPECT_NE(message.find("in.jsonl"), std::string::npos) << message;
  EXPECT_NE(message.find("expected 3 documents"), std::string::npos) << message;
  EXPECT_FALSE(file_exists(dir.file("sig")));
}

}  // namespace
}  // namespace pretrain::document_signatures_test
