// Timing an op as METHOD.md asks (scripts/bench/bench_kernels.cpp): warm-up runs first, then each
// timed run bracketed by device events on the device's stream (CUDA) or the steady clock after a
// synchronize (CPU); the median of the runs, in milliseconds.
#pragma once
#include <functional>

#include "trainer/backend.h"

namespace pretrain::ops {

double median_ms(const Device& d, int warmup, int runs, const std::function<void()>& op);

namespace cuda {
double median_ms(const Device& d, int warmup, int runs, const std::function<void()>& op);
}

}  // namespace pretrain::ops
