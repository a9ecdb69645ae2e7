#!/usr/bin/env bash
# scripts/bench/bench_kernels.cpp --device cpu: every op of trainer/ops runs once on tiny shapes
# (the GPU run's code path but for the kernels), prints its row and writes its JSON line, so the
# benchmark scripts/bench/gpu.sh calls on a lent GPU does not rot between GPU sessions.
set -euo pipefail
bin=${PRETRAIN_BUILD_DIR:?PRETRAIN_BUILD_DIR is set by ctest}/bench/bench_kernels
[[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
tmp=$(mktemp -d -t pretrain-bench-kernels.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$bin" --device cpu --json "$tmp/ops.jsonl" >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: bench_kernels exited non-zero"; exit 1; }
rows=$(grep -c ' ms ' "$tmp/out")
lines=$(wc -l <"$tmp/ops.jsonl")
[[ $rows -eq 21 && $lines -eq 21 ]] || { cat "$tmp/out"; echo "FAIL: $rows rows and $lines JSON lines, expected 21"; exit 1; }
grep -q '"op":"attention_forward gpt2 (cpu flash)"' "$tmp/ops.jsonl" || { echo "FAIL: no attention row"; exit 1; }
echo "bench_kernels --device cpu: $rows ops"
