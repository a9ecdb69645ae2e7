// The data × tensor × pipeline grid of ranks (docs/architecture.md, "Processes"; Megatron-LM's
// core/parallel_state.py): every rank's coordinates and the groups it belongs to, each a
// sub-communicator of the world. Megatron's default order: tensor fastest, then data, then
// pipeline, so a tensor group is consecutive ranks and stays inside a node.
#pragma once
#include <memory>
#include <string>

#include "common/communicator.h"
#include "trainer/model.h"

namespace pretrain {

struct GridShape {
  int tensor = 1, pipeline = 1, virtual_stages = 1;
  bool sequence_parallel = false;
};

struct GridCoordinates {
  int tensor = 0, data = 0, pipeline = 0;
  bool operator==(const GridCoordinates&) const = default;
};
GridCoordinates grid_coordinates(int rank, int tensor_size, int data_size);
int grid_rank(const GridCoordinates& c, int tensor_size, int data_size);
// data = world / (tensor · pipeline); throws UsageError naming the numbers when that does not divide.
int data_parallel_size(int world, const GridShape& shape);

// The part of the model the rank at `at` holds: its tensor rank, and the layers of its virtual
// stages (chunk c of stage s is virtual stage c·p + s; the layers split evenly over the p·v
// virtual stages). Throws UsageError when they do not split evenly. ModelShard::tensor is left for
// the caller to set.
ModelShard model_shard(const ModelConfig& c, const GridShape& shape, const GridCoordinates& at);

class Grid {
 public:
  // A collective over the world (every rank splits its groups in the same order). Each group is
  // named after its role ("the data group (world ranks 0, 2)" in the watchdog's messages).
  Grid(const Communicator& world, const GridShape& shape);
  const GridShape& shape() const { return shape_; }
  int tensor_size() const { return shape_.tensor; }
  int pipeline_size() const { return shape_.pipeline; }
  int data_size() const { return data_size_; }
  int virtual_stages() const { return shape_.virtual_stages; }
  bool sequence_parallel() const { return shape_.sequence_parallel; }
  int tensor_rank() const { return me_.tensor; }
  int data_rank() const { return me_.data; }
  int pipeline_rank() const { return me_.pipeline; }
  bool first_stage() const { return me_.pipeline == 0; }
  bool last_stage() const { return me_.pipeline == shape_.pipeline - 1; }
  const Communicator& world() const { return world_; }
  const Communicator& tensor() const { return *tensor_; }      // my (data, pipeline)
  const Communicator& data() const { return *data_; }          // my (tensor, pipeline)
  const Communicator& pipeline() const { return *pipeline_; }  // my (tensor, data); rank = stage
  const Communicator& model() const { return *model_; }        // my data rank: tensor × pipeline
  // The first and the last stage of my (tensor, data), which share the tied word embeddings: two
  // ranks there when pipeline > 1, a group of one elsewhere.
  const Communicator& embedding() const { return *embedding_; }
  std::string describe() const;  // "tensor 2 × pipeline 2 × data 2 (8 ranks)"

 private:
  const Communicator& world_;
  GridShape shape_;
  int data_size_ = 1;
  GridCoordinates me_;
  std::unique_ptr<Communicator> tensor_, data_, pipeline_, model_, embedding_;
};

}  // namespace pretrain
