#!/usr/bin/env bash
# Data preparation at corpus scale, measured stage by stage, and projected to the full enwiki.
#   scripts/bench/scale.sh [--gb 10] [--runs "t1 t2 np2"] [--dir DIR] [--build build] [--keep 0]
#                          [--stages "wikiprep tokenizer bert128 loader bert512 gpt peer"] [--append 0]
#                          [--dle-git DIR]
# The dump: the real shared pages (enwiki, jawiki and elwikivoyage excerpts, as wikiprep.sh builds
# its input) repeated to >= --gb GB of XML, as a multistream .xml.bz2 like the dumps Wikimedia
# publishes: a ~256 MB body is compressed once (pbzip2 -9, one stream per block) and repeated
# between a head stream (<mediawiki>, <siteinfo>) and a tail stream (</mediawiki>), so a 10 GB dump
# takes minutes to build, not hours. Then, for each run (t1: --threads 1; t2: --threads 2; np2:
# mpirun -np 2 with one thread per rank):
#   wikiprep → train-tokenizer (WordPiece 30522 on the first docs shard; one process, so not under
#   np2) → make-pretraining-shards BERT seq 128 dupe 5, BERT seq 512 dupe 2, GPT Megatron → the
#   loader over the BERT 128 shards for one epoch (bench_loader; t1 and t2 only, it is one process)
# printing per stage: wall s, CPU s (user + system of the whole job), peak RSS of the largest
# process, output MB, peak disk MB of the output directory while the stage ran (its work files
# included: make-pretraining-shards' token store, spill and GPT buckets, each freed once the
# stages after it are done) and peak disk / output (issue #49's bound: at most 1.5), which the
# projection scales to enwiki. Disk is what du counts (allocated blocks), polled every 0.5 s.
# Outputs of a run are removed when the next stage no longer needs them.
# Ends with a projection for enwiki (≈ 23 GB bz2, ≈ 100 GB XML, ≈ 20 GB of text) on 16 and 64 cores
# and on 4 nodes of 64, from the t1 CPU seconds per MB and the scaling the t2 and np2 runs showed;
# and the same for NVIDIA's scripts (wikiextractor, create_pretraining_data.py) from their per-core
# rates measured here on slices (wikiextractor on 20 MB of the XML, Google's algorithm on 5 MB of the
# text: scripts/bench/shards_peer.py, a stand-in faster than NVIDIA's script, with HF's Rust tokenizer
# and no writing; with --dle-git, a clone of NVIDIA/DeepLearningExamples (default $DLE_GIT), also
# NVIDIA's create_pretraining_data.py itself, unmodified, and the projection uses its rate).
# A long measurement can be finished in parts on a shared machine: --stages runs some stages (a run
# without wikiprep reads the documents a --keep 1 run left in DIR/<run>-docs), --append 1 keeps the
# rows DIR/results.tsv already has (a stage measured again replaces its row in the tables).

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
gb=10 runs="t1 t2 np2" dir="" build=build keep=0 stages="wikiprep tokenizer bert128 loader bert512 gpt peer" append=0
dle_git=${DLE_GIT:-}
bench_args --gb=gb --runs=runs --dir=dir --build=build --keep=keep --stages=stages --append=append --dle-git=dle_git -- "$@"
selected() { [[ " $stages " == *" $1 "* ]]; }
data=$shared_data/wikipedia
bench_require "$data" "no shared data at $data (set PRETRAIN_SHARED_DATA)"
bench_require .venv/bin/wikiextractor "no .venv/bin/wikiextractor: run scripts/setup_deps.sh"
for tool in pbzip2 bzip2 /usr/bin/time; do command -v $tool >/dev/null || { echo "scale.sh needs $tool" >&2; exit 1; }; done
bench_build_missing "$build" datagen/wikiprep datagen/make-pretraining-shards tokenizer/train-tokenizer bench/bench_loader
if [[ -z $dir ]]; then
  bench_tmpdir scale
  dir=$bench_tmp
fi
mkdir -p "$dir"
py=/usr/bin/python3
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
encoder=$shared_data/vocab/gpt2-encoder.json
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe -np 2 --mca btl self,vader --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)

# ---- the dump ---------------------------------------------------------------------------------
dump=$dir/enwiki-like-${gb}gb-multistream.xml.bz2
if [[ ! -s $dump ]]; then
  echo "# building $dump" >&2
  body_mb=$($py -c "import sys; print(max(20, min(256, int(float(sys.argv[1]) * 1000 / 4))))" "$gb")
  $py scripts/bench/dump_pages.py "$data" "$dir" "$body_mb" --parts
  body_bytes=$(stat -c %s "$dir/body.xml")
  copies=$($py -c "import math, sys; print(math.ceil(float(sys.argv[1]) * 1e9 / int(sys.argv[2])))" "$gb" "$body_bytes")
  pbzip2 -9 -c "$dir/body.xml" >"$dir/body.xml.bz2"
  bzip2 -9 -c "$dir/head.xml" >"$dump.tmp"
  for ((i = 0; i < copies; ++i)); do cat "$dir/body.xml.bz2"; done >>"$dump.tmp"
  bzip2 -9 -c "$dir/tail.xml" >>"$dump.tmp"
  echo $(( $(stat -c %s "$dir/head.xml") + copies * body_bytes + $(stat -c %s "$dir/tail.xml") )) >"$dump.xml-bytes"
  mv "$dump.tmp" "$dump"
