#include "common/cli.h"

#include <tbb/global_control.h>
#include <tbb/info.h>

#include <csignal>
#include <cstdio>
#include <memory>

#include "common/error.h"
#include "common/log.h"
#include "common/progress.h"

#ifndef PRETRAIN_VERSION
#define PRETRAIN_VERSION "0.0.0"
#endif

namespace pretrain {
namespace {
std::unique_ptr<tbb::global_control>& thread_limit() {
  static std::unique_ptr<tbb::global_control> limit;
  return limit;
}
ToolOptions* g_tool_options = nullptr;
}  // namespace

const char* version_string() { return PRETRAIN_VERSION; }

ToolOptions::ToolOptions(CLI::App& app) {
  app.set_version_flag("--version", std::string(app.get_name()) + " (pretrain suite) " + version_string());
  app.add_option("--threads", threads, "worker threads (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_flag("-q,--quiet", quiet, "no progress or info lines");
  g_tool_options = this;
}

void ToolOptions::apply() const {
  if (threads > 0)
    thread_limit() = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                           static_cast<size_t>(threads));
  if (quiet) {
    set_log_level(LogLevel::warn);
    Progress::set_enabled(false);
  }
}

int max_threads() {
  return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help/version, or the usage error
    return code == 0 ? 0 : 2;
  }
  // A file past the size limit (ulimit -f, a quota) delivers SIGXFSZ, which kills the process
  // without a word; ignored, the write fails with EFBIG instead and the writer's error names the
  // file, removes its temp file and exits 1 like any other full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  return run_reporting_errors([&] {
    if (g_tool_options) g_tool_options->apply();
    return body();
  });
}

int run_reporting_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace pretrain
