// shard-tool: inspect FILE…, verify DIR…, convert IN OUT (llm.c <-> Megatron token shards),
// import-docs INPUT… -o DIR, stats SET (shard_stats.h).
#pragma once

#include "formats/shard_stats.h"

namespace pretrain {
// `text_tools`: what stats takes from tokenizer/ (sentences, decoding), which this library does
// not link; shard-tool's main passes them in.
int shard_tool_main(int argc, char** argv, const StatsTextTools& text_tools = {});
}
