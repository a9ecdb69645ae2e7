#!/usr/bin/env bash
# DLPerf matrix on this node: 1n1g, 1n4g, 1n8g (up to --gpus-per-node; with --device cpu a "g" is one
# CPU rank). Options: scripts/dlperf_matrix.sh --help. Example:
#   scripts/run_single_node.sh --data shards/bert --model bert --batch-size 32 --precision fp16
#   scripts/run_single_node.sh --data shards/gpt --model gpt --cases "1n8g 1n8g:tp2dp4 1n8g:tp2pp4" -- --grad-accum 8
set -euo pipefail
for a in "$@"; do
  [[ $a == -- ]] && break
  [[ $a == --hostfile ]] && { echo "run_single_node.sh: --hostfile is for scripts/run_multi_node.sh" >&2; exit 2; }
done
exec "$(dirname "$0")/dlperf_matrix.sh" "$@"
