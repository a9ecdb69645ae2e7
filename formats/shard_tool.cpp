#include "formats/shard_tool.h"

#include "common/common.h"

namespace pretrain {

int shard_tool_main(int argc, char** argv) {
  CLI::App app{"Inspect, verify and convert pretraining shards", "shard-tool"};
  ToolOptions options(app);
  app.require_subcommand(1);
  return run_tool(app, argc, argv, [&] { return 0; });
}

}  // namespace pretrain
