// The communicator for CUDA tensors (docs/architecture.md: NCCL for CUDA tensors, its unique id broadcast
// over MPI). One per process and device, over the same ranks as a Communicator; operations run on
// the device's stream. Only a CUDA build has it (trainer/nccl_cuda.cu); elsewhere create() says so.
#pragma once
#include <cstdint>
#include <memory>

#include "trainer/backend.h"
#include "common/communicator.h"

namespace pretrain {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  // In place on the device: data = Σ over ranks. It runs on the communicator's own stream after
  // what the device's stream has queued so far (an event), so the backward kernels queued after
  // it overlap with the reduction.
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // The device's stream waits for every reduction queued so far (an event; the host does not wait).
  virtual void join() = 0;
  // Tensor parallel's collectives, on the device's own stream (in order with the kernels around
  // them): in-place sum or max, equal-block all-gather and reduce-scatter.
  virtual void all_reduce_inline(float* data, int64_t n, bool max) = 0;
  virtual void all_reduce_inline(double* data, int64_t n) = 0;  // sum
  virtual void all_gather_inline(const float* in, float* out, int64_t n_per_rank) = 0;
  virtual void reduce_scatter_inline(const float* in, float* out, int64_t n_per_rank) = 0;

  // NCCL over comm's ranks, on device (which must be CUDA). Throws Error without NCCL.
  static std::unique_ptr<DeviceCommunicator> create(const Communicator& comm, const Device& device);
};

}  // namespace pretrain
