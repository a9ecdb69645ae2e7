#include "trainer/ops/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {

double median_ms(const Device& d, int warmup, int runs, const std::function<void()>& op) {
  if (runs <= 0) throw Error("median_ms: no runs");
#if PRETRAIN_HAVE_CUDA
  if (d.cuda) return cuda::median_ms(d, warmup, runs, op);
#else
  if (d.cuda) throw Error("trainer/ops: built without CUDA");
#endif
  for (int i = 0; i < warmup; ++i) op();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  return ms[size_t(runs / 2)];
}

}  // namespace pretrain::ops
