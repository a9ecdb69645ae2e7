#!/usr/bin/env bash
# Format speed: our BERT HDF5 and Megatron .bin/.idx writers/readers against h5py and numpy memmap,
# measured in the same run on the same machine. Prints a table (ours, peer, ratio, goal).
#   scripts/bench/formats.sh [--records N] [--tokens N] [--random N] [--threads T] [--dir DIR]
# --random: single BERT records read at random indices (each one inflates part of a chunk).
# Defaults are the issue's sizes: 1,000,000 BERT seq-128 records and 500,000,000 tokens.
# Reads are from the page cache (no root to drop it), for us and the peers alike.

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
records=1000000 tokens=500000000 random=10000 threads=$(nproc) dir=""
bench_args --records=records --tokens=tokens --threads=threads --random=random --dir=dir -- "$@"
bench_workdir dir formats bert megatron
py=/usr/bin/python3

bench_build_missing build bench/bench_bert_hdf5 bench/bench_megatron
results=$dir/results.txt
: >"$results"
run() {  # run SIDE CMD...: keeps the RESULT lines, tagged with the side
  local side=$1; shift
  echo "# $side: $*" >&2
  "$@" | bench_collect "$results" "$side"
}
mkdir -p "$dir/bert" "$dir/megatron"
run ours build/bench/bench_bert_hdf5 --records "$records" --random "$random" --threads "$threads" --dir "$dir/bert"
rm -rf "$dir/bert"/*
run peer $py scripts/bench/bert_hdf5_peer.py --records "$records" --random "$random" --dir "$dir/bert"
rm -rf "$dir/bert"
run ours build/bench/bench_megatron --tokens "$tokens" --dir "$dir/megatron"
rm -rf "$dir/megatron"/*
run peer $py scripts/bench/megatron_peer.py --tokens "$tokens" --dir "$dir/megatron"

$py - "$results" "$records" "$tokens" "$threads" <<'PY'
import sys
path, records, tokens, threads = sys.argv[1:]
ours, peer = {}, {}
for line in open(path):
    side, case, value, secs = line.split()[:4]
    (ours if side == "ours" else peer)[case] = (float(value), float(secs))
units = {"hdf5_write": "MB/s", "hdf5_read_seq": "MB/s", "hdf5_read_random": "records/s",
         "megatron_write": "MB/s", "megatron_read_seq": "MB/s", "megatron_random_spans": "spans/s"}
goals = {"hdf5_write": "≥ h5py", "hdf5_read_seq": "≥ h5py", "megatron_write": "≥ 1000 MB/s",
         "megatron_random_spans": "≥ 5 M/s"}
peers = {"hdf5": "h5py", "megatron": "numpy memmap"}
print(f"\nformats benchmark: {int(records):,} BERT seq-128 records, {int(tokens):,} Megatron tokens, {threads} threads")
print("| case | unit | ours | peer | peer value | ratio | goal |")
print("|---|---|---:|---:|---:|---:|---|")
for case in units:
    o = ours.get(case); p = peer.get(case)
    name = peers[case.split("_")[0]]
    ov = f"{o[0]:,.1f}" if o else "n/a"
    pv = f"{p[0]:,.1f}" if p else "n/a"
    ratio = f"{o[0] / p[0]:.2f}×" if o and p and p[0] > 0 else "n/a"
    print(f"| {case} | {units[case]} | {ov} | {name} | {pv} | {ratio} | {goals.get(case, '')} |")
PY
