#!/usr/bin/env bash
# shard-tool stats against the loader's read speed: one pass of `shard-tool stats` (its whole
# default work: each shard's xxh3 against the manifest, every count, histogram and padding case,
# GPT ids decoded for bytes per token) beside one epoch of bench_loader over the same files with as
# many threads (--threads for stats, --workers for the loader), BERT seq 128 from HDF5 (per
# --layouts: plain, binned by 64, packed by 3) and GPT seq 1024 from Megatron .bin/.idx (GPT-2 BPE;
# the loader's tokens/s are its samples/s x 1024). Then document shards (the excerpt repeated,
# imported with shard-tool import-docs), counted with and without sentences (ICU, the slowest
# statistic), which no loader reads. Median of --runs; reads come from the page cache. The shards
# are loader.sh's (the same cache, bench_sized_shards): a run of either makes them for both.
#   scripts/bench/stats.sh [--bert-samples 100000] [--gpt-tokens 20000000] [--threads 2] [--runs 3]
#     [--layouts "plain binned packed"] [--docs-copies 20] [--data DIR] [--build DIR]

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
bert_samples=100000 gpt_tokens=20000000 threads=2 runs=3 layouts=plain docs_copies=20
cache=${XDG_CACHE_HOME:-$HOME/.cache}/pretrain-bench/loader build=build
bench_args --bert-samples=bert_samples --gpt-tokens=gpt_tokens --threads=threads --runs=runs --layouts=layouts \
  --docs-copies=docs_copies --data=cache --build=build -- "$@"
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
encoder=$shared_data/vocab/gpt2-encoder.json
bench_require "$enwiki_jsonl" "stats.sh: $enwiki_jsonl not found (set PRETRAIN_SHARED_DATA)"
bench_build "$build" make-pretraining-shards shard-tool bench_loader
make=$build/datagen/make-pretraining-shards tool=$build/formats/shard-tool
mkdir -p "$cache"
bench_tmpdir stats

# The shards: loader.sh's, named as it names them.
bert=$cache/bert-seq128-$bert_samples gpt=$cache/gpt2-$gpt_tokens docs=$cache/docs-x$docs_copies
bert_shard_args=(--seq-len 128 --max-predictions 20 --dupe-factor 5 --num-shards 8)
sets=()
for layout in $layouts; do
  case $layout in
    plain) dir=$bert extra=() ;;
    binned) dir=$bert-bin64 extra=(--bin-size 64) ;;
    packed) dir=$bert-pack3 extra=(--pack --max-pack 3) ;;
    *) echo "stats.sh: --layouts takes plain, binned and packed, not $layout" >&2; exit 2 ;;
  esac
  bench_sized_shards "$make" bert "$vocab" "$bert_samples" instances "$dir" "${bert_shard_args[@]}" "${extra[@]}"
  sets+=("bert:$layout:$dir")
done
bench_sized_shards "$make" gpt "$encoder" "$gpt_tokens" tokens "$gpt"
sets+=("gpt:megatron:$gpt")
if [[ ! -f $docs/manifest.json ]]; then
  echo "# importing $docs_copies copies of the excerpt into $docs (once; cached)" >&2
  bench_corpus "$docs_copies" "$bench_tmp/docs.jsonl"
  "$tool" -q import-docs "$bench_tmp/docs.jsonl" -o "$docs.tmp"
  rm -f "$bench_tmp/docs.jsonl"
  mv "$docs.tmp" "$docs"
fi

# RESULT lines: "stats SET FLAGS seconds records tokens disk_bytes text_bytes" and "loader SET samples/s".
results=$bench_tmp/results.txt
: >"$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
stats_run() {  # stats_run SET DIR FLAGS...: one pass, its figures from the JSON
  local set=$1 dir=$2 json=$bench_tmp/stats.json; shift 2
  echo "# $tool -q --threads $threads stats $dir $*" >&2
  "$tool" -q --threads "$threads" stats "$dir" --json "$json" "$@" >/dev/null
  /usr/bin/python3 - "$json" "$set" "${*:-default}" <<'PY' >>"$results"
import json, sys
s, name, flags = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3].replace(" ", "_")
c = s["counts"]
records = c.get("rows", c.get("sequences", c.get("documents")))
tokens = c.get("real_tokens", c.get("tokens")) or 0
print("stats", name, flags, s["seconds"], records, tokens, s["disk_bytes"], c.get("text_bytes") or 0)
PY
}
for ((r = 0; r < runs; ++r)); do
  for entry in "${sets[@]}"; do
    IFS=: read -r kind layout dir <<<"$entry"
    stats_run "$kind-$layout" "$dir"
    if [[ $kind == bert ]]; then
      args=(--kind bert --source "$dir" --batch 64)
    else
      prefix=$(ls "$dir"/*.idx | head -1)
      args=(--kind gpt --source "${prefix%.idx}" --batch 8 --seq-len 1024)
    fi
    echo "# $build/bench/bench_loader ${args[*]} --samples 0 --workers $threads" >&2
    "$build/bench/bench_loader" "${args[@]}" --samples 0 --workers "$threads" 2>/dev/null |
      awk -v set="$kind-$layout" '$1 == "RESULT" { print "loader", set, $4 }' >>"$results"
  done
  stats_run docs "$docs"
  stats_run docs "$docs" --no-sentences
done

/usr/bin/python3 - "$results" "$threads" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date +%F)" <<'PY'
import os, statistics, sys
path, threads, load0, load1, day = sys.argv[1:]
stats, loader = {}, {}
for line in open(path):
    f = line.split()
    if f[0] == "stats":
        stats.setdefault((f[1], f[2]), []).append(tuple(float(x) for x in f[3:]))
    else:
        loader.setdefault(f[1], []).append(float(f[2]))
med = statistics.median
print(f"\nshard-tool stats against the loader, {threads} threads / workers, {os.cpu_count()} cores, {day}, "
      f"load average {load0} before and {load1} after; median of {len(next(iter(stats.values())))} runs")
print("| shards | records | stats: seconds | stats: rate | loader (bench_loader, one epoch) | stats ÷ loader |")
print("|---|---:|---:|---:|---:|---:|")
for (name, flags), runs in stats.items():
    seconds = med(r[0] for r in runs)
    records, tokens, disk, text = runs[0][1:]
    if name.startswith("bert"):
        ours, theirs = records / seconds, med(loader.get(name, [0]))
        label, unit = f"BERT seq 128, {name.split('-')[1]}", "rows/s"
    elif name.startswith("gpt"):
        ours, theirs = tokens / seconds, med(loader.get(name, [0])) * 1024
        label, unit = "GPT seq 1024, Megatron (GPT-2 BPE)", "tokens/s"
    else:
        ours, theirs = text / 1e6 / seconds, 0
        label = "documents" + (", without sentences" if "no-sentences" in flags else ", with sentences (ICU)")
        unit = "MB of text/s"
    loader_cell = f"{theirs:,.0f} {unit}" if theirs else "—"
    ratio = f"{ours / theirs:.2f}×" if theirs else "—"
    rate = f"{ours:,.1f} {unit}" if unit.startswith("MB") else f"{ours:,.0f} {unit}"
    print(f"| {label} | {records:,.0f} | {seconds:.3f} | {rate} ({disk / 1e6 / seconds:,.0f} MB/s on disk) "
          f"| {loader_cell} | {ratio} |")
PY
