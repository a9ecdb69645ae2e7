// What the tests of trainer/ops share (tests/trainer/<op>_test.cpp against double-precision
// definitions, tests/gpu/<op>_test.cpp CUDA against CPU): random tensors in either storage type,
// the two error measures, and for the GPU tests device copies poisoned with NaN before an op runs,
// so an element the kernel never wrote shows.
//
// Tolerances are sized from the storage's unit roundoff u (2⁻²⁴ fp32, 2⁻⁸ bf16: a stored result
// is within u of what the float arithmetic gave) and, where a sum of n terms is kept in float,
// n · 2⁻²⁴ of the terms' magnitudes.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/device.h"
#include "common/error.h"
#include "trainer/backend.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops_testing {

template <typename T>
inline constexpr double kUnitRoundoff = std::is_same_v<T, float> ? 0x1p-24 : 0x1p-8;

// n values ~ N(mean, stddev²), rounded to T.
template <typename T>
std::vector<T> random_tensor(size_t n, uint32_t seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937 gen{seed};
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<T> v(n);
  for (auto& x : v) x = ops::from_float<T>(normal(gen));
  return v;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = double(ops::to_float(v[i]));
  return d;
}

// The root mean square of a reference: a floor for element errors where values cross zero.
inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

template <typename T>
double value(T x) {
  if constexpr (std::is_same_v<T, double>)
    return x;
  else
    return double(ops::to_float(x));
}

// ‖got − want‖ / ‖want‖, and the largest |got − want| / (|want| + floor): how close in the whole and
// in the worst element (floor: the magnitude below which an element's error counts as absolute).
struct Errors {
  double norm = 0, worst = 0;
  size_t worst_index = 0;
  bool finite = true;
};
template <typename T>
Errors errors(const std::vector<T>& got, const std::vector<double>& want, double floor) {
  Errors e;
  double diff2 = 0, want2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = value(got[i]), d = g - want[i];
    if (!std::isfinite(g)) e.finite = false;
    diff2 += d * d, want2 += want[i] * want[i];
    const double w = std::fabs(d) / (std::fabs(want[i]) + floor);
    if (w > e.worst) e.worst = w, e.worst_index = i;
  }
  e.norm = want2 > 0 ? std::sqrt(diff2 / want2) : std::sqrt(diff2);
  return e;
}
// The same against another storage-typed result (the GPU's against the CPU's).
template <typename T>
  requires(!std::is_same_v<T, double>)
Errors errors(const std::vector<T>& got, const std::vector<T>& want, double floor) {
  return errors(got, to_double(want), floor);
}

#define PRETRAIN_EXPECT_ERRORS(e, norm_tol, worst_tol, what)                                                     \
  do {                                                                                                      \
    EXPECT_TRUE((e).finite) << what << ": NaN or Inf (an element not written?)";                            \
    EXPECT_LE((e).norm, norm_tol) << what;                                                                  \
    EXPECT_LE((e).worst, worst_tol) << what << " (worst at " << (e).worst_index << ")";                     \
  } while (0)

// ---------------------------------------------------------------- GPU tests
// Skips the test unless the build has CUDA and a GPU is visible.
#define PRETRAIN_REQUIRE_GPU()                                                 \
  do {                                                                         \
    const ::pretrain::DeviceReport report = ::pretrain::query_devices();       \
    if (!report.built_with_cuda) GTEST_SKIP() << "built without CUDA";         \
    if (report.gpus.empty()) GTEST_SKIP() << "no GPU here: " << report.reason; \
  } while (0)

template <typename T>
T poison() {
  if constexpr (std::is_same_v<T, float>)
    return NAN;
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16{0x7FC0};
  else
    return T(-7777);  // ints: a value no op writes
}

// A device copy of a host vector; poisoned(): the same size, every element NaN.
template <typename T>
DeviceBuffer<T> upload(const Device& d, const std::vector<T>& h) {
  DeviceBuffer<T> b(d, h.size());
  if (!h.empty()) b.from_host(h.data(), h.size());
  return b;
}
template <typename T>
DeviceBuffer<T> poisoned(const Device& d, size_t n) {
  return upload(d, std::vector<T>(n, poison<T>()));
}

}  // namespace pretrain::ops_testing
