#include "trainer/tensor_parallel/tensor_group.h"

namespace pretrain {

TensorGroup::TensorGroup(const Communicator& comm, const Device& device) : comm_(comm), device_(device) {
  if (device.cuda && comm.size() > 1) nccl_ = DeviceCommunicator::create(comm, device);
}

TensorGroup::~TensorGroup() = default;

void TensorGroup::all_reduce_sum(float* x, int64_t n) {
  if (size() == 1) return;
  if (nccl_) return nccl_->all_reduce_inline(x, n, false);
  comm_.all_reduce_sum(x, n);
}

void TensorGroup::all_reduce_sum(double* x, int64_t n) {
  if (size() == 1) return;
  if (nccl_) return nccl_->all_reduce_inline(x, n);
  comm_.all_reduce_sum(x, n);
}

void TensorGroup::all_reduce_max(float* x, int64_t n) {
  if (size() == 1) return;
  if (nccl_) return nccl_->all_reduce_inline(x, n, true);
  comm_.all_reduce_max(x, n);
}

void TensorGroup::all_gather(const float* in, float* out, int64_t n) {
  if (nccl_) return nccl_->all_gather_inline(in, out, n);
  if (device_.cuda) return device_copy(device_, out, in, n);  // a group of one
  comm_.all_gather_equal(in, out, n);
}

void TensorGroup::reduce_scatter_sum(const float* in, float* out, int64_t n) {
  if (nccl_) return nccl_->reduce_scatter_inline(in, out, n);
  if (device_.cuda) return device_copy(device_, out, in, n);
  comm_.reduce_scatter_equal(in, out, n);
}

}  // namespace pretrain
