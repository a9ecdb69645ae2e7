#!/usr/bin/env bash
# Loader speed: samples/s of our Loader (bench_loader, CPU, 1 and 2 workers) against the PyTorch path
# on the same files and cores (h5py + torch DataLoader as NVIDIA's BERT run_pretraining.py does it,
# a Megatron-like GPTDataset over np.memmap for GPT; scripts/bench/loader_peer.py) and a one-process
# numpy baseline; BERT seq 128 batch 64 from HDF5 and GPT seq 1024 batch 8 from .bin/.idx. Then the
# paced consumer: sleeping --step-ms per batch (a fast GPU step), how long next() keeps it waiting.
#   scripts/bench/loader.sh [--bert-samples 200000] [--gpt-tokens 100000000] [--workers "1 2"]
#     [--bert-run 0] [--gpt-run 16000] [--step-ms 5] [--paced-bert 2500] [--paced-gpt 1000]
#     [--paced-peer 300] [--data DIR] [--build DIR] [--bert-layout plain|binned|packed]
# --bert-layout: our loader reads make-pretraining-shards --bin-size 64 (binned: LDDL's loading) or
# --pack (packed rows) shards of the same corpus; the PyTorch path reads the plain shards for
# binned (NVIDIA's loader has no bins) and the packed ones for packed (it reads their six NVIDIA
# datasets, ours all ten). Samples are rows either way.
# --bert-run/--gpt-run: samples each side takes per throughput run (0: one epoch). BERT takes a whole
# epoch: our loader decodes a shuffle window (~150k samples here) before its first batch, which a
# shorter run would charge to too few samples; the PyTorch path needs ~25 s for it. --paced-*:
# batches of the paced runs (ours: enough to cross the first BERT shuffle window). The shards are made once by
# make-pretraining-shards from the enwiki excerpt's documents repeated to size and cached in --data
# (default ~/.cache/pretrain-bench/loader). Reads come from the page cache.

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
bert_samples=200000 gpt_tokens=100000000 workers="1 2" bert_run=0 gpt_run=16000
step_ms=5 paced_bert=2500 paced_gpt=1000 paced_peer=300
cache=${XDG_CACHE_HOME:-$HOME/.cache}/pretrain-bench/loader build=build bert_layout=plain
bench_args --bert-samples=bert_samples --gpt-tokens=gpt_tokens --workers=workers --bert-run=bert_run \
  --gpt-run=gpt_run --step-ms=step_ms --paced-bert=paced_bert --paced-gpt=paced_gpt --paced-peer=paced_peer \
  --data=cache --build=build --bert-layout=bert_layout -- "$@"
wiki=$enwiki_jsonl
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
encoder=$shared_data/vocab/gpt2-encoder.json
bench_require "$wiki" "loader.sh: $wiki not found (set PRETRAIN_SHARED_DATA)"
py=/usr/bin/python3
bench_build "$build" make-pretraining-shards
shards=$build/datagen/make-pretraining-shards
mkdir -p "$cache"
bench_tmpdir loader
tmp=$bench_tmp

bert=$cache/bert-seq128-$bert_samples
gpt=$cache/gpt2-$gpt_tokens
bert_shard_args=(--seq-len 128 --max-predictions 20 --dupe-factor 5 --num-shards 8)
bench_sized_shards "$shards" bert "$vocab" "$bert_samples" instances "$bert" "${bert_shard_args[@]}"
ours_bert=$bert peer_bert=$bert
case $bert_layout in
  plain) ;;
  binned) ours_bert=$bert-bin64
    bench_sized_shards "$shards" bert "$vocab" "$bert_samples" instances "$ours_bert" "${bert_shard_args[@]}" --bin-size 64 ;;
  packed) ours_bert=$bert-pack3 peer_bert=$ours_bert
    bench_sized_shards "$shards" bert "$vocab" "$bert_samples" instances "$ours_bert" "${bert_shard_args[@]}" --pack --max-pack 3 ;;
  *) echo "loader.sh: --bert-layout is plain, binned or packed, not $bert_layout" >&2; exit 2 ;;
