#include "trainer/ops/softmax.h"

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {

template <typename S>
void softmax_forward(const Device& d, const SoftmaxForward<S>& a) {
  if (a.B * a.NH * a.T <= 0) return;
  PRETRAIN_OPS_DISPATCH(d, cuda::softmax_forward(d, a), cpu::softmax_forward(a));
}

template <typename S>
void softmax_backward(const Device& d, const SoftmaxBackward<S>& a) {
  if (a.rows <= 0) return;
  PRETRAIN_OPS_DISPATCH(d, cuda::softmax_backward(d, a), cpu::softmax_backward(a));
}

#define PRETRAIN_INSTANTIATE(S)                                                    \
  template void softmax_forward<S>(const Device&, const SoftmaxForward<S>&); \
  template void softmax_backward<S>(const Device&, const SoftmaxBackward<S>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops
