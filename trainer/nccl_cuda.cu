// NCCL for the CUDA backend: rank 0 makes the unique id, MPI broadcasts it, every rank joins the
// clique on its device; all-reduce runs on the trainer's stream, so it orders after the backward
// kernels that wrote the gradients without a host synchronisation.
#include <nccl.h>

#include "common/cuda_check.h"
#include "common/error.h"
#include "trainer/nccl.h"

namespace pretrain {
namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(cat("NCCL ", what, ": ", ncclGetErrorString(r)));
}

class Nccl final : public DeviceCommunicator {
 public:
  Nccl(const Communicator& comm, const Device& device) : compute_(static_cast<cudaStream_t>(device.stream)) {
    ncclUniqueId id{};
    if (comm.rank() == 0) check(ncclGetUniqueId(&id), "get unique id");
    comm.broadcast(&id, sizeof id, 0);
    check(ncclCommInitRank(&comm_, comm.size(), id, comm.rank()), "init rank");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream create");
    cuda_check(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming), "event create");
    cuda_check(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming), "event create");
  }
  ~Nccl() override {
    if (comm_) ncclCommDestroy(comm_);
    cudaEventDestroy(computed_), cudaEventDestroy(reduced_), cudaStreamDestroy(stream_);
  }
  void all_reduce_sum(float* data, int64_t n) override {
    cuda_check(cudaEventRecord(computed_, compute_), "event record");  // the gradients' kernels, queued so far
    cuda_check(cudaStreamWaitEvent(stream_, computed_, 0), "stream wait");
    check(ncclAllReduce(data, data, size_t(n), ncclFloat, ncclSum, comm_, stream_), "all-reduce");
  }
  void all_reduce_inline(float* data, int64_t n, bool max) override {
    check(ncclAllReduce(data, data, size_t(n), ncclFloat, max ? ncclMax : ncclSum, comm_, compute_), "all-reduce");
  }
  void all_reduce_inline(double* data, int64_t n) override {
    check(ncclAllReduce(data, data, size_t(n), ncclDouble, ncclSum, comm_, compute_), "all-reduce");
  }
  void all_gather_inline(const float* in, float* out, int64_t n) override {
    check(ncclAllGather(in, out, size_t(n), ncclFloat, comm_, compute_), "all-gather");
  }
  void reduce_scatter_inline(const float* in, float* out, int64_t n) override {
    check(ncclReduceScatter(in, out, size_t(n), ncclFloat, ncclSum, comm_, compute_), "reduce-scatter");
  }
  void join() override {
    cuda_check(cudaEventRecord(reduced_, stream_), "event record");
    cuda_check(cudaStreamWaitEvent(compute_, reduced_, 0), "stream wait");
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t compute_, stream_ = nullptr;
  cudaEvent_t computed_ = nullptr, reduced_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(const Communicator& comm, const Device& device) {
  if (!device.cuda) throw Error("NCCL is for CUDA tensors: the device is the CPU");
  return std::make_unique<Nccl>(comm, device);
}

}  // namespace pretrain
