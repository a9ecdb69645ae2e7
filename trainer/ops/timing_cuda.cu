// Event timing on the device's stream (the op: timing.h).
#include <algorithm>
#include <vector>

#include "trainer/ops/cuda_util.cuh"
#include "trainer/ops/timing.h"

namespace pretrain::ops::cuda {

double median_ms(const Device& d, int warmup, int runs, const std::function<void()>& op) {
  cudaStream_t stream = stream_of(d);
  for (int i = 0; i < warmup; ++i) op();
  std::vector<cudaEvent_t> events(size_t(2 * runs));
  for (cudaEvent_t& e : events) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < runs; ++i) {
    cuda_check(cudaEventRecord(events[size_t(2 * i)], stream), "cudaEventRecord");
    op();
    cuda_check(cudaEventRecord(events[size_t(2 * i + 1)], stream), "cudaEventRecord");
  }
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    float t = 0;
    cuda_check(cudaEventElapsedTime(&t, events[size_t(2 * i)], events[size_t(2 * i + 1)]), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  return ms[size_t(runs / 2)];
}

}  // namespace pretrain::ops::cuda
