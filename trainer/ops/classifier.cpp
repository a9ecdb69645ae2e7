#include "trainer/ops/classifier.h"

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {
namespace {
template <typename T>
void check_shape(const FusedClassifier<T>& a, const char* op) {
  if (a.V < 0 || a.V > a.ld) throw Error(cat(op, ": ", a.V, " real columns in rows of ", a.ld));
}
}  // namespace

template <typename T>
void classifier_forward_backward(const Device& d, const FusedClassifier<T>& a) {
  if (a.N <= 0) return;
  check_shape(a, "classifier_forward_backward");
  PRETRAIN_OPS_DISPATCH(d, cuda::classifier(d, a, nullptr, nullptr), cpu::classifier_forward_backward(a));
}

template <typename T>
void classifier_shard_stats(const Device& d, const FusedClassifier<T>& a, ClassifierRowStats* stats) {
  if (a.N <= 0) return;
  check_shape(a, "classifier_shard_stats");
  PRETRAIN_OPS_DISPATCH(d, cuda::classifier(d, a, stats, nullptr),
                        cpu_launch(a.N, [&](int64_t r) { stats[r] = cpu::row_stats(a, r); }));
}

void classifier_combine_stats(const Device& d, ClassifierRowStats* merged, const ClassifierRowStats* gathered,
                              int64_t ranks, int64_t N) {
  if (N <= 0) return;
  PRETRAIN_OPS_DISPATCH(d, cuda::classifier_combine_stats(d, merged, gathered, ranks, N), cpu_launch(N, [&](int64_t r) {
                          ClassifierRowStats s;
                          for (int64_t k = 0; k < ranks; ++k) s = combine(s, gathered[k * N + r]);
                          merged[r] = s;
                        }));
}

template <typename T>
void classifier_shard_backward(const Device& d, const FusedClassifier<T>& a, const ClassifierRowStats* merged) {
  if (a.N <= 0) return;
  check_shape(a, "classifier_shard_backward");
  PRETRAIN_OPS_DISPATCH(d, cuda::classifier(d, a, nullptr, merged),
                        cpu_launch(a.N, [&](int64_t r) { cpu::row_backward(a, r, merged[r]); }));
}

#define PRETRAIN_INSTANTIATE(T)                                                                          \
  template void classifier_forward_backward<T>(const Device&, const FusedClassifier<T>&);               \
  template void classifier_shard_stats<T>(const Device&, const FusedClassifier<T>&, ClassifierRowStats*); \
  template void classifier_shard_backward<T>(const Device&, const FusedClassifier<T>&, const ClassifierRowStats*);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops
