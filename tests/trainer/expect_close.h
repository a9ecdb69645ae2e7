// How the trainer tests compare an fp32 result with its definition computed in double precision.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace pretrain::testing {

// `got` within `tol` of `want`, relative to |want| + 1 (absolute near zero).
inline void expect_close(double want, double got, double tol, const std::string& what) {
  EXPECT_NEAR(got, want, tol * (1 + std::fabs(want))) << what;
}

}  // namespace pretrain::testing
