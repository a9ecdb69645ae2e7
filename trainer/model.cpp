// The Model put together (see model.h): its parameter arenas laid out from this rank's shard of
// the parameter list (model_params.cpp), the activation plan (model_plan.cpp) and the passes
// (model_passes.cpp, model_heads.cpp) that run on them.
#include "trainer/model.h"

#include "common/error.h"
#include "trainer/model_plan.h"

namespace pretrain {

Model::Model(const ModelConfig& config, const ModelShard& shard, Unallocated)
    : config_(config), shard_(shard), plan_(new Plan) {
  lay_out(false);
}

Model::Model(const ModelConfig& config, const Device& device, const ModelShard& shard)
    : config_(config), device_(device), shard_(shard), plan_(new Plan) {
  lay_out(true);
}

Model::~Model() = default;

void Model::lay_out(bool allocate) {
  config_.validate();
  if (shard_.chunks.empty()) shard_.chunks = {{0, config_.layers}};
  layout_ = shard_params(config_, shard_);
  vocab_ = VocabularyShard::of(config_.vocab_size, shard_);
  if (!allocate) return;
  if (shard_.tensor_size > 1 && !shard_.tensor) throw Error("model: tensor parallel needs the tensor group");
  weights_ = DeviceBuffer<float>(device_, size_t(layout_.numel));
  grads_ = DeviceBuffer<float>(device_, size_t(layout_.numel));
  for (int64_t l : layout_.layers) {
    const LayerNames n = layer_names(config_.kind, l);
    auto pick = [&](auto get) {
      return Plan::LayerWeights{get(n.qkv_w), get(n.qkv_b), get(n.proj_w), get(n.proj_b), get(n.ln1_w), get(n.ln1_b),
                                get(n.fc_w),  get(n.fc_b),  get(n.fcproj_w), get(n.fcproj_b), get(n.ln2_w), get(n.ln2_b)};
    };
    plan_->lw.push_back(pick([&](const std::string& s) { return w(s); }));
    plan_->lg.push_back(pick([&](const std::string& s) { return g(s); }));
  }
}

const ParamInfo& Model::param(const std::string& name) const {
  for (const ParamInfo& p : layout_.params)
    if (p.name == name) return p;
  throw Error(cat("model has no parameter '", name, "'"));
}
float* Model::w(const std::string& name) const { return weights_.get() + param(name).offset; }
float* Model::g(const std::string& name) const { return grads_.get() + param(name).offset; }

void Model::init_weights(uint64_t seed) {
  const std::vector<float> host = initial_weights(config_, shard_, layout_, seed);
  copy_to_device(device_, weights_.get(), host.data(), host.size() * sizeof(float));
}

void Model::zero_grads() { device_zero(device_, grads_.get(), size_t(layout_.numel) * sizeof(float)); }

}  // namespace pretrain
