// What the groups of the grid add to a step's gradients after the backward pass, and data
// parallel's part around the optimizer (docs/architecture.md, "Processes"):
//  - the tensor group: under sequence parallelism the LayerNorms' gradients are partial sums over
//    the rows each rank saw; the pipeline's first and last stage: the tied word embeddings' two
//    gradients, summed where the math needs it;
//  - the data group: every replica's gradients summed — in buckets while the backward pass runs
//    (GradientReducer) when the model is whole, in one all-reduce after it otherwise (a bucket's
//    thread may not call MPI while the pipeline and tensor groups do), or with ZeRO-1
//    reduce-scattered to the optimizer's shards and the updated weights all-gathered after the step.
// CPU tensors go over MPI as they are; CUDA tensors over NCCL (all-reduce), or staged through host
// memory (ZeRO-1's uneven blocks, the tied embeddings).
#pragma once
#include <memory>

#include "trainer/model.h"
#include "trainer/nccl.h"
#include "trainer/optimizer.h"
#include "trainer/parallel/grid.h"
#include "trainer/parallel/reducer.h"
#include "trainer/tensor_parallel/tensor_group.h"

namespace pretrain {

class DataParallel {
 public:
  DataParallel(const Grid& grid, TensorGroup& tensor, Model& model, const Optimizer& optimizer, double bucket_mb);
  // Before the last micro-batch's backward pass: its finished ranges go to the buckets.
  void attach();
  // After the backward pass: the model-parallel sums, then the data group's.
  void reduce_gradients();
  // After the optimizer step: ZeRO-1's updated shards to every data rank (nothing otherwise).
  void gather_weights(bool applied);

 private:
  void reduce_model_parallel();

  const Grid& grid_;
  TensorGroup& tensor_;
  Model& model_;
  const Optimizer& optimizer_;
  std::unique_ptr<DeviceCommunicator> nccl_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace pretrain
