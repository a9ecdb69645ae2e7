// TEMPORARY stub (replaced by the comm branch's implementation at merge).
#pragma once
#include <cstdint>
#include <cstring>

#include "trainer/backend.h"
#include "trainer/communicator.h"

namespace pretrain {

class TensorGroup {
 public:
  TensorGroup(const Communicator& comm, const Device& device) : comm_(comm), device_(device) {}
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const Communicator& comm() const { return comm_; }
  void all_reduce_sum(float* x, int64_t n) { comm_.all_reduce_sum(x, n); }
  void all_reduce_max(float*, int64_t) {}
  void all_gather(const float* in, float* out, int64_t n) { if (in != out) std::memcpy(out, in, size_t(n) * 4); }
  void reduce_scatter_sum(const float* in, float* out, int64_t n) { if (in != out) std::memcpy(out, in, size_t(n) * 4); }

 private:
  const Communicator& comm_;
  const Device& device_;
};

}  // namespace pretrain
