// NCCL for the CUDA backend: rank 0 makes the unique id, MPI broadcasts it, every rank joins the
// clique on its device; all-reduce runs on the trainer's stream, so it orders after the backward
// kernels that wrote the gradients without a host synchronisation.
#include <nccl.h>

#include "common/error.h"
#include "trainer/nccl.h"

namespace pretrain {
namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(cat("NCCL ", what, ": ", ncclGetErrorString(r)));
}

class Nccl final : public DeviceCommunicator {
 public:
  Nccl(const Communicator& comm, const Device& device) : stream_(static_cast<cudaStream_t>(device.stream)) {
    ncclUniqueId id{};
    if (comm.rank() == 0) check(ncclGetUniqueId(&id), "get unique id");
    comm.broadcast(&id, sizeof id, 0);
    check(ncclCommInitRank(&comm_, comm.size(), id, comm.rank()), "init rank");
  }
  ~Nccl() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  void all_reduce_sum(float* data, int64_t n) override {
    check(ncclAllReduce(data, data, size_t(n), ncclFloat, ncclSum, comm_, stream_), "all-reduce");
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(const Communicator& comm, const Device& device) {
  if (!device.cuda) throw Error("NCCL is for CUDA tensors: the device is the CPU");
  return std::make_unique<Nccl>(comm, device);
}

}  // namespace pretrain
