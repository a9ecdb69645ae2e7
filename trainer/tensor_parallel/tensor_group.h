// Collectives on device tensors over one group of the grid (the tensor group's activations): MPI
// on the pointers for CPU tensors (device memory is host memory there), NCCL on the device's
// stream for CUDA tensors, in order with the compute kernels. A group of one does nothing.
#pragma once
#include <cstdint>
#include <memory>

#include "trainer/backend.h"
#include "common/communicator.h"
#include "trainer/nccl.h"

namespace pretrain {

class TensorGroup {
 public:
  TensorGroup(const Communicator& comm, const Device& device);
  ~TensorGroup();
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const Communicator& comm() const { return comm_; }
  void all_reduce_sum(float* x, int64_t n);
  void all_reduce_sum(double* x, int64_t n);
  void all_reduce_max(float* x, int64_t n);
  void all_gather(const float* in, float* out, int64_t n_per_rank);
  void reduce_scatter_sum(const float* in, float* out, int64_t n_per_rank);

 private:
  const Communicator& comm_;
  const Device& device_;
  std::unique_ptr<DeviceCommunicator> nccl_;
};

}  // namespace pretrain
