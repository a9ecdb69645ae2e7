// Checkpoints and weight export. A checkpoint is a directory step-<8 digits>/ under
// --checkpoint-dir holding model.safetensors (the weights, by their reference names),
// optimizer.safetensors (exp_avg.<name>, exp_avg_sq.<name>), state.json (step, loader state,
// the run's configuration) and manifest.json (format "checkpoint": each of the three files' size
// and xxh3, checked before anything is loaded, so a damaged file is refused rather than trained
// on). It is written as <name>.tmp-<pid> and renamed when complete, and
// `latest` names the newest, so a kill at any moment leaves either the old or the new one whole.
#pragma once
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "trainer/optimizer.h"
#include "trainer/safetensors.h"

namespace pretrain {

class Grid;

// The whole model's weights as whole tensors. Single process: this model's. With a grid (a
// collective over the world): the tensor groups' shards put together and every pipeline stage's
// tensors sent to world rank 0, which gets them all (the other ranks an empty map).
std::map<std::string, HostTensor> export_weights(const Model& model, const Grid* grid = nullptr);
// The same for an arena in the parameters' layout held in host memory (optimizer moments).
std::map<std::string, HostTensor> whole_tensors(const Model& model, const float* host_arena, const std::string& prefix,
                                                const Grid* grid);
// Loads every parameter of the model from `tensors` (names and whole shapes must match; a tied
// output weight — cls.predictions.decoder.weight, lm_head.weight — may be present and is ignored):
// each rank takes its shard, whatever layout wrote them.
void import_weights(Model& model, const std::map<std::string, HostTensor>& tensors, const std::string& source);

// Writes checkpoint `step` and points `latest` at it; returns its path. The moments are the
// whole arena's (Optimizer::moments_to_host, which under ZeRO every rank must call).
// With a grid it is a collective over the world, and world rank 0 writes.
std::string save_checkpoint(const std::string& dir, int64_t step, const Model& model, const std::vector<float>& m,
                            const std::vector<float>& v, const nlohmann::json& state, const Grid* grid = nullptr);
// A single process's checkpoint (gathers the moments itself).
std::string save_checkpoint(const std::string& dir, int64_t step, const Model& model, const Optimizer& optimizer,
                            const nlohmann::json& state);
// The newest complete checkpoint under dir (from `latest`), if any.
std::optional<std::string> latest_checkpoint(const std::string& dir);
// Restores weights and optimizer moments (each rank keeps its ZeRO shard); returns state.json. Throws Error naming the file on a
// missing, truncated, damaged (size or xxh3 other than its manifest.json says) or mismatched
// checkpoint. A checkpoint without manifest.json (written before checksums) loads with a warning.
nlohmann::json load_checkpoint(const std::string& path, Model& model, Optimizer& optimizer);

}  // namespace pretrain
