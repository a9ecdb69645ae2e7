// For tests/compat/test_trainer_torch.py: runs our model on a batch the test wrote and writes what
// PyTorch is compared against, as safetensors.
//   trainer_dump --kind bert|gpt --shape L,C,NH,I,V,POS --batch b.safetensors --weights w.safetensors
//                --out o.safetensors [--steps K --optimizer adamw|lamb --lr X --weight-decay X
//                --eps X --max-grad-norm X]
// The batch holds float tensors (small integers, exact): BERT input_ids, segment_ids, input_mask,
// masked_lm_positions, masked_lm_ids, next_sentence_labels; GPT tokens, targets.
// Out: loss (and mlm_loss, nsp_loss), logits, grad.<parameter> for every parameter, and with
// --steps K the losses of K optimizer steps on the same batch ("step_losses").
// --weights may be a Hugging Face directory, read as --init-from reads it (tests/e2e/test_hf_export.py).
#include <cstdio>
#include <sstream>

#include "common/cli.h"
#include "common/error.h"
#include "optimizer_flags.h"
#include "trainer/checkpoint.h"
#include "trainer/hf_format.h"

using namespace pretrain;

namespace {
std::vector<int32_t> ints(const std::map<std::string, HostTensor>& t, const std::string& name) {
  auto it = t.find(name);
  if (it == t.end()) throw Error("batch: missing " + name);
  return std::vector<int32_t>(it->second.data.begin(), it->second.data.end());
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Dump our model's loss, logits and gradients for the PyTorch comparison", "trainer_dump"};
  ToolOptions common(app);
  std::string kind_name, shape, batch_path, weights_path, out_path, optimizer = "adamw";
  int steps = 0;
  OptimizerConfig oc;
  oc.schedule = LrSchedule::constant;
  app.add_option("--kind", kind_name)->required();
  app.add_option("--shape", shape)->required();
  app.add_option("--batch", batch_path)->required();
  app.add_option("--weights", weights_path)->required();
  app.add_option("--out", out_path)->required();
  app.add_option("--steps", steps);
  add_optimizer_flags(app, oc, optimizer);
  return run_tool(app, argc, argv, [&] {
    const ModelKind kind = kind_name == "bert" ? ModelKind::bert : ModelKind::gpt;
    ModelConfig c = ModelConfig::preset(kind, "tiny");
    char sep;
    std::istringstream in(shape);
    in >> c.layers >> sep >> c.hidden >> sep >> c.heads >> sep >> c.intermediate >> sep >> c.vocab_size >> sep >> c.max_positions;
    c.hidden_dropout = c.attention_dropout = 0.0f;
    Device cpu = open_device("cpu", max_threads());
    Model model(c, cpu);
    import_weights(model, read_init_weights(weights_path, c), weights_path);  // a file of ours or an HF directory
    const auto batch = read_safetensors(batch_path);
    std::vector<int32_t> ids, types, mask, positions, mlm_ids, nsp, targets;
    ModelInputs mi;
    if (kind == ModelKind::gpt) {
      ids = ints(batch, "tokens"), targets = ints(batch, "targets");
      mi.B = batch.at("tokens").shape[0], mi.T = batch.at("tokens").shape[1];
      mi.ids = ids.data(), mi.targets = targets.data();
    } else {
      ids = ints(batch, "input_ids"), types = ints(batch, "segment_ids"), mask = ints(batch, "input_mask");
      positions = ints(batch, "masked_lm_positions"), mlm_ids = ints(batch, "masked_lm_ids");
      nsp = ints(batch, "next_sentence_labels");
      mi.B = batch.at("input_ids").shape[0], mi.T = batch.at("input_ids").shape[1];
      mi.P = batch.at("masked_lm_positions").shape[1];
      mi.ids = ids.data(), mi.types = types.data(), mi.mask = mask.data();
      mi.mlm_positions = positions.data(), mi.mlm_ids = mlm_ids.data(), mi.nsp_labels = nsp.data();
    }
    std::map<std::string, HostTensor> out;
    model.zero_grads();
    const Losses l = model.step(mi, true, 1.0f, 0, true);
    out["loss"] = {{1}, {float(l.total)}};
    out["mlm_loss"] = {{1}, {float(l.mlm)}};
    out["nsp_loss"] = {{1}, {float(l.nsp)}};
    const std::vector<float> logits = model.logits();
    out["logits"] = {{int64_t(logits.size())}, logits};
    for (const ParamInfo& p : model.params())
      out["grad." + p.name] = {p.shape, std::vector<float>(model.grads() + p.offset, model.grads() + p.offset + p.numel)};
    if (steps > 0) {
      oc.kind = parse_optimizer(optimizer);
      Optimizer opt(oc, model);
      HostTensor losses{{steps}, {}};
      for (int t = 1; t <= steps; ++t) {
        model.zero_grads();
        losses.data.push_back(float(model.step(mi, true, 1.0f, 0).total));
        opt.step(t);
      }
      out["step_losses"] = losses;
    }
    write_safetensors(out_path, out);
    return 0;
  });
}
