#!/usr/bin/env bash
# make-pretraining-shards speed on real Wikipedia text scaled up (the enwiki excerpt's wikiextractor
# documents repeated until --text-mb), BERT seq 128 and GPT, at 1 and 2 threads; against our
# tokenizer alone on the same text (the goal: sharding at ≥ 70% of pure tokenization speed) and
# against Google's algorithm in Python (scripts/bench/shards_peer.py, HF fast tokenizer; run on a
# --peer-mb slice, Python being slow). Ends with a projection for enwiki (20 GB of text, seq 128,
# dupe 5) on 16 cores, from the per-stage times.
#   scripts/bench/shards.sh [--text-mb 1024] [--peer-mb 20] [--dupe 2] [--threads "1 2"]
set -euo pipefail
cd "$(dirname "$0")/../.."
text_mb=1024 peer_mb=20 dupe=2 threads="1 $(nproc)"
while [[ $# -gt 0 ]]; do
  case $1 in
    --text-mb) text_mb=$2; shift 2 ;;
    --peer-mb) peer_mb=$2; shift 2 ;;
    --dupe) dupe=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
data=${PRETRAIN_SHARED_DATA:-../shared/data}
wiki=$data/wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl
vocab=$data/vocab/bert-base-uncased-vocab.txt
encoder=$data/vocab/gpt2-encoder.json
[[ -f $wiki ]] || { echo "shards.sh: $wiki not found (set PRETRAIN_SHARED_DATA)" >&2; exit 1; }
[[ -x .venv/bin/python ]] || scripts/setup_deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" --target make-pretraining-shards bench_tokenizers >/dev/null
dir=$(mktemp -d -t pretrain-bench-shards.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# The corpus: documents repeated (new ids) to the size asked; the text lines for the tokenizer
# alone; a Google-format slice for the Python peer.
/usr/bin/python3 - "$wiki" "$dir" "$text_mb" "$peer_mb" <<'PY'
import json, sys
src, out, mb, peer_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
docs = [json.loads(l) for l in open(src, encoding="utf-8")]
size, n = 0, 0
with open(f"{out}/corpus.jsonl", "w", encoding="utf-8") as jf, open(f"{out}/lines.txt", "w", encoding="utf-8") as lf:
    while size < mb << 20:
        for d in docs:
            jf.write(json.dumps({"id": str(n), "url": "", "title": d["title"], "text": d["text"]}, ensure_ascii=False) + "\n")
            lf.write("\n".join(l for l in d["text"].split("\n") if l.strip()) + "\n")
            size += len(d["text"].encode()); n += 1
with open(f"{out}/peer.txt", "w", encoding="utf-8") as pf:
    size = 0
    while size < peer_mb << 20:
        for d in docs:
            lines = [l for l in d["text"].split("\n") if l.strip()]
            pf.write("\n".join(lines) + "\n\n")
            size += len(d["text"].encode())
print(f"# corpus: {n} documents, {mb} MB of text", file=sys.stderr)
PY
results=$dir/results.txt
: >"$results"
for t in $threads; do
  echo "# tokenizers alone, $t thread(s)" >&2
  build/bench/bench_tokenizers --case wordpiece --tokenizer "$vocab" --text "$dir/lines.txt" --threads "$t" --runs 1 \
    | awk -v t="$t" '{print $2, t, $3, $4, $5}' >>"$results"
  build/bench/bench_tokenizers --case bpe --tokenizer "$encoder" --text "$dir/lines.txt" --threads "$t" --runs 1 \
    | awk -v t="$t" '{print $2, t, $3, $4, $5}' >>"$results"
  for model in bert gpt; do
    tok=$vocab; [[ $model == gpt ]] && tok=$encoder
    echo "# make-pretraining-shards --model $model, $t thread(s)" >&2
    /usr/bin/time -f "%M" -o "$dir/rss" build/datagen/make-pretraining-shards --model "$model" -i "$dir/corpus.jsonl" \
      --tokenizer "$tok" -o "$dir/out-$model" --dupe-factor "$dupe" --num-shards 8 --threads "$t" --quiet >"$dir/stats.json"
    /usr/bin/python3 - "$dir/stats.json" "$model" "$t" "$(cat "$dir/rss")" >>"$results" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); model, t, rss = sys.argv[2], sys.argv[3], int(sys.argv[4])
st = s["stage_seconds"]
print(f"shards_{model} {t} {s['tokens'] / s['seconds']:.1f} {s['seconds']:.3f} {s['tokens']} "
      f"{s['instances'] + s['valid_instances']} {st['tokenize']:.3f} {st['instances']:.3f} {st['write']:.3f} {rss}")
PY
    rm -rf "$dir/out-$model"
  done
done
echo "# Python peer (Google's algorithm + HF fast tokenizer) on $peer_mb MB" >&2
.venv/bin/python scripts/bench/shards_peer.py --text "$dir/peer.txt" --vocab "$vocab" --dupe "$dupe" \
  | awk '{print $2, 1, $3, $4, $5, $6}' >>"$results"
build/datagen/make-pretraining-shards --model bert -i "$dir/peer.txt" --tokenizer "$vocab" -o "$dir/out-peer" \
  --dupe-factor "$dupe" --threads 1 --quiet >"$dir/peer-ours.json"
/usr/bin/python3 - "$dir/peer-ours.json" >>"$results" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"ours_on_peer_slice 1 {(s['instances']) / s['seconds']:.1f} {s['seconds']:.3f} {s['instances']} {s['tokens']}")
PY

/usr/bin/python3 - "$results" "$text_mb" "$dupe" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows[(f[0], int(f[1]))] = f[2:]
text_mb, dupe = int(sys.argv[2]), int(sys.argv[3])
threads = sorted({t for (_, t) in rows if _.startswith("shards_")})
print(f"\nmake-pretraining-shards benchmark: {text_mb} MB of enwiki text, seq 128, dupe {dupe}")
print("| case | threads | tokens/s | instances (or docs)/s | seconds | tokenize / instances / write s | peak RSS MB | tokenizer alone tokens/s | ratio to tokenizer | goal |")
print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
for model, tokname in (("bert", "wordpiece"), ("gpt", "bpe")):
    for t in threads:
        r = rows.get((f"shards_{model}", t)); k = rows.get((tokname, t))
        if not r:
            continue
        rate, secs, toks, inst, st_tok, st_inst, st_write, rss = float(r[0]), float(r[1]), int(r[2]), int(r[3]), r[4], r[5], r[6], int(r[7])
        alone = float(k[0]) if k else 0
        ratio = f"{rate / alone:.2f}" if alone else "n/a"
        print(f"| {model} | {t} | {rate:,.0f} | {inst / secs:,.0f} | {secs:.1f} | {st_tok} / {st_inst} / {st_write} | {rss / 1024:.0f} | {alone:,.0f} | {ratio} | ≥ 0.70 |")
p, o = rows.get(("bert_python", 1)), rows.get(("ours_on_peer_slice", 1))
if p and o:
    print(f"\nGoogle's algorithm in Python (HF fast tokenizer), the same text slice, 1 thread: "
          f"{float(p[0]):,.0f} instances/s; ours {float(o[0]):,.0f} instances/s: {float(o[0]) / float(p[0]):.1f}×")
# Projection: enwiki ≈ 20 GB of text, dupe 5, 16 cores, from the best per-core rates measured.
t = threads[-1]
r = rows.get(("shards_bert", t))
if r:
    st_tok, st_inst, st_write = float(r[4]), float(r[5]), float(r[6])
    scale = 20 * 1024 / text_mb * t / 16
    proj = scale * (st_tok + (st_inst + st_write) * 5 / dupe)
    print(f"\nprojection, enwiki 20 GB, BERT seq 128, dupe 5, 16 cores (linear in cores from {t} threads): "
          f"{proj / 60:.0f} min (tokenize {scale * st_tok / 60:.0f} min, instances+write {scale * (st_inst + st_write) * 5 / dupe / 60:.0f} min)")
PY