fi
xml_bytes=$(cat "$dump.xml-bytes")
echo "# dump: $((xml_bytes / 1000000)) MB of XML, $(( $(stat -c %s "$dump") / 1000000 )) MB bz2" >&2

# ---- runs -------------------------------------------------------------------------------------
results=$dir/results.tsv
((append)) || : >"$results"
# measure RUN STAGE OUTPUT CMD...: wall, CPU and peak RSS of CMD, the size of OUTPUT at the end, and
# its peak size while CMD ran (sampled every 0.5 s; the work files live under the output directory).
measure() {
  local run=$1 stage=$2 output=$3; shift 3
  echo "# $run: $stage: $*" >&2
  local t0 t1 pid now peak=0
  t0=$(date +%s.%N)
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$@" >"$dir/stdout.txt" 2>"$dir/stderr.txt" &
  pid=$!
  local polls=0
  while kill -0 "$pid" 2>/dev/null; do  # checks every 0.1 s, so the wall time stays exact
    if ((polls++ % 5 == 0)); then
      now=$( (du -sm "$output" 2>/dev/null || true) | awk '{print $1}')
      ((${now:-0} > peak)) && peak=$now
    fi
    sleep 0.1
  done
  wait "$pid" || { tail -20 "$dir/stderr.txt" >&2; exit 1; }
  t1=$(date +%s.%N)
  local cpu rss mb
  cpu=$(awk '{print $2 + $3}' "$dir/time.txt")
  rss=$(awk '{print $4}' "$dir/time.txt")
  mb=$( (du -sm "$output" 2>/dev/null || true) | awk '{print $1}')
  ((${mb:-0} > peak)) && peak=$mb
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$stage" "$($py -c "print(round($t1 - $t0, 2))")" "$cpu" "$rss" "${mb:-0}" \
    "$peak" >>"$results"
}
for run in $runs; do
  case $run in
    t1) launch=() threads=1 ;;
    t2) launch=() threads=2 ;;
    np2) launch=("${mpirun[@]}") threads=1 ;;
    *) echo "unknown run $run (t1, t2 or np2)" >&2; exit 2 ;;
  esac
  docs=$dir/$run-docs
  if selected wikiprep; then
    rm -rf "$docs"
    measure "$run" wikiprep "$docs" "${launch[@]}" "$build/datagen/wikiprep" "$dump" -o "$docs" --threads "$threads" -q
  fi
  bench_require "$docs/manifest.json" "scale.sh: no documents in $docs (run the wikiprep stage with --keep 1)"
  printf '%s\ttext bytes\t%s\n' "$run" \
    "$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["stats"]["text_bytes"])' "$docs/manifest.json")" >>"$results"
  if [[ $run != np2 ]] && selected tokenizer; then
    first=$(ls "$docs"/docs-*.jsonl.zst | head -1)
    measure "$run" train-tokenizer "$dir/$run-vocab" "$build/tokenizer/train-tokenizer" --kind wordpiece \
      --vocab-size 30522 -o "$dir/$run-vocab" "$first" --threads "$threads" -q
    rm -rf "$dir/$run-vocab"
  fi
  # About 16 MB of text per shard (NVIDIA's enwiki sets have 256-4096 shards): the loader decodes
  # whole shards into its shuffle windows, so a single huge shard would be held in memory whole.
  text_bytes=$(awk -v r="$run" '$1 == r && $2 == "text" {print $4}' "$results" | tail -n 1)
  shards=$((text_bytes / 16000000 + 1))
  for stage in bert128 bert512 gpt; do
    selected $stage || continue
    out=$dir/$run-$stage
    rm -rf "$out"  # a --keep 1 run's output would count in this one's disk
    case $stage in
      bert128) args=(--model bert --tokenizer "$vocab" --seq-len 128 --dupe-factor 5) ;;
      bert512) args=(--model bert --tokenizer "$vocab" --seq-len 512 --dupe-factor 2) ;;
      gpt) args=(--model gpt --tokenizer "$encoder") ;;
    esac
    measure "$run" "shards $stage" "$out" "${launch[@]}" "$build/datagen/make-pretraining-shards" -i "$docs" \
      -o "$out" "${args[@]}" --num-shards "$shards" --threads "$threads" -q
    if [[ $stage == bert128 && $run != np2 ]] && selected loader; then
      measure "$run" "loader epoch bert128" "$out/none" "$build/bench/bench_loader" --kind bert --source "$out" \
        --samples 0 --workers "$threads" --batch 64
      grep RESULT "$dir/stdout.txt" | awk -v r="$run" '{print r "\tloader samples\t" $5 "\t" $6}' >>"$results"
    fi
    ((keep)) || rm -rf "$out"
  done
  ((keep)) || rm -rf "$docs"
