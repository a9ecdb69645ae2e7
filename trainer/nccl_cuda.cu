// NCCL for the CUDA backend: rank 0 makes the unique id, MPI broadcasts it, every rank joins the
// clique on its device; all-reduce runs on the trainer's stream, so it orders after the backward
// kernels that wrote the gradients without a host synchronisation.
#include <nccl.h>

#include <deque>
#include <mutex>
#include <vector>

#include "common/comm_watchdog.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "trainer/nccl.h"

namespace pretrain {
namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(cat("NCCL ", what, ": ", ncclGetErrorString(r)));
}

// The collectives queued and not yet done on the device, for the watchdog (common/comm_watchdog.h),
// as PyTorch's NCCL watchdog follows them. The host never waits inside NCCL's calls, which queue
// work on a stream: a stalled peer shows as a collective that never completes, and the host blocks
// later, wherever it next waits for the device. So each collective is followed by an event, and
// the watchdog's thread asks for the oldest one not reached yet. Nothing is recorded when the
// watchdog is off.
class Completions final : public CommWatchdog::DeviceProbe {
 public:
  Completions(int device, std::string group) : device_(device), group_(std::move(group)) {
    comm_watchdog().add_probe(this);
  }
  ~Completions() override {
    comm_watchdog().remove_probe(this);
    for (const Queued& q : queue_) cudaEventDestroy(q.event);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  void queued(cudaStream_t stream, const char* operation) {
    CommWatchdog& watchdog = comm_watchdog();
    if (watchdog.timeout() == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) forget_completed();
    cudaEvent_t event = nullptr;
    if (!free_.empty()) {
      event = free_.back(), free_.pop_back();
    } else {
      cuda_check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "event create");
    }
    cuda_check(cudaEventRecord(event, stream), "event record");
    queue_.push_back({event, watchdog.now(), operation});
  }

  std::optional<CommWatchdog::Pending> oldest_pending() override {
    std::lock_guard<std::mutex> lock(mu_);
    cudaSetDevice(device_);  // the watchdog's thread's device
    forget_completed();
    if (queue_.empty()) return std::nullopt;
    return CommWatchdog::Pending{queue_.front().since_ns, cat("NCCL ", queue_.front().operation, " on cuda:", device_),
                                 group_};
  }

 private:
  struct Queued {
    cudaEvent_t event;
    int64_t since_ns;
    const char* operation;
  };
  static constexpr size_t kMaxQueued = 4096;

  void forget_completed() {  // holding mu_
    while (!queue_.empty() && cudaEventQuery(queue_.front().event) != cudaErrorNotReady) {
      free_.push_back(queue_.front().event);
      queue_.pop_front();
    }
    cudaGetLastError();  // an error a query returned is the stream's: the trainer's next call reports it
  }

  const int device_;
  const std::string group_;
  std::mutex mu_;
  std::deque<Queued> queue_;
  std::vector<cudaEvent_t> free_;
};

class Nccl final : public DeviceCommunicator {
 public:
  Nccl(const Communicator& comm, const Device& device)
      : compute_(static_cast<cudaStream_t>(device.stream)), completions_(device.index, comm.description()) {
    ncclUniqueId id{};
    if (comm.rank() == 0) check(ncclGetUniqueId(&id), "get unique id");
    comm.broadcast(&id, sizeof id, 0);
    {  // it waits for every rank
      const CommWatchdog::Call watched(comm_watchdog(), "NCCL init", comm.description().c_str());
      check(ncclCommInitRank(&comm_, comm.size(), id, comm.rank()), "init rank");
    }
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
    completions_.queued(stream_, "all-reduce");
  }
  void all_reduce_inline(float* data, int64_t n, bool max) override {
    check(ncclAllReduce(data, data, size_t(n), ncclFloat, max ? ncclMax : ncclSum, comm_, compute_), "all-reduce");
    completions_.queued(compute_, "all-reduce");
  }
  void all_reduce_inline(double* data, int64_t n) override {
    check(ncclAllReduce(data, data, size_t(n), ncclDouble, ncclSum, comm_, compute_), "all-reduce");
    completions_.queued(compute_, "all-reduce");
  }
  void all_gather_inline(const float* in, float* out, int64_t n) override {
    check(ncclAllGather(in, out, size_t(n), ncclFloat, comm_, compute_), "all-gather");
    completions_.queued(compute_, "all-gather");
  }
  void reduce_scatter_inline(const float* in, float* out, int64_t n) override {
    check(ncclReduceScatter(in, out, size_t(n), ncclFloat, ncclSum, comm_, compute_), "reduce-scatter");
    completions_.queued(compute_, "reduce-scatter");
  }
  void join() override {
    cuda_check(cudaEventRecord(reduced_, stream_), "event record");
    cuda_check(cudaStreamWaitEvent(compute_, reduced_, 0), "stream wait");
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t compute_, stream_ = nullptr;
  cudaEvent_t computed_ = nullptr, reduced_ = nullptr;
  Completions completions_;
};

}  // namespace

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(const Communicator& comm, const Device& device) {
  if (!device.cuda) throw Error("NCCL is for CUDA tensors: the device is the CPU");
  return std::make_unique<Nccl>(comm, device);
}

}  // namespace pretrain
