#!/usr/bin/env bash
# DLPerf matrix over the hosts of an OpenMPI hostfile: 1n1g … 1n8g on the first host, then 2n8g, 4n8g …
# up to all hosts (mpirun --hostfile -npernode G). Options: scripts/dlperf_matrix.sh --help. Example:
#   scripts/run_multi_node.sh --hostfile hosts --data /shared/shards/bert --batch-size 32 --precision fp32
#   scripts/run_multi_node.sh --hostfile hosts --data /shared/shards/gpt --model gpt --cases "2n8g 2n8g:tp4pp2dp2" -- --grad-accum 8
set -euo pipefail
for a in "$@"; do
  [[ $a == -- ]] && break
  [[ $a == --hostfile || $a == -h || $a == --help ]] && exec "$(dirname "$0")/dlperf_matrix.sh" "$@"
done
echo "run_multi_node.sh: --hostfile FILE is required (see --help)" >&2
exit 2