done

# ---- NVIDIA's scripts, per core, on slices ----------------------------------------------------
# wikiextractor on 20 MB of the XML, Google's algorithm (shards_peer.py: HF fast tokenizer) on 5 MB
# of its sentences (Google's format, from wikiprep --format sentences), dupe 5, and NVIDIA's script
# itself there with --dle-git; ours on the same slices in the same run, one thread each.
if selected peer; then
  $py - "$dir/head.xml" "$dir/body.xml" "$dir/slice.xml" <<'EOF'
import sys
head, body, out = sys.argv[1], sys.argv[2], sys.argv[3]
x = open(body, "rb").read(24_000_000)
end = x.rindex(b"</page>", 0, 20_000_000) + len(b"</page>\n")
open(out, "wb").write(open(head, "rb").read() + x[:end] + b"</mediawiki>\n")
EOF
  rm -rf "$dir/we" "$dir/slice-docs" "$dir/slice-sentences"
  measure peer "wikiextractor 20 MB" "$dir/we" .venv/bin/wikiextractor --json --no-templates --processes 1 -o "$dir/we" "$dir/slice.xml"
  measure peer "wikiprep 20 MB" "$dir/slice-docs" "$build/datagen/wikiprep" "$dir/slice.xml" -o "$dir/slice-docs" --threads 1 -q
  "$build/datagen/wikiprep" "$dir/slice.xml" -o "$dir/slice-sentences" --format sentences -q
  $py - "$dir/slice-sentences" "$dir/peer.txt" <<'EOF'
import glob, sys
text = "".join(open(f, encoding="utf-8").read() for f in sorted(glob.glob(sys.argv[1] + "/sentences-*.txt")))
cut = text.find("\n\n", 5_000_000)
open(sys.argv[2], "w", encoding="utf-8").write(text[: cut + 2] if cut > 0 else text)
EOF
  peer_mb=$($py -c "import os, sys; print(round(os.path.getsize(sys.argv[1]) / 1e6, 1))" "$dir/peer.txt")
  measure peer "stand-in $peer_mb MB" "$dir/none" .venv/bin/python scripts/bench/shards_peer.py --text "$dir/peer.txt" \
    --vocab "$vocab" --dupe 5
  if [[ -n $dle_git ]]; then
    bench_nvidia_script "$dle_git" "$dir/nvidia"
    declare -a nvidia
    bench_nvidia_command nvidia "$dir/nvidia" "$vocab" "$dir/peer.txt" "$dir/nvidia.hdf5" 5  # dupe 5, as ours below
    measure peer "create_pretraining_data.py $peer_mb MB" "$dir/nvidia.hdf5" "${nvidia[@]}"
    rm -rf "$dir/nvidia.hdf5" "$dir/nvidia"
  fi
  measure peer "make-pretraining-shards $peer_mb MB" "$dir/peer-out" "$build/datagen/make-pretraining-shards" -i "$dir/peer.txt" \
    --tokenizer "$vocab" -o "$dir/peer-out" --dupe-factor 5 --threads 1 -q
  rm -rf "$dir/we" "$dir/slice-docs" "$dir/slice-sentences" "$dir/peer-out"
fi

# ---- tables -----------------------------------------------------------------------------------
$py - "$results" "$xml_bytes" "$(stat -c %s "$dump")" <<'EOF'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
xml_mb, bz2_mb = int(sys.argv[2]) / 1e6, int(sys.argv[3]) / 1e6
stage = collections.OrderedDict()
samples, text_bytes = {}, 1
for r in rows:
    if r[1] == "loader samples":
        samples[r[0]] = (float(r[2]), float(r[3]))
    elif r[1] == "text bytes":
        text_bytes = int(r[2])
    else:
        stage[r[0], r[1]] = (float(r[2]), float(r[3]), int(r[4]) / 1024, int(r[5]), int(r[6]))
print(f"\nscale.sh: a {xml_mb / 1000:.1f} GB XML dump ({bz2_mb / 1000:.2f} GB multistream bz2) of the real shared pages")
def ratio(disk, mb):  # peak disk over the output it leaves; none for a stage without output
    return f"{disk / mb:.2f}" if mb > 0 else "-"
