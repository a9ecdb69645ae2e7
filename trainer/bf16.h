// bf16 storage: the upper 16 bits of an IEEE-754 float (bfloat16), the layout of CUDA's
// __nv_bfloat16 and torch.bfloat16, so device buffers of it go to cuBLASLt (CUDA_R_16BF) and
// compare with torch bit for bit. Arithmetic stays in float: load, compute, store.
// Rounding is to nearest even, every NaN becomes 0x7FC0 and values past bf16's largest round to
// infinity, as torch's c10::BFloat16 does (round_to_nearest_even), on both backends.
#pragma once
#include <cstdint>
#include <cstring>

#include "common/hd.h"

namespace pretrain {

struct bf16 {
  uint16_t bits = 0;

  PRETRAIN_HD static uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
#endif
  }
  PRETRAIN_HD static float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
#endif
  }
  PRETRAIN_HD static bf16 from_float(float x) {
    const uint32_t u = float_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16{0x7FC0};  // NaN
    return bf16{uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
  }
  PRETRAIN_HD float to_float() const { return bits_float(uint32_t(bits) << 16); }
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes, as __nv_bfloat16");

// x rounded to bf16 and back: what storing it loses.
PRETRAIN_HD inline float round_bf16(float x) { return bf16::from_float(x).to_float(); }

}  // namespace pretrain
