// The options of a format benchmark that writes a scratch file: where, with which content seed,
// and whether to keep it for a look afterwards.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace pretrain::bench {

struct ScratchFileOptions {
  std::string dir = "/tmp";
  uint64_t seed = 1;
  bool keep = false;

  ScratchFileOptions(CLI::App& app, const std::string& file) {
    app.add_option("--dir", dir, "where to write " + file);
    app.add_option("--seed", seed, "seed of the generated content");
    app.add_flag("--keep", keep, "keep " + file + " afterwards");
  }
};

}  // namespace pretrain::bench
