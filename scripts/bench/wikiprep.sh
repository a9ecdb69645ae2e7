#!/usr/bin/env bash
# wikiprep speed against wikiextractor and against the bz2 decode floor, measured in the same run:
#   scripts/bench/wikiprep.sh [--xml-mb N] [--we-mb M] [--pages mix|en] [--threads "1 2"] [--dir DIR] [--build DIR]
# Input: the real samples' pages repeated to >= N MB of XML (default 500) under the enwiki
# sample's <siteinfo> (scripts/bench/dump_pages.py; --pages mix, the default: enwiki main, jawiki and
# elwikivoyage; en: the English samples, the pages the plain-XML goal was stated on), also
# recompressed as one bz2 stream (lbzip2,
# or bzip2 when it is missing) and as a multistream file (pbzip2: one stream per block).
# For each thread count: our pages/s and XML MB/s on plain XML, single-stream bz2 and multistream;
# `lbzip2 -dc -n T > /dev/null` (the decode floor); wikiextractor 3.1.0 (.venv, `--json
# --no-templates --processes T`) on the first M MB of the XML (default 60: it runs at ~3 MB/s);
# `bzip2 -dc` once (libbz2's own decode on one core). Peak RSS from /usr/bin/time -v. Goals (issue
# 18): plain XML >= 25x wikiextractor per CPU-second; bz2 CPU per MB <= 1.15x bzip2 -dc's and a
# wall-time speed-up >= 0.9 x threads, lbzip2's figures beside them; peak RSS <= 1 GB. Ends with the projected time for the full enwiki dump
# (~22 GB bz2, ~95 GB XML) on 16 cores, assuming the per-core rates scale.

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
xml_mb=500 we_mb=60 pages=mix threads="1 2" dir="" build=build
bench_args --xml-mb=xml_mb --we-mb=we_mb --pages=pages --threads=threads --dir=dir --build=build -- "$@"
data=$shared_data/wikipedia
bench_require "$data" "no shared data at $data (set PRETRAIN_SHARED_DATA)"
wikiprep=$build/datagen/wikiprep
bench_build_missing "$build" datagen/wikiprep
wikiextractor=.venv/bin/wikiextractor
bench_require $wikiextractor "no $wikiextractor: run scripts/setup_deps.sh"
bench_workdir dir wikiprep out we
py=/usr/bin/python3

# ---- input ------------------------------------------------------------------------------------
xml=$dir/big-${pages}-${xml_mb}mb.xml
if [[ ! -s $xml ]]; then
  echo "# building $xml (>= $xml_mb MB of XML)" >&2
  $py scripts/bench/dump_pages.py "$data" "$xml" "$xml_mb" --pages "$pages"
fi
single=$xml.bz2 multi=${xml%.xml}.multistream.xml.bz2 slice=$dir/slice-${we_mb}mb.xml
if [[ ! -s $single ]]; then
  echo "# compressing $single (single stream)" >&2
  if command -v lbzip2 >/dev/null; then lbzip2 -9 -c "$xml" >"$single"; else bzip2 -9 -c "$xml" >"$single"; fi
fi
if [[ ! -s $multi ]]; then
  echo "# compressing $multi (multistream)" >&2
  pbzip2 -9 -c "$xml" >"$multi"
fi
if [[ ! -s $slice ]]; then  # the first we_mb MB of pages, closed as a dump
  $py - "$xml" "$slice" "$we_mb" <<'EOF'
import sys
src, out, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = open(src, "rb").read(mb * 1_000_000 + 4_000_000)
end = x.rindex(b"</page>", 0, mb * 1_000_000) + len(b"</page>\n")
open(out, "wb").write(x[:end] + b"</mediawiki>\n")
EOF
fi

# ---- runs -------------------------------------------------------------------------------------
results=$dir/results.tsv
: >"$results"
measure() {  # measure NAME INPUT THREADS CMD... : wall seconds and peak RSS into $results
  local name=$1 input=$2 t=$3; shift 3
  rm -rf "$dir/out" "$dir/we"
  echo "# $name, $t thread(s): $*" >&2
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -v -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/stderr.txt" || { cat "$dir/stderr.txt" >&2; exit 1; }
  t1=$(date +%s.%N)
  local rss cpu pages=0
  rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$dir/time.txt")
  cpu=$(awk -F': ' '/User time|System time/{s+=$2} END{print s}' "$dir/time.txt")
  if [[ -f $dir/out/manifest.json ]]; then
    pages=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["stats"]["pages_seen"])' "$dir/out/manifest.json")
  elif [[ -d $dir/we ]]; then
    pages=$(grep -o 'wrote [0-9]* article' "$dir/stderr.txt" | grep -o '[0-9]*' || echo 0)
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$input" "$t" "$($py -c "print($t1-$t0)")" \
    "$(stat -c %s "$input")" "$rss" "$pages" "$cpu" >>"$results"
}
for t in $threads; do
  measure "wikiprep xml" "$xml" "$t" "$wikiprep" "$xml" -o "$dir/out" --threads "$t" -q
  measure "wikiprep bz2" "$xml" "$t" "$wikiprep" "$single" -o "$dir/out" --threads "$t" -q
  measure "wikiprep bz2 multistream" "$xml" "$t" "$wikiprep" "$multi" -o "$dir/out" --threads "$t" -q
  measure "lbzip2 -dc" "$xml" "$t" lbzip2 -dc -n "$t" "$single"
  [[ $t == 1 ]] && measure "bzip2 -dc" "$xml" 1 bzip2 -dc "$single"  # libbz2's own decode, one core
  measure "wikiextractor" "$slice" "$t" "$wikiextractor" --json --no-templates --processes "$t" -o "$dir/we" "$slice"
done

# ---- table ------------------------------------------------------------------------------------
$py - "$results" "$single" "$xml" <<'EOF'
import os, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
bz2_ratio = os.path.getsize(sys.argv[2]) / os.path.getsize(sys.argv[3])
we_slice = int(next(r for r in rows if r[0] == "wikiextractor")[4])
print(f"input: {os.path.getsize(sys.argv[3]) / 1e6:.0f} MB XML, {os.path.getsize(sys.argv[2]) / 1e6:.0f} MB bz2 "
      f"(wikiextractor: a {we_slice / 1e6:.0f} MB slice); {os.cpu_count()} cores on this machine")
print(f"| {'run':<26} | thr | {'wall s':>7} | {'CPU s':>6} | {'pages/s':>8} | {'XML MB/s':>8} | {'MB/s/core':>9} | {'MB/CPU-s':>8} | {'RSS MB':>6} |")
print(f"|{'-' * 28}|-----|{'-' * 9}|{'-' * 8}|{'-' * 10}|{'-' * 10}|{'-' * 11}|{'-' * 10}|{'-' * 8}|")
rate, cpu_rate = {}, {}
for name, _, t, wall, size, rss, pages, cpu in rows:
    t, wall, cpu, mb = int(t), float(wall), float(cpu), int(size) / 1e6
    rate[name, t] = mb / wall
    cpu_rate[name, t] = mb / max(cpu, 1e-9)
    pps = f"{int(pages) / wall:8.0f}" if int(pages) else f"{'-':>8}"
    print(f"| {name:<26} | {t:>3} | {wall:7.2f} | {cpu:6.2f} | {pps} | {mb / wall:8.1f} | {mb / wall / t:9.1f} | "
          f"{mb / max(cpu, 1e-9):8.1f} | {int(rss) / 1024:6.0f} |")
print("pages/s of wikiextractor: the articles it wrote. MB/CPU-s: XML MB per second of CPU time (user+sys),")
print("a per-core rate the machine's other load does not distort.")
print()
peak = max(int(r[5]) for r in rows if r[0].startswith("wikiprep")) / 1024
# Issue 18's goals: plain XML >= 25x wikiextractor per CPU-second; bz2: CPU per MB <= 1.15x libbz2's
# own decode (bzip2 -dc), and wall time scaling >= 0.9 x threads; lbzip2's figures beside them.
bzip2_cpu = 1 / cpu_rate["bzip2 -dc", 1] if ("bzip2 -dc", 1) in cpu_rate else None
ts = sorted({int(r[2]) for r in rows})
for t in ts:
    plain_cpu = cpu_rate["wikiprep xml", t] / cpu_rate["wikiextractor", t]
    line = f"{t} thread(s): plain XML {plain_cpu:.1f}x wikiextractor per CPU-second (goal >= 25x) {'OK' if plain_cpu >= 25 else 'MISSED'}"
    if bzip2_cpu:
        ours, lb = 1 / cpu_rate["wikiprep bz2", t], 1 / cpu_rate["lbzip2 -dc", t]
        line += (f"; bz2 CPU per MB {ours / bzip2_cpu:.2f}x bzip2 -dc's (goal <= 1.15) {'OK' if ours / bzip2_cpu <= 1.15 else 'MISSED'}"
                 f", lbzip2 {lb / bzip2_cpu:.2f}x")
    if t > 1:
        scale = rate["wikiprep bz2", t] / rate["wikiprep bz2", ts[0]]
        lb_scale = rate["lbzip2 -dc", t] / rate["lbzip2 -dc", ts[0]]
        line += (f"; bz2 wall-time speed-up {scale:.2f} on {t} threads (goal >= {0.9 * t:.1f}) "
                 f"{'OK' if scale >= 0.9 * t else 'MISSED'}, lbzip2 {lb_scale:.2f}")
    print(line)
print(f"peak RSS of wikiprep: {peak:.0f} MB (goal <= 1024) {'OK' if peak <= 1024 else 'MISSED'}")
# Projection: the best per-core rate measured (wall or CPU time) times 16 cores, i.e. assuming the
# stages scale as the pipeline lets them (bz2 blocks and cleaning in parallel, parsing serial).
for name, label in (("wikiprep bz2", "wikiprep on bz2 (22 GB)"), ("wikiprep xml", "wikiprep on plain XML"),
                    ("lbzip2 -dc", "lbzip2 -dc alone"), ("wikiextractor", "wikiextractor")):
    per_core = max(max(rate[n, t] / t, cpu_rate[n, t]) for n, t in rate if n == name)
    print(f"projected full enwiki (95 GB XML) on 16 cores, {label}: {95_000 / (per_core * 16) / 60:.0f} min "
          f"({per_core:.1f} MB/s of XML per core x 16)")
EOF
