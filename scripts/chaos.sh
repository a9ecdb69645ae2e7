#!/usr/bin/env bash
# The fault campaign (issue #20; docs/reliability.md): kill -9 and --resume, a full disk, corrupted
# shards and checkpoints, two writers in one directory, a killed MPI rank, and the fuzz campaign.
#   scripts/chaos.sh [--short] [--trials N] [--seed S] [--table FILE] [--hours H] [FAULT…]
# FAULT: kill diskfull corrupt writers mpi net fuzz (default: all but fuzz, which needs the clang build
# and runs scripts/fuzz.sh --campaign H). --short: 2 trials each on small inputs, what CI runs
# (tests/e2e/test_chaos.sh). Uses the tools in $PRETRAIN_BUILD_DIR (default build/).
# Prints trials run and passed per job and fault; exit 1 when any trial failed, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/chaos.py "$@"
