#include "trainer/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/manifest.h"
#include "trainer/parallel/grid.h"

namespace pretrain {

namespace {

// Serialised whole tensors, for sending a pipeline stage's to world rank 0.
void put_bytes(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
std::string pack(const std::map<std::string, HostTensor>& tensors) {
  std::string out;
  for (const auto& [name, t] : tensors) {
    const uint64_t len = name.size(), dims = t.shape.size(), n = t.data.size();
    put_bytes(out, &len, 8), out += name, put_bytes(out, &dims, 8);
    put_bytes(out, t.shape.data(), dims * 8), put_bytes(out, &n, 8), put_bytes(out, t.data.data(), n * 4);
  }
  return out;
}
void unpack(const std::string& in, std::map<std::string, HostTensor>& out) {
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (at + n > in.size()) throw Error("checkpoint: a stage's tensors arrived truncated");
    std::copy_n(in.data() + at, n, static_cast<char*>(p)), at += n;
  };
  while (at < in.size()) {
    uint64_t len = 0, dims = 0, n = 0;
    get(&len, 8);
    std::string name(len, '\0');
    get(name.data(), len);
    HostTensor t;
    get(&dims, 8);
    t.shape.resize(dims);
    get(t.shape.data(), dims * 8);
    get(&n, 8);
    t.data.resize(n);
    get(t.data.data(), n * 4);
    out.emplace(std::move(name), std::move(t));
  }
}

// This rank's parameters as whole tensors (the tied copy left out): its tensor group's shards,
// all-gathered and put together. `arena` in device memory, or host memory with on_host.
std::map<std::string, HostTensor> gather(const Model& model, const float* arena, const std::string& prefix,
                                         bool on_host, const Grid* grid) {
  std::map<std::string, HostTensor> out;
  const int tp = grid ? grid->tensor_size() : 1;
  std::vector<float> shard, shards;
  for (const ParamInfo& p : model.params()) {
    if (p.tied_copy) continue;
    shard.resize(size_t(p.numel));
    if (on_host)
      std::copy_n(arena + p.offset, p.numel, shard.data());
    else
      copy_to_host(model.device(), shard.data(), arena + p.offset, size_t(p.numel) * sizeof(float));
    HostTensor t;
    t.shape = p.full_shape;
    int64_t n = 1;
    for (int64_t d : p.full_shape) n *= d;
    t.data.assign(size_t(n), 0.0f);
    if (tp == 1 || p.split == Split::none) {
      put_shard(p, shard.data(), t.data.data(), 0, 1);
    } else {
      shards.resize(size_t(p.numel) * size_t(tp));
      grid->tensor().all_gather_equal(shard.data(), shards.data(), p.numel);
      for (int r = 0; r < tp; ++r) put_shard(p, shards.data() + size_t(r) * size_t(p.numel), t.data.data(), r, tp);
    }
    out.emplace(prefix + p.name, std::move(t));
  }
  return out;
}

// World rank 0 receives every pipeline stage's whole tensors (from data rank 0, tensor rank 0 of
// each stage), the others send theirs.
std::map<std::string, HostTensor> collect(std::map<std::string, HostTensor> mine, const Grid* grid) {
  if (!grid || grid->pipeline_size() == 1) return grid && grid->world().rank() != 0 ? decltype(mine){} : mine;
  if (grid->data_rank() != 0 || grid->tensor_rank() != 0) return {};
  const Communicator& pipe = grid->pipeline();
  if (pipe.rank() != 0) {
    const std::string bytes = pack(mine);
    const uint64_t size = bytes.size();
    pipe.send(&size, 8, 0, 1);
    pipe.send(bytes.data(), bytes.size(), 0, 2);
    return {};
  }
  for (int s = 1; s < pipe.size(); ++s) {
    uint64_t size = 0;
    pipe.recv(&size, 8, s, 1);
    std::string bytes(size, '\0');
    pipe.recv(bytes.data(), size, s, 2);
    unpack(bytes, mine);
  }
  return mine;
}

// Copies every parameter's tensor into the arena at `dst` (device memory, or host when to_host).
void scatter(const Model& model, float* arena, const std::map<std::string, HostTensor>& tensors,
             const std::string& prefix, const std::string& source, bool to_host = false) {
  for (const ParamInfo& p : model.params()) {
    auto it = tensors.find(prefix + p.name);
    if (it == tensors.end()) throw Error(cat(source, ": tensor '", prefix + p.name, "' is missing"));
    if (it->second.shape != p.full_shape) {
      std::string want, got;
      for (int64_t d : p.full_shape) want += (want.empty() ? "" : "×") + std::to_string(d);
      for (int64_t d : it->second.shape) got += (got.empty() ? "" : "×") + std::to_string(d);
      throw Error(cat(source, ": tensor '", prefix + p.name, "' has shape [", got, "], the model expects [", want, "]"));
    }
    const int rank = model.shard().tensor_rank, size = model.shard().tensor_size;
    if (to_host) {
      take_shard(p, it->second.data.data(), arena + p.offset, rank, size);
    } else {
      std::vector<float> shard(static_cast<size_t>(p.numel));
      take_shard(p, it->second.data.data(), shard.data(), rank, size);
      copy_to_device(model.device(), arena + p.offset, shard.data(), size_t(p.numel) * sizeof(float));
    }
  }
}

}  // namespace

std::map<std::string, HostTensor> export_weights(const Model& model, const Grid* grid) {
  return collect(gather(model, model.weights(), "", false, grid), grid);
}

std::map<std::string, HostTensor> whole_tensors(const Model& model, const float* host_arena, const std::string& prefix,
                                                const Grid* grid) {
  return collect(gather(model, host_arena, prefix, true, grid), grid);
}

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
                            const std::vector<float>& v, const nlohmann::json& state, const Grid* grid) {
  namespace fs = std::filesystem;
  auto weights = export_weights(model, grid);
  auto moments = whole_tensors(model, m.data(), "exp_avg.", grid);
  auto second = whole_tensors(model, v.data(), "exp_avg_sq.", grid);
  if (grid && grid->world().rank() != 0) return {};
  make_dirs(dir);
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  const std::string final_path = path_join(dir, name);
  const std::string tmp = cat(final_path, ".tmp-", getpid());
  fs::remove_all(tmp);
  make_dirs(tmp);
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", std::to_string(step)}};
  write_safetensors(path_join(tmp, "model.safetensors"), weights, meta);
  moments.merge(second);
  write_safetensors(path_join(tmp, "optimizer.safetensors"), moments, meta);
  write_file_atomic(path_join(tmp, "state.json"), state.dump(2) + "\n");
  Manifest manifest;
  manifest.format = kFormatCheckpoint;
  manifest.tool = "checkpoint";
  manifest.shards = {Manifest::describe(tmp, "model.safetensors", weights.size()),
                     Manifest::describe(tmp, "optimizer.safetensors", moments.size()),
                     Manifest::describe(tmp, "state.json", 1)};
  manifest.write(path_join(tmp, kManifestName));  // last: it vouches for the files above
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

namespace {

// Every file of the checkpoint against its manifest.json before any is read: a flipped bit in a
// tensor file would otherwise load as a wrong weight and train on silently.
void verify_checkpoint(const std::string& path) {
  const std::string manifest_path = path_join(path, kManifestName);
  if (!file_exists(manifest_path)) {
    // Written before checkpoints had checksums: refusing it would strand every run in progress
    // across an upgrade, and the readers still check its structure (sizes, offsets, JSON).
    log_warn(cat("checkpoint '", path, "' has no ", kManifestName, " (written before checksums): loading it unverified"));
    return;
  }
  const Manifest m = Manifest::read(manifest_path);
  if (m.format != kFormatCheckpoint)
    throw Error(Where{manifest_path}, cat("expected format \"", kFormatCheckpoint, "\", found \"", m.format, "\""));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json"})
    if (std::none_of(m.shards.begin(), m.shards.end(), [&](const ShardEntry& s) { return s.file == file; }))
      throw Error(Where{manifest_path}, cat("expected an entry for ", file));
  const std::vector<VerifyProblem> problems = verify_manifest(m, path);
  if (!problems.empty())
    throw Error(Where{path_join(path, problems.front().file)},
                cat("checkpoint refused: ", problems.front().message, " (", kManifestName,
                    " records another file: damaged on disk, or a copy cut short)"));
}

}  // namespace

nlohmann::json load_checkpoint(const std::string& path, Model& model, Optimizer& optimizer) {
  verify_checkpoint(path);
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
