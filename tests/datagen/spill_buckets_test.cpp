// The BERT spill buckets' files (datagen/shards/spill_buckets.h): records appended in any sizes come
// back whole and in order through zstd frames, a bucket's pieces in order; a damaged frame is an
// error naming the file and offset; spill.json and rows.json hold for their key only; a freed
// bucket is gone and says which.
#include "datagen/shards/spill_buckets.h"

#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "common/file.h"
#include "datagen/shards/bert_spill_record.h"
#include "test_util.h"

namespace pretrain::spill_buckets_test {
namespace {

// Bytes that compress somewhat, as records do: ids of a small vocabulary.
std::string bytes_of(std::mt19937& gen, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = char('a' + gen() % 12);
  return s;
}

TEST(SpillBuckets, AppendedRecordsComeBackInOrderFromCompressedFrames) {
  testing::TempDir dir;
  SpillBuckets buckets(dir.path(), {{"k", 1}});
  buckets.start(3, 2);
  std::mt19937 gen(5);
  std::vector<std::string> want(3);
  for (int piece = 0; piece < 2; ++piece) {
    SpillWriter writer(buckets, piece);
    for (int batch = 0; batch < 40; ++batch) {
      std::vector<std::string> records(3);
      records[0] = bytes_of(gen, 1 + gen() % 9000);  // many frames
      if (batch % 7 == 0) records[1] = bytes_of(gen, kSpillFrame * 2 + 3);  // larger than a frame at once
      want[0] += records[0], want[1] += records[1];  // bucket 2 stays empty
      writer.append(records);
    }
    writer.close();
  }
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ(buckets.read(b), want[b]) << b;
  EXPECT_LT(file_size(buckets.piece_path(0, 0)) + file_size(buckets.piece_path(0, 1)), want[0].size() / 2)
      << "the frames are compressed";
  EXPECT_EQ(file_size(buckets.piece_path(2, 1)), 0u);
  EXPECT_TRUE(buckets.present(1));
  buckets.free(1);
  EXPECT_FALSE(buckets.present(1));
  try {
    buckets.gone(1);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(buckets.path(1)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("freed"), std::string::npos) << e.what();
  }
}

TEST(SpillBuckets, ADamagedFrameIsAnErrorNamingTheFileAndOffset) {
  testing::TempDir dir;
  SpillBuckets buckets(dir.path(), {{"k", 1}});
  buckets.start(1, 1);
  std::mt19937 gen(6);
  {
    SpillWriter writer(buckets, 0);
    writer.append({bytes_of(gen, kSpillFrame * 3)});
    writer.close();
  }
  std::string bytes = read_file(buckets.path(0));
  bytes.resize(bytes.size() - 5);
  write_file_atomic(buckets.path(0), bytes);
  try {
    buckets.read(0);
    ADD_FAILURE() << "a cut frame was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(buckets.path(0)), std::string::npos) << e.what();
  }
}

TEST(SpillBuckets, SpillJsonAndRowsJsonHoldForTheirKeyOnly) {
  testing::TempDir dir;
  SpillBuckets buckets(dir.path(), {{"k", 1}});
  buckets.start(4, 3);
  buckets.counts() = {5, 6, 7, 8};
  buckets.mark_complete();
  buckets.save_rows({1, 2, 3, 4});
  SpillBuckets same(dir.path(), {{"k", 1}});
  ASSERT_TRUE(same.load_complete(2));
  EXPECT_EQ(same.counts(), (std::vector<uint64_t>{5, 6, 7, 8}));
  EXPECT_EQ(same.pieces(), 3);
  EXPECT_EQ(same.load_rows(), (std::vector<int64_t>{1, 2, 3, 4}));
  SpillBuckets other(dir.path(), {{"k", 2}});
  EXPECT_FALSE(other.load_complete(2));
  EXPECT_FALSE(other.load_rows().has_value());
  EXPECT_FALSE(SpillBuckets(dir.path(), {{"k", 1}}).load_complete(3)) << "4 buckets cannot be 3 bins' worth";
  // Another layout's spill.json (format 3: uncompressed records) is made again.
  nlohmann::json old = nlohmann::json::parse(read_file(path_join(dir.path(), "spill.json")));
  old["format"] = 3;
  write_file_atomic(path_join(dir.path(), "spill.json"), old.dump());
  EXPECT_FALSE(SpillBuckets(dir.path(), {{"k", 1}}).load_complete(2));
  static_assert(kSpillFormat == 4);
}

}  // namespace
}  // namespace pretrain::spill_buckets_test
