#!/usr/bin/env bash
# DLPerf matrix over the hosts of an OpenMPI hostfile: 1n1g … 1n8g on the first host, then 2n8g, 4n8g …
# up to all hosts (mpirun --hostfile -npernode G). Options: scripts/dlperf_matrix.sh --help. Example:
#   scripts/run_multi_node.sh --hostfile hosts --data /shared/shards/bert --batch-size 32 --precision fp32
#   scripts/run_multi_node.sh --hostfile hosts --data /shared/shards/gpt --model gpt --cases "2n8g 2n8g:tp4pp2dp2" -- --grad-accum 8
# Under Slurm (sbatch scripts/slurm/dlperf.sbatch, or inside salloc): --slurm instead of --hostfile
# (implied when SLURM_JOB_ID is set): the allocation's nodes, each case through srun.
set -euo pipefail
for a in "$@"; do
  [[ $a == -- ]] && break
  [[ $a == --hostfile || $a == --slurm || $a == -h || $a == --help ]] && exec "$(dirname "$0")/dlperf_matrix.sh" "$@"
done
[[ -n ${SLURM_JOB_ID:-} ]] && exec "$(dirname "$0")/dlperf_matrix.sh" --slurm "$@"
echo "run_multi_node.sh: --hostfile FILE (or --slurm inside a Slurm allocation) is required (see --help)" >&2
exit 2
