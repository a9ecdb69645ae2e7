#include "trainer/ops/bias_gelu.h"

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {

template <typename T>
void bias_gelu_forward(const Device& d, const BiasGeluForward<T>& a) {
  if (a.N * a.C <= 0) return;
  PRETRAIN_OPS_DISPATCH(d, cuda::bias_gelu_forward(d, a), cpu::bias_gelu_forward(a));
}

template <typename T>
void bias_gelu_backward(const Device& d, const BiasGeluBackward<T>& a) {
  if (a.N * a.C <= 0) return;
  if (a.gelu && (!a.dinp || !a.pre)) throw Error("bias_gelu_backward: the GELU's backward needs dinp and pre");
  PRETRAIN_OPS_DISPATCH(d, cuda::bias_gelu_backward(d, a), cpu::bias_gelu_backward(a));
}

#define PRETRAIN_INSTANTIATE(T)                                                        \
  template void bias_gelu_forward<T>(const Device&, const BiasGeluForward<T>&); \
  template void bias_gelu_backward<T>(const Device&, const BiasGeluBackward<T>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops
