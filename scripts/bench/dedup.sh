#!/usr/bin/env bash
# dedup against datatrove's MinHash pipeline (PyPI datatrove, as its example runs it) and datasketch's
# MinHashLSH, same documents, same n-gram (5), bands (14) and rows (8); scripts/bench/dedup_peer.py runs
# the peers, makes the corpora and measures quality. Issue #49's goals: recall and precision at
# Jaccard ≥ 0.8 no worse than datatrove's, and ≥ 20× datatrove's CPU-seconds for the whole pipeline
# (signatures, buckets, clusters, the kept documents written) on ≥ 200 MB of documents.
#   (a) quality, on the real pages (the enwiki and Greek wikivoyage excerpts' wikiextractor text)
#       with planted near-duplicates (copies with word substitutions, deletions and boilerplate at
#       known rates), and on the real pages as they are: recall and precision of the pairs each tool
#       puts in one cluster against the true Jaccard similarity, computed exactly over the same
#       shingles; ours also with --jaccard-threshold 0.8.
#   (b) speed, on --mb MB of documents cut from the real pages with 30% of their words substituted
#       (one JSON lines file for datatrove; ours reads it cut into 16 MB files, as a corpus in shards):
#       CPU s (user + system) and peak RSS of ours at each --threads, under mpirun -np 2 (1 thread
#       each), and of datatrove on the first --peer-mb MB of the same file (the same file when equal);
#       the ratio is per MB. Peak RSS per million documents comes from two sizes (--mb and half).
# --runs N repeats the speed runs and reports the median CPU s (the machine is shared).
#   scripts/bench/dedup.sh [--mb 200] [--peer-mb 200 (0: no peer)] [--threads "1 2"] [--mpi 2 (0: none)]
#                          [--runs 1] [--quality 1 (0: speed only)] [--build build]
#                          [--dir DIR (keeps the corpora for a rerun)]

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
mb=200 peer_mb=200 threads="1 2" mpi=2 runs=1 quality=1 build=build dir=
bench_args --mb=mb --peer-mb=peer_mb --threads=threads --mpi=mpi --runs=runs --quality=quality --build=build \
  --dir=dir -- "$@"
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "dedup.sh: --runs wants a whole number ≥ 1, not '$runs'" >&2; exit 2; }
en=$enwiki_jsonl
el=$shared_data/wikipedia/elwikivoyage-sample-pages-articles.wikiextractor.jsonl.bz2
bench_require "$en" "dedup.sh: $en not found (set PRETRAIN_SHARED_DATA)"
bench_require "$el" "dedup.sh: $el not found (set PRETRAIN_SHARED_DATA)"
bench_venv
.venv/bin/python -c "import datatrove, datasketch, spacy" 2>/dev/null ||
  { echo "dedup.sh: .venv lacks datatrove/datasketch/spacy (run scripts/setup_deps.sh)" >&2; exit 1; }
bench_build "$build" dedup
exe=$build/datagen/dedup
peer=(.venv/bin/python scripts/bench/dedup_peer.py)
bench_workdir dir dedup out work
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader

# measure LABEL CMD...: runs CMD under /usr/bin/time; sets cpu (user + system s), wall, rss (MB).
measure() {
  local label=$1; shift
  /usr/bin/time -f "%U %S %e %M" -o "$dir/time" "$@" >"$dir/$label.stdout" 2>"$dir/$label.stderr" ||
    { cat "$dir/$label.stderr" >&2; exit 1; }
  read -r user sys wall rss_kb <"$dir/time"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  rss=$((rss_kb / 1024))
}

((quality)) && echo "== (a) quality: recall and precision at Jaccard >= 0.8 (pairs in one cluster)" &&
  printf '| corpus | tool | true pairs | pairs in clusters | recall | precision | removed |\n|---|---|---:|---:|---:|---:|---:|\n'
((quality)) && for corpus in planted real; do
  file=$dir/$corpus.jsonl
  [[ -f $file ]] || "${peer[@]}" corpus "$en" "$el" --out "$file" $([[ $corpus == planted ]] && echo --planted) >/dev/null
  results=()
  for variant in default threshold; do
    rm -rf "$dir/out"
    extra=()
    [[ $variant == threshold ]] && extra=(--jaccard-threshold 0.8)
    "$exe" -q -i "$file" -o "$dir/out" "${extra[@]}" >/dev/null
    "${peer[@]}" ours "$dir/out/dedup-report.jsonl" |
      python3 -c "import json, sys; r = json.load(sys.stdin); r['tool'] = sys.argv[1]; print(json.dumps(r))" \
        "dedup${extra[*]:+ ${extra[*]}}" >"$dir/$corpus-ours-$variant.json"
    results+=("$dir/$corpus-ours-$variant.json")
  done
  rm -rf "$dir/work"
  "${peer[@]}" datatrove "$file" --work "$dir/work" >"$dir/$corpus-datatrove.json" 2>"$dir/datatrove.stderr" ||
    { cat "$dir/datatrove.stderr" >&2; exit 1; }
  "${peer[@]}" datasketch "$file" >"$dir/$corpus-datasketch.json"
  "${peer[@]}" evaluate "$file" "${results[@]}" "$dir/$corpus-datatrove.json" "$dir/$corpus-datasketch.json" |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
for x in r['results']:
    print(f\"| {sys.argv[1]} ({r['documents']} docs) | {x['tool']} | {x['true_pairs']} | {x['predicted_pairs']} | {x['recall']:.4f} | {x['precision']:.4f} | {x['removed']} |\")
" "$corpus"
done

echo
echo "== (b) speed: CPU s of the whole pipeline (user + system), peak RSS"
speed=$dir/speed-$mb.jsonl
[[ -f $speed ]] || "${peer[@]}" corpus "$en" "$el" --mb "$mb" --out "$speed" >/dev/null
# Ours reads it as files of 16 MB (a directory of JSON lines files, as a corpus in shards would be):
# each file is the unit a thread or rank signs and writes. The first half of the files measure
# memory at half the documents.
pieces=$dir/speed-$mb.d half=$dir/speed-$mb.half
if [[ ! -d $pieces ]]; then
  mkdir -p "$pieces.tmp" "$half"
  split -C 16000000 -d -a 4 --additional-suffix=.jsonl "$speed" "$pieces.tmp/part-"
  mv "$pieces.tmp" "$pieces"
  files=("$pieces"/*.jsonl)
  ln "${files[@]:0:$((${#files[@]} / 2))}" "$half/"
fi
speed_bytes=$(stat -c %s "$speed")
docs=$(wc -l <"$speed")
half_docs=$(cat "$half"/*.jsonl | wc -l)
printf '| case | MB | documents | CPU s | wall s | peak RSS MB | MB per CPU-s |\n|---|---:|---:|---:|---:|---:|---:|\n'
median() { tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
declare -A ours_cpu
cases=()
for t in $threads; do cases+=("threads-$t"); done
((mpi > 0)) && cases+=("mpirun-$mpi")
for c in "${cases[@]}"; do
  cpus=()
  for ((r = 0; r < runs; r++)); do
    rm -rf "$dir/out"
    if [[ $c == mpirun-* ]]; then
      measure "$c" mpirun --oversubscribe -np "$mpi" "$exe" -q -i "$pieces" -o "$dir/out" --threads 1
    else
      measure "$c" "$exe" -q -i "$pieces" -o "$dir/out" --threads "${c#threads-}"
    fi
    cpus+=("$cpu")
  done
  cpu=$(echo "${cpus[*]}" | median)
  ours_cpu[$c]=$cpu
  awk -v c="$c" -v b="$speed_bytes" -v d="$docs" -v cpu="$cpu" -v w="$wall" -v rss="$rss" -v runs="${cpus[*]}" \
    'BEGIN { printf "| dedup %s (CPU s of %d runs: %s) | %.0f | %d | %.2f | %.2f | %d | %.1f |\n", c, split(runs, x, " "), runs, b / 1e6, d, cpu, w, rss, b / 1e6 / cpu }'
done
rm -rf "$dir/out"
measure half "$exe" -q -i "$half" -o "$dir/out" --threads 1
half_rss=$rss
rm -rf "$dir/out"
measure full "$exe" -q -i "$pieces" -o "$dir/out" --threads 1
awk -v r1="$half_rss" -v r2="$rss" -v d1="$half_docs" -v d2="$docs" \
  'BEGIN { printf "peak RSS: %d MB at %d documents, %d MB at %d: %.0f MB per million documents beyond a fixed %.0f MB\n", r1, d1, r2, d2, (r2 - r1) / (d2 - d1) * 1e6, r1 - (r2 - r1) / (d2 - d1) * d1 }'
if ((peer_mb > 0)); then
  peer_file=$speed
  if ((peer_mb < mb)); then
    peer_file=$dir/peer-$peer_mb.jsonl
    [[ -f $peer_file ]] || head -c $((peer_mb * 1000000)) "$speed" | sed '$d' >"$peer_file"
  fi
  peer_bytes=$(stat -c %s "$peer_file")
  rm -rf "$dir/work"
  measure datatrove "${peer[@]}" datatrove "$peer_file" --work "$dir/work"
  dt_cpu=$cpu
  awk -v b="$peer_bytes" -v d="$(wc -l <"$peer_file")" -v cpu="$cpu" -v w="$wall" -v rss="$rss" \
    'BEGIN { printf "| datatrove 0.9.0 (1 task per step) | %.0f | %d | %.2f | %.2f | %d | %.3f |\n", b / 1e6, d, cpu, w, rss, b / 1e6 / cpu }'
  for c in "${cases[@]}"; do
    awk -v c="$c" -v ours="${ours_cpu[$c]}" -v b="$speed_bytes" -v peer="$dt_cpu" -v pb="$peer_bytes" \
      'BEGIN { printf "ratio, dedup %s vs datatrove, MB per CPU-s: %.1fx\n", c, (b / ours) / (pb / peer) }'
  done
fi
