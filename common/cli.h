// What every tool shares: --help, --version, --threads, --quiet, and the main wrapper that turns
// exceptions into "error: …" with exit 1 (data/runtime) or 2 (usage). Tools stay thin:
//
//   int main(int argc, char** argv) {
//     CLI::App app{"what it does", "shard-tool"};
//     pretrain::ToolOptions common(app);
//     ... add options ...
//     return pretrain::run_tool(app, argc, argv, [&] { ...; return 0; });
//   }
#pragma once
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace pretrain {

const char* version_string();  // "0.1.0"

struct ToolOptions {
  explicit ToolOptions(CLI::App& app);
  int threads = 0;  // 0: all cores
  bool quiet = false;
  // Applies --threads (a oneTBB global_control that lives until exit) and --quiet.
  void apply() const;
};

// Parses, applies ToolOptions if registered, runs body; maps exceptions to exit codes.
int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Runs body and maps its exceptions to exit codes: "error: …" on stderr, 2 for a UsageError, 1 for
// any other. For programs without CLI11 parsing (the test helpers in tests/compat/).
int run_reporting_errors(const std::function<int()>& body);

// Number of threads the process may use (respects --threads).
int max_threads();

}  // namespace pretrain