print("| run | stage | wall s | CPU s | peak RSS MB | output MB | peak disk MB | peak disk / output |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for (run, name), (wall, cpu, rss, mb, disk) in stage.items():
    extra = ""
    if name.startswith("loader") and run in samples:
        extra = f" ({samples[run][1] / 1e6:.2f} M samples, {samples[run][1] / wall:,.0f} samples/s)"
    print(f"| {run} | {name}{extra} | {wall:,.1f} | {cpu:,.1f} | {rss:,.0f} | {mb:,} | {disk:,} | {ratio(disk, mb)} |")
# Projection to enwiki: CPU seconds per MB from t1 (the one-thread run), divided over the cores at
# the efficiency the 2-thread and 2-rank runs showed (wall t1 / (2 x wall t2)); NVIDIA's scripts at
# their per-core rates measured on the slices, with perfect scaling (one process per core and shard).
EN_XML, EN_TEXT = 100_000, 20_000  # MB
text_mb = text_bytes / 1e6  # the documents' JSON lines: what the later stages read
def eff(name, run):
    a, b = stage.get(("t1", name)), stage.get((run, name))
    return min(1.0, a[0] / (2 * b[0])) if a and b and b[0] > 0 else 1.0
names = [n for (r, n) in stage if r == "t1" and not n.startswith("loader")]
print("\nprojection for enwiki (100 GB XML, 20 GB text), minutes; CPU s per input MB from t1, "
      "scaling efficiency from t2 (cores) and np2 (ranks):")
print("| stage | CPU s per MB in | efficiency t2 / np2 | 16 cores | 64 cores | 4 nodes x 64 | peak disk GB | peak disk / output |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
totals = [0.0, 0.0, 0.0]
for n in names:
    wall, cpu, rss, mb, disk = stage["t1", n]
    scale = EN_XML / xml_mb if n == "wikiprep" else EN_TEXT / text_mb  # enwiki's input over ours
    per_mb = cpu / (xml_mb if n == "wikiprep" else text_mb)
    work = per_mb * (EN_XML if n == "wikiprep" else EN_TEXT)
    disk_gb = disk * scale / 1000 if n != "train-tokenizer" else disk / 1000
    e_core = eff(n, "t2")
    e_rank = eff(n, "np2") if ("np2", n) in stage else e_core
    mins = [work / (16 * e_core) / 60, work / (64 * e_core) / 60, work / (256 * e_core * e_rank) / 60]
    if n == "train-tokenizer":  # trained on one shard whatever the corpus: a fixed cost
        mins = [wall / 60] * 3
    totals = [t + m for t, m in zip(totals, mins)]
    print(f"| {n} | {per_mb:.3f} | {e_core:.2f} / {e_rank:.2f} | {mins[0]:,.1f} | {mins[1]:,.1f} | {mins[2]:,.1f} | "
          f"{disk_gb:,.0f} | {ratio(disk, mb)} |")
print(f"| **all** | | | **{totals[0]:,.0f}** | **{totals[1]:,.0f}** | **{totals[2]:,.0f}** |")
we, wp = stage.get(("peer", "wikiextractor 20 MB")), stage.get(("peer", "wikiprep 20 MB"))
peer = {n.split()[0]: (float(n.split()[1]), v) for (r, n), v in stage.items() if r == "peer" and n.endswith(" MB")}
# NVIDIA's create_pretraining_data.py where it was measured (--dle-git), else the faster stand-in.
peer_mb, cp = peer.get("create_pretraining_data.py", (1, None))
cp_name = "create_pretraining_data.py"
if cp is None:
    (peer_mb, cp), cp_name = peer.get("stand-in", (1, None)), "Google's algorithm with HF's tokenizer (a stand-in faster than create_pretraining_data.py)"
sp = peer.get("stand-in", (1, None))[1]
mp = peer.get("make-pretraining-shards", (1, None))[1]
if we and wp and cp and mp:
    we_min = we[1] / 20 * EN_XML / 16 / 60
    cp_min = cp[1] / peer_mb * EN_TEXT / 16 / 60
    print(f"\nNVIDIA's scripts at their measured per-core rates, 16 cores, perfect scaling: wikiextractor "
          f"{we_min:,.0f} min ({we[1] / wp[1]:.0f}x our CPU s on the same 20 MB), {cp_name} "
          f"dupe 5 {cp_min:,.0f} min ({cp[1] / mp[1]:.0f}x ours on the same {peer_mb} MB): {we_min + cp_min:,.0f} min "
          f"against our {totals[0]:,.0f}; on 64 cores {(we_min + cp_min) / 4:,.0f} against {totals[1]:,.0f}.")
    if sp and sp is not cp:
        print(f"The stand-in (Google's algorithm with HF's tokenizer) took {sp[1] / mp[1]:.0f}x our CPU s on the same slice.")
EOF
