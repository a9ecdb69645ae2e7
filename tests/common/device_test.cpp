// common/device.h: the one device-string parser, and a clear error for a device this machine lacks.
#include "common/device.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace pretrain::device_test {
namespace {

TEST(Device, CpuAlwaysWorksAndCudaFailsCleanlyWithoutGpu) {
  EXPECT_NO_THROW(require_device("cpu"));
  EXPECT_THROW(require_device("tpu"), UsageError);
  DeviceReport r = query_devices();
  if (r.gpus.empty()) {
    EXPECT_FALSE(r.reason.empty());
    EXPECT_THROW(require_device("cuda"), Error);
  } else {
    EXPECT_NO_THROW(require_device("cuda:0"));
  }
}

// The one device-string parser every stage uses (the loader, the trainer, require_device).
TEST(Device, ParsesCpuCudaAndCudaNAndRefusesTheRest) {
  EXPECT_FALSE(parse_device_spec("cpu").cuda);
  EXPECT_TRUE(parse_device_spec("cuda").cuda);
  EXPECT_EQ(parse_device_spec("cuda").index, 0);
  EXPECT_EQ(parse_device_spec("cuda:3").index, 3);
  for (const char* bad : {"tpu", "cuda3", "cuda:", "cuda:-1", "cuda:1x", "CPU", "", "cuda:99999999"}) {
    try {
      parse_device_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, TheLargestIndexParsesAndOneMoreIsRefused) {
  EXPECT_EQ(parse_device_spec("cuda:0").index, 0);
  EXPECT_EQ(parse_device_spec("cuda:1048575").index, 1048575);
  EXPECT_THROW(parse_device_spec("cuda:1048576"), UsageError);
  EXPECT_THROW(parse_device_spec(" cuda"), UsageError);
  // No machine has that many GPUs: an Error that names the device, never a crash.
  try {
    require_device("cuda:1048575");
    ADD_FAILURE() << "cuda:1048575 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda:1048575"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::device_test
