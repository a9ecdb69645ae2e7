// shard-tool: inspect, verify and convert shards. The work is in shard_tool.cpp.
#include "formats/shard_tool.h"

int main(int argc, char** argv) { return pretrain::shard_tool_main(argc, argv); }
