#!/usr/bin/env bash
# LDDL's sequence-length binning and MLPerf-style packing measured end to end on real Wikipedia text
# (the enwiki excerpt's wikiextractor documents), for each --seq-lens: make-pretraining-shards makes
# the same instances unbinned, with --bin-size and with --pack (dupe 1, a 5% valid split), then
#   1. tokens a trainer computes per real token, from each output's shards (padding.py);
#   2. the loader: our samples/s over the binned output (bench_loader, 2 workers) against the h5py +
#      torch DataLoader path over the unbinned files (loader_peer.py, 2 workers); target ≥ 10x (this
#      corpus is small: loader.sh --bert-layout binned|packed measures it on 200k samples);
#   3. the CPU trainer: bert_pretrain --model, --steps steps on each output, instances/s over the
#      steps after the first two, and the held-out loss on the same (unbinned) valid split after the
#      same steps and about the same instances: a packed row holds several, so packed steps take
#      --batch / (instances per row) rows, as MLPerf's packed runs shrink their batch, and the loss
#      compares after the same updates and real tokens.
#   scripts/bench/binning.sh [--seq-lens "128 512"] [--bin-size 64] [--model small] [--steps 20]
#                            [--batch 8] [--threads 2]

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
seq_lens="128 512" bin_size=64 model=small steps=20 batch=8 threads=2
bench_args --seq-lens=seq_lens --bin-size=bin_size --model=model --steps=steps --batch=batch --threads=threads -- "$@"
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
bench_require "$enwiki_jsonl" "binning.sh: $enwiki_jsonl not found (set PRETRAIN_SHARED_DATA)"
bench_venv
bench_build build make-pretraining-shards bert_pretrain bench_loader
bench_tmpdir binning
dir=$bench_tmp
results=$dir/results.txt

for s in $seq_lens; do
  predictions=$(((s * 15 + 50) / 100))
  for kind in plain binned packed; do
    extra=()
    [[ $kind == binned ]] && extra=(--bin-size "$bin_size")
    [[ $kind == packed ]] && extra=(--pack --max-pack 3)
    build/datagen/make-pretraining-shards -q --model bert -i "$enwiki_jsonl" --tokenizer "$vocab" -o "$dir/$kind$s" \
      --seq-len "$s" --max-predictions "$predictions" --dupe-factor 1 --valid-fraction 0.05 "${extra[@]}" >/dev/null
  done
  .venv/bin/python scripts/bench/padding.py "$dir/plain$s" --bin-size "$bin_size" --max-pack 3 \
    --label "enwiki excerpt, seq $s" --made-binned "$dir/binned$s" --made-packed "$dir/packed$s" |
    bench_collect "$results" padding
  build/bench/bench_loader --kind bert --source "$dir/binned$s" --batch 64 --workers 2 2>/dev/null |
    bench_collect "$results" loader "$s"
  .venv/bin/python scripts/bench/loader_peer.py --case bert_torch --source "$dir/plain$s" --batch 64 --workers 2 \
    2>/dev/null | bench_collect "$results" loader "$s"
  for kind in plain binned packed; do
    kind_batch=$batch
    if [[ $kind == packed ]]; then  # rows holding about --batch instances
      kind_batch=$(.venv/bin/python -c "import json, sys; m = json.load(open(sys.argv[1]))
print(max(1, round($batch / m['stats']['instances_per_row'])))" "$dir/packed$s/manifest.json")
    fi
    build/trainer/bert_pretrain --data "$dir/$kind$s" --eval-data "$dir/plain$s/valid" --eval-interval "$steps" \
      --eval-iters 4 --model "$model" --batch-size "$kind_batch" --max-steps "$steps" --threads "$threads" --seed 7 \
      --lr 1e-4 --warmup 2 --log-dir "$dir/log-$kind$s" >/dev/null 2>&1
    .venv/bin/python - "$dir/log-$kind$s/metrics.jsonl" "$kind" "$s" <<'PY' | bench_collect "$results" trainer
import json, sys
path, kind, s = sys.argv[1:]
records = [json.loads(line) for line in open(path)]
steps = [r for r in records if not r.get("eval") and r["step"] > 2]
evals = [r for r in records if r.get("eval")]
samples, ms = sum(r["samples"] for r in steps), sum(r["ms"] for r in steps)
trained = sum(r["samples"] for r in records if not r.get("eval"))
print(f"RESULT {s} {kind} {samples / ms * 1e3:.3f} {sum(r['tokens'] for r in steps) / samples:.1f} "
      f"{evals[-1]['eval_loss']:.4f} {trained} {len([r for r in records if not r.get('eval')])}")
PY
  done
done

.venv/bin/python - "$results" "$bin_size" <<'PY'
import sys
rows = [line.split() for line in open(sys.argv[1])]
bin_size = sys.argv[2]
pad = {(r[1], r[2]): float(r[3]) for r in rows if r[0] == "padding"}
seqs = sorted({r[1] for r in rows if r[0] == "padding"}, key=int)
print(f"\n| seq | tokens computed per real token: unbinned | --bin-size {bin_size}, our shards | reference (padding.py) "
      "| --pack, our shards | reference FFD (padding.py) |")
print("|---:|---:|---:|---:|---:|---:|")
for s in seqs:
    print(f"| {s} | {pad[(s, 'unbinned')]:.3f} | {pad[(s, 'made_bin' + bin_size)]:.3f} | {pad[(s, 'bin' + bin_size)]:.3f} "
          f"| {pad[(s, 'made_packed3')]:.3f} | {pad[(s, 'packed3')]:.3f} |")
print("\n| seq | loader samples/s: ours, binned | h5py + DataLoader, unbinned | ratio |")
print("|---:|---:|---:|---:|")
for s in seqs:
    ours = next(float(r[4]) for r in rows if r[0] == "loader" and r[1] == s and r[2] == "ours_bert")
    peer = next(float(r[4]) for r in rows if r[0] == "loader" and r[1] == s and r[2] == "bert_torch")
    print(f"| {s} | {ours:,.0f} | {peer:,.0f} | {ours / peer:.1f}x |")
print("\n| seq | trainer instances/s: unbinned | binned | packed | ratio binned, packed "
      "| tokens computed per instance: unbinned, binned, packed "
      "| held-out loss: unbinned, binned, packed | after steps (instances trained): unbinned, binned, packed |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in seqs:
    t = {r[2]: r for r in rows if r[0] == "trainer" and r[1] == s}
    p, b, k = t["plain"], t["binned"], t["packed"]
    rate = lambda r: float(r[3])
    print(f"| {s} | {rate(p):.2f} | {rate(b):.2f} | {rate(k):.2f} | {rate(b) / rate(p):.2f}x, {rate(k) / rate(p):.2f}x "
          f"| {p[4]}, {b[4]}, {k[4]} | {p[5]}, {b[5]}, {k[5]} | {p[7]} ({p[6]}), {b[7]} ({b[6]}), {k[7]} ({k[6]}) |")
PY
