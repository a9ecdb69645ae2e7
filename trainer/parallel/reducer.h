// Data parallel's gradient reduction in buckets while the backward pass goes on (as PyTorch DDP
// does, 25 MB buckets by default). Model::set_grads_ready hands over each range of the parameter
// arena whose gradients are final; adjacent ranges fill a bucket, and a full bucket is reduced at
// once: on the CPU by a communication thread running MPI all-reduces in order (MPI is initialised
// THREAD_SERIALIZED, and the training thread makes no MPI call until finish() returns), on CUDA by
// NCCL on a stream of its own that waits on an event of the trainer's stream, so later backward
// kernels overlap with it. finish() reduces what is left and makes the trainer wait for every bucket.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "trainer/model.h"
#include "trainer/nccl.h"

namespace pretrain {

class GradientReducer {
 public:
  GradientReducer(const Communicator& comm, DeviceCommunicator* nccl, Model& model, int64_t bucket_floats);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void ready(int64_t begin, int64_t end);  // the backward pass's ranges, from the arena's end down
  void finish();                           // every gradient summed over the ranks; rethrows an MPI error
  int64_t buckets() const { return buckets_; }  // reduced so far (for tests and logs)

 private:
  void submit(int64_t begin, int64_t end);
  void run();

  const Communicator& comm_;
  DeviceCommunicator* nccl_;
  Model& model_;
  int64_t bucket_floats_;
  int64_t open_begin_ = -1, open_end_ = -1;  // the bucket being filled
  int64_t buckets_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, int64_t>> queue_;
  int64_t in_flight_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace pretrain
