// A CPU-only build has no NCCL: data parallel runs over MPI only.
#include "common/error.h"
#include "trainer/nccl.h"

namespace pretrain {

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(const Communicator&, const Device&) {
  throw Error("this build has no CUDA backend, so no NCCL");
}

}  // namespace pretrain
