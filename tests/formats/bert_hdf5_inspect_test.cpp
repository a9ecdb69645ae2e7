// inspect_bert_shard (formats/bert_hdf5_inspect.cpp), what `shard-tool inspect` prints: the
// shard's kind, size and read path, each dataset as h5py would describe it (dtype, shape, chunks,
// compression; contiguous and shuffled layouts too), then the first records' fields.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "bert_hdf5_fixture.h"
#include "common/error.h"
#include "formats/bert_hdf5.h"
#include "test_util.h"

namespace pretrain::bert_hdf5_inspect_test {
namespace {

using bert_hdf5_fixture::expect_error;
using bert_hdf5_fixture::foreign_layout;
using bert_hdf5_fixture::two_instance_row;
using bert_hdf5_fixture::write_foreign;
using bert_hdf5_fixture::write_random;
using testing::TempDir;

std::string inspect(const std::string& path, int max_records) {
  std::ostringstream out;
  inspect_bert_shard(path, out, max_records);
  return out.str();
}

// Every one of `parts` is in `text`.
void expect_parts(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

TEST(BertHdf5Golden, InspectDescribesNvidiaLayout) {
  PRETRAIN_REQUIRE_SHARED(path, "golden/nvidia-botchan-s128.hdf5");
  std::ostringstream out;
  inspect_bert_shard(path, out, 2);
  std::string text = out.str();
  for (const char* part : {"records 1330", "seq_len 128", "max_predictions 20", "input_ids: dtype=<i4 shape=(1330, 128) chunks=(167, 32)",
                           "input_mask: dtype=|i1", "masked_lm_ids: dtype=<i4 shape=(1330, 20) chunks=(333, 5)",
                           "next_sentence_labels: dtype=|i1 shape=(1330,)", "compression=gzip level 4", "record 1:"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  EXPECT_EQ(text.find("record 2:"), std::string::npos);
}

// One of our shards: the header, each dataset's dtype, shape, chunks and gzip level, and the
// records asked for, each with its tokens (the mask's 1s), predictions (up to the 0-padding) and
// fields cut to those lengths.
TEST(InspectBertShard, DescribesOurShardAndItsFirstRecords) {
  TempDir dir;
  const std::string path = dir.file("shard.hdf5");
  {
    BertShardWriter writer(path, 8, 3, {.records_per_chunk = 4});
    writer.append(BertRecord{{101, 7, 8, 102}, {1, 1, 1, 1}, {0, 0, 1, 1}, {2}, {55}, 1});
    writer.append(BertRecord{{101, 9, 102}, {1, 1, 1}, {0, 0, 0}, {}, {}, 0});
    writer.append(BertRecord{{101, 4, 102}, {1, 1, 1}, {0, 0, 0}, {1}, {3}, 0});
    writer.commit();
  }
  const std::string text = inspect(path, 2);
  expect_parts(text, {path + ": NVIDIA BERT HDF5 shard\n", "  records 3, seq_len 8, max_predictions 3, read path raw chunks\n",
                      "  input_ids: dtype=<i4 shape=(3, 8) chunks=(4, 8) compression=gzip level 1\n",
                      "  segment_ids: dtype=|i1 shape=(3, 8) chunks=(4, 8) compression=gzip level 1\n",
                      "  masked_lm_positions: dtype=<i4 shape=(3, 3) chunks=(4, 3) compression=gzip level 1\n",
                      "  next_sentence_labels: dtype=|i1 shape=(3,) chunks=(4,) compression=gzip level 1\n",
                      "record 0: tokens 4, predictions 1, next_sentence_label 1\n  input_ids: 101 7 8 102\n"
                      "  segment_ids: 0 0 1 1\n  masked_lm_positions: 2\n  masked_lm_ids: 55\n",
                      "record 1: tokens 3, predictions 0, next_sentence_label 0\n  input_ids: 101 9 102\n"
                      "  segment_ids: 0 0 0\n  masked_lm_positions: \n  masked_lm_ids: \n"});
  EXPECT_EQ(text.find("record 2:"), std::string::npos) << text;
  EXPECT_EQ(text.find("position_ids"), std::string::npos) << "not packed: " << text;
  EXPECT_EQ(inspect(path, 0).find("record 0:"), std::string::npos);
  EXPECT_EQ(inspect(path, -1).find("record 0:"), std::string::npos);
  expect_parts(inspect(path, 99), {"record 2: tokens 3, predictions 1"});
}

// A packed shard says so and lists its four more datasets and their fields per record.
TEST(InspectBertShard, DescribesAPackedShard) {
  TempDir dir;
  const std::string path = dir.file("packed.hdf5");
  {
    BertShardWriter writer(path, 8, 2, {.max_pack = 2});
    writer.append(two_instance_row());
    writer.commit();
  }
  expect_parts(inspect(path, 1), {"max_predictions 2, packed: up to 2 instances per row, read path raw chunks",
                                  "position_ids: dtype=<i4 shape=(1, 8)", "sequence_ids: dtype=|i1 shape=(1, 8)",
                                  "next_sentence_positions: dtype=<i4 shape=(1, 2)",
                                  "packed_next_sentence_labels: dtype=|i1 shape=(1, 2)",
                                  "record 0: tokens 6, predictions 2, next_sentence_label 1\n",
                                  "  position_ids: 0 1 2 0 1 2\n  sequence_ids: 1 1 1 2 2 2\n",
                                  "  next_sentence_positions: 0 3\n  packed_next_sentence_labels: 1 0\n"});
  // 37 random packed rows in chunks of 4.
  write_random(path, 37, 24, 6, 4, 11, 3);
  expect_parts(inspect(path, 1), {"up to 3 instances per row", "packed_next_sentence_labels: dtype=|i1 shape=(37, 3)"});
}

// Files h5py could write: other widths, contiguous and compact layouts, shuffle before gzip, read
// through hyperslabs; a file that is not a shard is an Error naming it.
TEST(InspectBertShard, DescribesOtherLayoutsAndRefusesWhatIsNotAShard) {
  TempDir dir;
  const std::string path = dir.file("foreign.hdf5");
  auto sets = foreign_layout(5, 6, 3);
  sets[0].compact = true;  // input_ids
  write_foreign(path, sets);
  expect_parts(inspect(path, 1), {"records 5, seq_len 6, max_predictions 3, read path hyperslab",
                                  "  input_ids: dtype=>i8 shape=(5, 6) layout=compact\n",
                                  "  input_mask: dtype=|u1 shape=(5, 6) chunks=(3, 2) compression=shuffle + gzip level 1\n",
                                  "  segment_ids: dtype=<i2 shape=(5, 6) layout=contiguous\n",
                                  "  masked_lm_ids: dtype=<i8 shape=(5, 3) layout=contiguous\n",
                                  "record 0: tokens 3,"});
  const std::string text = dir.file("text.hdf5");
  write_file_atomic(text, "not a shard");
  expect_error([&] { inspect(text, 1); }, {text, "not an HDF5 file"});
}

}  // namespace
}  // namespace pretrain::bert_hdf5_inspect_test
