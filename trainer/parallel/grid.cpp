#include "trainer/parallel/grid.h"

#include "common/error.h"

namespace pretrain {

GridCoordinates grid_coordinates(int rank, int tensor_size, int data_size) {
  return {rank % tensor_size, (rank / tensor_size) % data_size, rank / (tensor_size * data_size)};
}

int grid_rank(const GridCoordinates& c, int tensor_size, int data_size) {
  return (c.pipeline * data_size + c.data) * tensor_size + c.tensor;
}

int data_parallel_size(int world, const GridShape& s) {
  if (s.tensor < 1 || s.pipeline < 1 || s.virtual_stages < 1)
    throw UsageError(cat("--tensor-parallel (", s.tensor, "), --pipeline-parallel (", s.pipeline,
                         ") and --virtual-stages (", s.virtual_stages, ") must be at least 1"));
  if (world % (s.tensor * s.pipeline) != 0)
    throw UsageError(cat(world, " ranks do not divide into tensor ", s.tensor, " × pipeline ", s.pipeline, " (= ",
                         s.tensor * s.pipeline, "): data parallel = ranks / (tensor × pipeline) must be whole"));
  if (s.virtual_stages > 1 && s.pipeline == 1)
    throw UsageError("--virtual-stages needs --pipeline-parallel > 1 (the interleaved schedule)");
  if (s.sequence_parallel && s.tensor == 1)
    throw UsageError("--sequence-parallel needs --tensor-parallel > 1");
  return world / (s.tensor * s.pipeline);
}

ModelShard model_shard(const ModelConfig& c, const GridShape& shape, const GridCoordinates& at) {
  const int64_t p = shape.pipeline, v = shape.virtual_stages;
  if (c.layers % (p * v) != 0)
    throw UsageError(cat("the model's ", c.layers, " layers do not split evenly over --pipeline-parallel ", p,
                         " × --virtual-stages ", v, " (= ", p * v, ")"));
  ModelShard s;
  s.tensor_rank = at.tensor, s.tensor_size = shape.tensor;
  s.sequence_parallel = shape.sequence_parallel;
  const int64_t per = c.layers / (p * v);
  for (int64_t chunk = 0; chunk < v; ++chunk) {
    const int64_t k = chunk * p + at.pipeline;
    s.chunks.emplace_back(k * per, (k + 1) * per);
  }
  s.embeddings = at.pipeline == 0, s.heads = at.pipeline == p - 1;
  return s;
}

Grid::Grid(const Communicator& world, const GridShape& shape) : world_(world), shape_(shape) {
  data_size_ = data_parallel_size(world.size(), shape);
  me_ = grid_coordinates(world.rank(), shape.tensor, data_size_);
  const int t = shape.tensor, d = data_size_;
  // Color: the coordinates the group's members share; key: the one that varies.
  tensor_ = world.split(me_.pipeline * d + me_.data, me_.tensor, "tensor");
  data_ = world.split(me_.pipeline * t + me_.tensor, me_.data, "data");
  pipeline_ = world.split(me_.data * t + me_.tensor, me_.pipeline, "pipeline");
  model_ = world.split(me_.data, me_.pipeline * t + me_.tensor, "model");
  const bool ends = shape.pipeline > 1 && (first_stage() || last_stage());
  // Middle stages (and pipeline 1) get groups of their own: color past every shared one.
  embedding_ = world.split(ends ? me_.data * t + me_.tensor : d * t + world.rank(), me_.pipeline, "embedding");
}

std::string Grid::describe() const {
  return cat("tensor ", shape_.tensor, " × pipeline ", shape_.pipeline, " × data ", data_size_, " (", world_.size(),
             world_.size() == 1 ? " rank)" : " ranks)");
}

}  // namespace pretrain