esac
bench_sized_shards "$shards" gpt "$encoder" "$gpt_tokens" tokens "$gpt"
gpt_prefix=$(ls "$gpt"/*.idx | head -1); gpt_prefix=${gpt_prefix%.idx}
bench_build "$build" bench_loader

results=$tmp/results.txt
: >"$results"
run() {  # run CMD...: keeps the RESULT lines
  echo "# $*" >&2
  "$@" | bench_collect "$results" RESULT
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
bert_args=(--batch 64 --samples "$bert_run" --step-ms "$step_ms")
gpt_args=(--source "$gpt_prefix" --batch 8 --seq-len 1024 --samples "$gpt_run" --step-ms "$step_ms")
for w in $workers; do
  run "$build/bench/bench_loader" --kind bert --source "$ours_bert" "${bert_args[@]}" --workers "$w" --paced-batches "$paced_bert"
  run $py scripts/bench/loader_peer.py --case bert_torch --source "$peer_bert" "${bert_args[@]}" --workers "$w" \
    --paced-batches "$paced_peer"
  run "$build/bench/bench_loader" --kind gpt "${gpt_args[@]}" --workers "$w" --paced-batches "$paced_gpt"
  run $py scripts/bench/loader_peer.py --case gpt_torch "${gpt_args[@]}" --workers "$w" --paced-batches "$paced_peer"
done
run $py scripts/bench/loader_peer.py --case bert_numpy --source "$peer_bert" "${bert_args[@]}"
run $py scripts/bench/loader_peer.py --case gpt_numpy "${gpt_args[@]}"

$py - "$results" "$step_ms" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$bert_layout" <<'PY'
import os, sys
path, step_ms, load0, load1, layout = sys.argv[1:]
thr, paced = {}, {}
for line in open(path):
    f = line.split()
    case, w = f[1], int(f[2])
    if case.endswith("_paced"):
        paced[(case[:-6], w)] = (float(f[3]), float(f[4]), int(f[5]), float(f[6]))
    else:
        thr[(case, w)] = (float(f[3]), float(f[4]), int(f[5]))
print(f"\nloader benchmark, CPU, {os.cpu_count()} cores, load average {load0} before and {load1} after "
      "(other jobs on the machine slow every column alike)")
rate = lambda x: f"{x[0]:,.0f}" if x else "n/a"
wait = lambda x: f"{x[0]:.3f} ({x[1]:.0%} of {x[2] - 1})" if x else "n/a"
bert_desc = {"plain": "BERT seq 128 from HDF5, batch 64",
             "binned": "BERT seq 128, ours over --bin-size 64 shards (LDDL's loading), PyTorch over the plain ones, batch 64",
             "packed": "BERT seq 128, --pack shards (≤ 3 instances per row), batch 64 rows"}[layout]
for kind, desc in (("bert", bert_desc), ("gpt", "GPT seq 1024 from .bin/.idx, batch 8")):
    ws = sorted(w for (c, w) in thr if c == f"ours_{kind}")
    if not ws:
        continue
    n = thr.get((f"{kind}_numpy", 0))
    print(f"\n{desc}, {thr[(f'ours_{kind}', ws[0])][2]:,} samples per run; paced consumer: {step_ms} ms per batch")
    print("| workers | ours samples/s | PyTorch DataLoader samples/s | ratio (goal ≥ 10×) | numpy, 1 process, samples/s "
          "| ours paced wait ms/batch (batches that waited) | PyTorch paced wait ms/batch (batches that waited) |")
    print("|---:|---:|---:|---:|---:|---|---|")
    for w in ws:
        o, p = thr.get((f"ours_{kind}", w)), thr.get((f"{kind}_torch", w))
        ratio = f"{o[0] / p[0]:.1f}×" if o and p else "n/a"
        print(f"| {w} | {rate(o)} | {rate(p)} | {ratio} | {rate(n)} | {wait(paced.get((f'ours_{kind}', w)))} "
              f"| {wait(paced.get((f'{kind}_torch', w)))} |")
    firsts = [f"{name} {w} worker(s) {paced[(c, w)][3]:.0f} ms" for name, c in (("ours", f"ours_{kind}"), ("PyTorch", f"{kind}_torch"))
              for w in ws if (c, w) in paced]
    print("first batch (start-up; left out of the waits): " + ", ".join(firsts))
PY
