// The optimizer flags of the compat drivers that step our optimizer (trainer_dump,
// optimizer_dump), spelled as the trainers spell them.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "trainer/optimizer.h"

namespace pretrain {

inline void add_optimizer_flags(CLI::App& app, OptimizerConfig& config, std::string& optimizer) {
  app.add_option("--optimizer", optimizer);
  app.add_option("--lr", config.lr);
  app.add_option("--weight-decay", config.weight_decay);
  app.add_option("--eps", config.eps);
  app.add_option("--max-grad-norm", config.max_grad_norm);
}

}  // namespace pretrain
