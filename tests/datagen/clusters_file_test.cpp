// The clusters checkpoint reads back only whole and with its key.
#include "datagen/dedup/clusters_file.h"

#include <gtest/gtest.h>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::clusters_file_test {
namespace {

TEST(ClustersFile, RoundTripAndRefusals) {
  testing::TempDir dir;
  Clusters c;
  c.roots = {0, 0, 2, 0, 2};
  c.candidate_pairs = 9;
  c.checked_pairs = 4;
  write_clusters(dir.file("c.bin"), 77, c);
  auto back = read_clusters(dir.file("c.bin"), 77);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->roots, c.roots);
  EXPECT_EQ(back->candidate_pairs, 9u);
  EXPECT_EQ(back->checked_pairs, 4u);
  EXPECT_FALSE(read_clusters(dir.file("c.bin"), 78));      // another run's
  EXPECT_FALSE(read_clusters(dir.file("missing.bin"), 77));
  std::string bytes = read_file(dir.file("c.bin"));
  bytes[50] ^= 4;
  write_file_atomic(dir.file("c.bin"), bytes);
  EXPECT_FALSE(read_clusters(dir.file("c.bin"), 77));      // damaged
  write_file_atomic(dir.file("c.bin"), bytes.substr(0, 20));
  EXPECT_FALSE(read_clusters(dir.file("c.bin"), 77));      // truncated
}

}  // namespace
}  // namespace pretrain::clusters_file_test
