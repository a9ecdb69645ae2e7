#include "trainer/parallel/data_parallel.h"

#include <vector>

namespace pretrain {

DataParallel::DataParallel(const Grid& grid, TensorGroup& tensor, Model& model, const Optimizer& optimizer,
                           double bucket_mb)
    : grid_(grid), tensor_(tensor), model_(model), optimizer_(optimizer) {
  const Communicator& data = grid.data();
  if (!data.distributed()) return;
  // CUDA gradients reduce over NCCL (ZeRO-1's reduce-scatter and all-gather go through host memory
  // over MPI: NCCL's need equal blocks, the optimizer's shards differ by one element).
  if (model.device().cuda) nccl_ = DeviceCommunicator::create(data, model.device());
  const bool whole_model = grid.tensor_size() == 1 && grid.pipeline_size() == 1;
  if (whole_model && !optimizer.sharded() && bucket_mb > 0)
    reducer_ = std::make_unique<GradientReducer>(data, nccl_.get(), model, int64_t(bucket_mb * 1e6 / sizeof(float)));
}

void DataParallel::attach() {
  if (reducer_) model_.set_grads_ready([this](int64_t b, int64_t e) { reducer_->ready(b, e); });
}

void DataParallel::reduce_model_parallel() {
  for (const ParamInfo& p : model_.params())
    if (p.sequence_partial) tensor_.all_reduce_sum(model_.grads() + p.offset, p.numel);
  if (grid_.pipeline_size() == 1 || grid_.embedding().size() == 1) return;
  const std::string wte = model_.config().kind == ModelKind::gpt ? "transformer.wte.weight"
                                                                  : "bert.embeddings.word_embeddings.weight";
  const ParamInfo& p = model_.param(wte);
  std::vector<float> host(static_cast<size_t>(p.numel));
  copy_to_host(model_.device(), host.data(), model_.grads() + p.offset, host.size() * sizeof(float));
  grid_.embedding().all_reduce_sum(host.data(), p.numel);
  copy_to_device(model_.device(), model_.grads() + p.offset, host.data(), host.size() * sizeof(float));
}

void DataParallel::reduce_gradients() {
  model_.set_grads_ready(nullptr);
  reduce_model_parallel();
  const Communicator& data = grid_.data();
  if (!data.distributed()) return;
  const Device& d = model_.device();
  const int64_t n = model_.num_parameters();
  if (optimizer_.sharded()) {
    // ZeRO-1: each rank receives the sum of its shard only (half an all-reduce's traffic).
    const int64_t lo = optimizer_.shard_begin(), len = optimizer_.shard_end() - lo;
    std::vector<float> full, shard(static_cast<size_t>(len));
    const float* send = model_.grads();  // CPU gradients go to MPI as they are; CUDA ones through the host
    if (d.cuda) {
      full.resize(static_cast<size_t>(n));
      copy_to_host(d, full.data(), model_.grads(), full.size() * sizeof(float));
      send = full.data();
    }
    data.reduce_scatter_sum(send, shard.data(), optimizer_.shard_sizes());
    copy_to_device(d, model_.grads() + lo, shard.data(), shard.size() * sizeof(float));
  } else if (reducer_) {
    reducer_->finish();
  } else if (nccl_) {
    nccl_->all_reduce_sum(model_.grads(), n);
    nccl_->join();
  } else {
    data.all_reduce_sum(model_.grads(), n);
  }
}

void DataParallel::gather_weights(bool applied) {
  if (!optimizer_.sharded() || !applied) return;
  const Communicator& data = grid_.data();
  const Device& d = model_.device();
  if (!d.cuda) return data.all_gather_blocks(model_.weights(), optimizer_.shard_sizes());
  std::vector<float> host(static_cast<size_t>(model_.num_parameters()));
  copy_to_host(d, host.data(), model_.weights(), host.size() * sizeof(float));
  data.all_gather_blocks(host.data(), optimizer_.shard_sizes());
  copy_to_device(d, model_.weights(), host.data(), host.size() * sizeof(float));
}

}  // namespace pretrain
