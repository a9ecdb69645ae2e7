#include "trainer/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/file.h"

namespace pretrain {

namespace {

std::map<std::string, HostTensor> gather(const Model& model, const float* arena, const std::string& prefix) {
  std::map<std::string, HostTensor> out;
  for (const ParamInfo& p : model.params()) {
    HostTensor t;
    t.shape = p.shape;
    t.data.resize(size_t(p.numel));
    copy_to_host(model.device(), t.data.data(), arena + p.offset, size_t(p.numel) * sizeof(float));
    out.emplace(prefix + p.name, std::move(t));
  }
  return out;
}

std::map<std::string, HostTensor> from_host(const Model& model, const std::vector<float>& arena, const std::string& prefix) {
  std::map<std::string, HostTensor> out;
  for (const ParamInfo& p : model.params())
    out.emplace(prefix + p.name, HostTensor{p.shape, std::vector<float>(arena.begin() + p.offset,
                                                                        arena.begin() + p.offset + p.numel)});
  return out;
}

// Copies every parameter's tensor into the arena at `dst` (device memory, or host when to_host).
void scatter(const Model& model, float* arena, const std::map<std::string, HostTensor>& tensors,
             const std::string& prefix, const std::string& source, bool to_host = false) {
  for (const ParamInfo& p : model.params()) {
    auto it = tensors.find(prefix + p.name);
    if (it == tensors.end()) throw Error(cat(source, ": tensor '", prefix + p.name, "' is missing"));
    if (it->second.shape != p.shape) {
      std::string want, got;
      for (int64_t d : p.shape) want += (want.empty() ? "" : "×") + std::to_string(d);
      for (int64_t d : it->second.shape) got += (got.empty() ? "" : "×") + std::to_string(d);
      throw Error(cat(source, ": tensor '", prefix + p.name, "' has shape [", got, "], the model expects [", want, "]"));
    }
    if (to_host)
      std::copy(it->second.data.begin(), it->second.data.end(), arena + p.offset);
    else
      copy_to_device(model.device(), arena + p.offset, it->second.data.data(), size_t(p.numel) * sizeof(float));
  }
}

}  // namespace

std::map<std::string, HostTensor> export_weights(const Model& model) { return gather(model, model.weights(), ""); }

void import_weights(Model& model, const std::map<std::string, HostTensor>& tensors, const std::string& source) {
  scatter(model, model.weights(), tensors, "", source);
}

std::string save_checkpoint(const std::string& dir, int64_t step, const Model& model, const Optimizer& optimizer,
                            const nlohmann::json& state) {
  std::vector<float> m, v;
  optimizer.moments_to_host(m, v);
  return save_checkpoint(dir, step, model, m, v, state);
}

std::string save_checkpoint(const std::string& dir, int64_t step, const Model& model, const std::vector<float>& m,
                            const std::vector<float>& v, const nlohmann::json& state) {
  namespace fs = std::filesystem;
  make_dirs(dir);
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  const std::string final_path = path_join(dir, name);
  const std::string tmp = cat(final_path, ".tmp-", getpid());
  fs::remove_all(tmp);
  make_dirs(tmp);
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", std::to_string(step)}};
  write_safetensors(path_join(tmp, "model.safetensors"), export_weights(model), meta);
  auto moments = from_host(model, m, "exp_avg.");
  auto second = from_host(model, v, "exp_avg_sq.");
  moments.merge(second);
  write_safetensors(path_join(tmp, "optimizer.safetensors"), moments, meta);
  write_file_atomic(path_join(tmp, "state.json"), state.dump(2) + "\n");
  std::error_code ec;
  fs::remove_all(final_path, ec);
  fs::rename(tmp, final_path, ec);
  if (ec) throw Error(cat("cannot rename '", tmp, "' to '", final_path, "': ", ec.message()));
  write_file_atomic(path_join(dir, "latest"), std::string(name) + "\n");
  return final_path;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const std::string latest = path_join(dir, "latest");
  if (!file_exists(latest)) return std::nullopt;
  std::string name = read_file(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos)
    throw Error(Where::at_line(latest, 1), "expected the name of a checkpoint directory (step-NNNNNNNN)");
  const std::string path = path_join(dir, name);
  if (!file_exists(path_join(path, "state.json")))
    throw Error(cat(latest, " names '", name, "', but ", path, "/state.json is missing"));
  return path;
}

nlohmann::json load_checkpoint(const std::string& path, Model& model, Optimizer& optimizer) {
  const std::string state_path = path_join(path, "state.json");
  if (!file_exists(state_path)) throw Error(cat("checkpoint '", path, "': state.json is missing"));
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(read_file(state_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(Where::at_offset(state_path, 0), cat("expected a JSON object: ", e.what()));
  }
  if (!state.is_object() || !state.contains("step"))
    throw Error(Where::at_offset(state_path, 0), "expected a JSON object with \"step\"");
  const std::string weights = path_join(path, "model.safetensors"), moments = path_join(path, "optimizer.safetensors");
  scatter(model, model.weights(), read_safetensors(weights), "", weights);
  const auto opt = read_safetensors(moments);
  std::vector<float> m(static_cast<size_t>(model.num_parameters())), v(m.size());
  scatter(model, m.data(), opt, "exp_avg.", moments, true);
  scatter(model, v.data(), opt, "exp_avg_sq.", moments, true);
  optimizer.moments_from_host(m, v);
  return state;
}

}  // namespace pretrain
