// GPU tests (CTest label "gpu"): run on a machine with a GPU, skip cleanly without one.
#include <gtest/gtest.h>

#include "common/device.h"
#include "common/error.h"

using namespace pretrain;

TEST(Gpu, DevicesAreVisibleAndUsable) {
  DeviceReport r = query_devices();
  if (!r.built_with_cuda) GTEST_SKIP() << "built without CUDA";
  if (r.gpus.empty()) GTEST_SKIP() << "no GPU here: " << r.reason;
  for (const GpuInfo& g : r.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.total_memory, size_t{1} << 30) << g.name;
    EXPECT_GE(g.major, 7) << g.name << ": older than Volta";
  }
  EXPECT_NO_THROW(require_device("cuda:0"));
  EXPECT_THROW(require_device("cuda:" + std::to_string(r.gpus.size())), Error);
}
