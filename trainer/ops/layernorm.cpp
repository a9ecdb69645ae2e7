#include "trainer/ops/layernorm.h"

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {

template <typename T>
void layernorm_forward(const Device& d, const LayerNormForward<T>& a) {
  if (a.N <= 0) return;
  if (!a.sum && a.residual) throw Error("layernorm_forward: a residual add needs `sum` to keep the LayerNorm's input");
  PRETRAIN_OPS_DISPATCH(d, cuda::layernorm_forward(d, a), cpu::layernorm_forward(a));
}

template <typename T>
void layernorm_backward(const Device& d, const LayerNormBackward<T>& a) {
  if (a.N <= 0) return;
  PRETRAIN_OPS_DISPATCH(d, cuda::layernorm_backward(d, a), cpu::layernorm_backward(a));
}

#define PRETRAIN_INSTANTIATE(T)                                                         \
  template void layernorm_forward<T>(const Device&, const LayerNormForward<T>&); \
  template void layernorm_backward<T>(const Device&, const LayerNormBackward<T>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops
