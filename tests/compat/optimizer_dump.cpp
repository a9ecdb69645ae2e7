// For tests/compat/test_optimizer_torch.py: steps of our optimizer on weights and gradients the test
// wrote, over the unit tests' tiny BERT (tests/trainer/optimizer_fixtures.h: every shape BERT has),
// writing the weights and moments after each step.
//   optimizer_dump --out params.safetensors
//       the parameters (names and shapes; the values are an initialisation, for the test to replace)
//   optimizer_dump --weights w.safetensors --grads g.safetensors --steps K --out o.safetensors
//                  [--optimizer adamw|lamb --lr X --weight-decay X --eps X --max-grad-norm X]
//       g holds grad<t>.<name> for t = 1..K; o holds step<t>.<name>, step<t>.exp_avg.<name> and
//       step<t>.exp_avg_sq.<name>, and step<t>.grad_norm and .clip (UpdateInfo).
#include "common/cli.h"
#include "common/error.h"
#include "optimizer_flags.h"
#include "../trainer/optimizer_fixtures.h"
#include "trainer/checkpoint.h"

using namespace pretrain;

namespace {
void load_grads(Model& model, const std::map<std::string, HostTensor>& grads, int t, const std::string& path) {
  for (const ParamInfo& p : model.params()) {
    const std::string name = cat("grad", t, ".", p.name);
    const auto it = grads.find(name);
    if (it == grads.end()) throw Error(cat(path, ": missing ", name));
    if (int64_t(it->second.data.size()) != p.numel) throw Error(cat(path, ": ", name, " has the wrong size"));
    std::copy(it->second.data.begin(), it->second.data.end(), model.grads() + p.offset);
  }
}

void add_with_prefix(std::map<std::string, HostTensor>& out, std::map<std::string, HostTensor> tensors,
                     const std::string& prefix) {
  for (auto& [name, tensor] : tensors) out[prefix + name] = std::move(tensor);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Steps of our optimizer on given weights and gradients, for the PyTorch comparison", "optimizer_dump"};
  ToolOptions common(app);
  std::string weights_path, grads_path, out_path, optimizer = "adamw";
  int steps = 0;
  OptimizerConfig oc;
  oc.schedule = LrSchedule::constant;
  app.add_option("--weights", weights_path);
  app.add_option("--grads", grads_path);
  app.add_option("--out", out_path)->required();
  app.add_option("--steps", steps);
  add_optimizer_flags(app, oc, optimizer);
  return run_tool(app, argc, argv, [&] {
    Model model(testing::tiny_bert(), open_device("cpu", 1));
    model.init_weights(1);
    if (weights_path.empty()) {
      write_safetensors(out_path, export_weights(model));
      return 0;
    }
    import_weights(model, read_safetensors(weights_path), weights_path);
    const auto grads = read_safetensors(grads_path);
    oc.kind = parse_optimizer(optimizer);
    Optimizer opt(oc, model);
    std::map<std::string, HostTensor> out;
    for (int t = 1; t <= steps; ++t) {
      load_grads(model, grads, t, grads_path);
      const UpdateInfo info = opt.step(t);
      const std::string step = cat("step", t, ".");
      std::vector<float> m, v;
      opt.moments_to_host(m, v);
      add_with_prefix(out, export_weights(model), step);
      add_with_prefix(out, whole_tensors(model, m.data(), "exp_avg.", nullptr), step);
      add_with_prefix(out, whole_tensors(model, v.data(), "exp_avg_sq.", nullptr), step);
      out[step + "grad_norm"] = {{1}, {float(info.grad_norm)}};
      out[step + "clip"] = {{1}, {float(info.clip)}};
    }
    write_safetensors(out_path, out);
    return 0;
  });
}
