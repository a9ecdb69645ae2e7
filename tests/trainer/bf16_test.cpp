// bf16 (trainer/bf16.h) against the rounding torch's c10::BFloat16 does, written here in double:
// the nearest bf16 value, ties to the even one; NaN to 0x7FC0; past the largest, infinity.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "trainer/bf16.h"

namespace pretrain::bf16_test {
namespace {

// The bf16 value nearest to x by exhaustive comparison with its two neighbours (double arithmetic).
uint16_t nearest(float x) {
  const uint32_t u = bf16::float_bits(x);
  const uint16_t down = uint16_t(u >> 16), up = uint16_t(down + 1);
  const double lo = bf16{down}.to_float(), d = x;
  if ((up & 0x7F80u) == 0x7F80u && (up & 0x7Fu) == 0) {  // up is ±infinity: the midpoint decides
    const double hi = std::ldexp(1.0, 128) * (x < 0 ? -1 : 1);
    return std::fabs(d - lo) < std::fabs(hi - d) || (std::fabs(d - lo) == std::fabs(hi - d) && !(down & 1)) ? down : up;
  }
  const double hi = bf16{up}.to_float();
  const double a = std::fabs(d - lo), b = std::fabs(hi - d);
  return a < b || (a == b && !(down & 1)) ? down : up;
}

TEST(Bf16, RoundsToNearestEvenOnRandomFloats) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float x = bf16::bits_float(bits(rng));
    if (std::isnan(x)) continue;
    ASSERT_EQ(bf16::from_float(x).bits, nearest(x)) << x;
  }
}

TEST(Bf16, TiesGoToEvenAndExactValuesStay) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: even is 1.
  EXPECT_EQ(bf16::from_float(1.0f + std::ldexp(1.0f, -8)).to_float(), 1.0f);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(bf16::from_float(1.0f + 3 * std::ldexp(1.0f, -8)).to_float(), 1.0f + std::ldexp(1.0f, -6));
  for (float x : {0.0f, 1.0f, -2.5f, 0.15625f, std::ldexp(1.0f, -133)}) EXPECT_EQ(round_bf16(x), x);  // bf16 values
  EXPECT_TRUE(std::signbit(round_bf16(-0.0f)));
}

TEST(Bf16, NanInfinityAndOverflowAsTorch) {
  EXPECT_EQ(bf16::from_float(std::numeric_limits<float>::quiet_NaN()).bits, 0x7FC0);
  EXPECT_EQ(bf16::from_float(-std::numeric_limits<float>::quiet_NaN()).bits, 0x7FC0);
  EXPECT_EQ(bf16::from_float(std::numeric_limits<float>::infinity()).bits, 0x7F80);
  EXPECT_EQ(bf16::from_float(-std::numeric_limits<float>::infinity()).bits, 0xFF80);
  EXPECT_TRUE(std::isinf(round_bf16(std::numeric_limits<float>::max())));
  EXPECT_EQ(round_bf16(3.3895313892515355e38f), 3.3895313892515355e38f);  // bf16's largest
}

}  // namespace
}  // namespace pretrain::bf16_test
