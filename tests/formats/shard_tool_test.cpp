// shard-tool verify on packed BERT shards: a well-formed packed set passes; a row that breaks an
// invariant of bert_hdf5.h (its checksums made to match, so only the row check can catch it), or a
// shard whose packing disagrees with the manifest's extra.max_pack, is reported naming the file,
// the record and what is wrong. (The other commands are covered end to end: tests/e2e/test_shard_tool.sh.)
#include "formats/shard_tool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "formats/bert_hdf5.h"
#include "test_util.h"

namespace pretrain::shard_tool_test {
namespace {

using testing::TempDir;

// Two instances, [CLS] a [SEP] b [SEP] (5 tokens) and [CLS] c [SEP] d e [SEP] (6 tokens), packed.
BertRecord packed_row() {
  return {{2, 10, 3, 11, 3, 2, 12, 3, 13, 14, 3},
          std::vector<int32_t>(11, 1),
          {0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1},
          {1, 8},
          {10, 13},
          1,
          {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5},
          {1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2},
          {0, 5},
          {1, 0}};
}

// A set of three packed rows in `dir`, row 1 changed by `damage`; its manifest says max_pack.
void write_set(const std::string& dir, void (*damage)(BertRecord&), int64_t manifest_max_pack) {
  make_dirs(dir);
  BertShardWriter writer(path_join(dir, "train-00000.hdf5"), 16, 4, {.max_pack = 3});
  for (int i = 0; i < 3; ++i) {
    BertRecord r = packed_row();
    if (i == 1) damage(r);
    writer.append(r);
  }
  writer.commit();
  Manifest m;
  m.format = kFormatBertHdf5;
  m.seq_len = 16;
  m.max_predictions = 4;
  if (manifest_max_pack) m.extra["max_pack"] = manifest_max_pack;
  m.shards.push_back(Manifest::describe(dir, "train-00000.hdf5", 3));
  m.write(path_join(dir, kManifestName));
}

// shard-tool verify DIR: its exit code and what it printed.
std::pair<int, std::string> verify(const std::string& dir) {
  std::vector<std::string> args = {"shard-tool", "verify", dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  const int rc = shard_tool_main(int(argv.size()), argv.data());
  return {rc, ::testing::internal::GetCapturedStdout()};
}

TEST(ShardToolVerify, PackedRowsAreChecked) {
  TempDir dir;
  write_set(dir.file("good"), [](BertRecord&) {}, 3);
  auto [rc, out] = verify(dir.file("good"));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("packed rows (up to 3 instances) consistent"), std::string::npos) << out;

  struct Case {
    void (*damage)(BertRecord&);
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](BertRecord& r) { r.input_mask[7] = 0; }, "input_mask[7] = 0"},
      {[](BertRecord& r) { r.position_ids[6] = 0; }, "position_ids[6] = 0, expected 1"},
      {[](BertRecord& r) { r.next_sentence_positions[1] = 4; }, "next_sentence_positions[1] = 4, expected 5"},
      {[](BertRecord& r) { r.packed_next_sentence_labels.push_back(0), r.next_sentence_positions.push_back(0); },
       "packed_next_sentence_labels[2] = 0"},
      {[](BertRecord& r) { r.masked_lm_positions[1] = 5; }, "instance 2's [CLS]"},
      {[](BertRecord& r) { r.sequence_ids[3] = 2; }, "next_sentence_positions[1] = 5, expected 3 (where instance 2 starts)"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string bad = dir.file(cat("bad", i));
    write_set(bad, cases[i].damage, 3);
    auto [bad_rc, bad_out] = verify(bad);
    EXPECT_EQ(bad_rc, 1) << bad_out;
    for (const std::string& part : {std::string("BAD"), path_join(bad, "train-00000.hdf5"), std::string("record 1"),
                                   std::string("packed row"), cases[i].says})
      EXPECT_NE(bad_out.find(part), std::string::npos) << "'" << bad_out << "' lacks '" << part << "'";
  }
  write_set(dir.file("unlisted"), [](BertRecord&) {}, 0);
  auto [unlisted_rc, unlisted_out] = verify(dir.file("unlisted"));
  EXPECT_EQ(unlisted_rc, 1);
  EXPECT_NE(unlisted_out.find("shard has max_pack 3, the manifest's extra.max_pack says 0"), std::string::npos)
      << unlisted_out;
}

}  // namespace
}  // namespace pretrain::shard_tool_test
