// shard-tool: inspect FILE…, verify DIR…, convert IN OUT (llm.c <-> Megatron token shards).
#pragma once

namespace pretrain {
int shard_tool_main(int argc, char** argv);
}
