// trainer/nccl.h without a GPU: asking for NCCL is a clear error, never a crash. A build without
// CUDA has no NCCL at all (nccl_nocuda.cpp); a CUDA build refuses CPU tensors, which go over MPI.
// NCCL itself runs in tests/gpu.
#include "trainer/nccl.h"

#include <gtest/gtest.h>

#include <string>

#include "common/communicator.h"
#include "common/device.h"
#include "test_util.h"

namespace pretrain::nccl_test {
namespace {

TEST(DeviceCommunicator, WithoutCudaTensorsThereIsNoNcclAndTheErrorSaysWhy) {
  const Device cpu{};
  const std::string e = testing::error_message([&] { DeviceCommunicator::create(Communicator::world(), cpu); });
  if (query_devices().built_with_cuda)
    EXPECT_EQ(e, "NCCL is for CUDA tensors: the device is the CPU");
  else
    EXPECT_EQ(e, "this build has no CUDA backend, so no NCCL");
}

// The same question with a CUDA device, which only a build without CUDA can answer without one.
TEST(DeviceCommunicator, ABuildWithoutCudaHasNoNcclForACudaDeviceEither) {
  if (query_devices().built_with_cuda) GTEST_SKIP() << "this build has NCCL (tests/gpu run it)";
  Device gpu;
  gpu.cuda = true;
  EXPECT_EQ(testing::error_message([&] { DeviceCommunicator::create(Communicator::world(), gpu); }),
            "this build has no CUDA backend, so no NCCL");
}

}  // namespace
}  // namespace pretrain::nccl_test
