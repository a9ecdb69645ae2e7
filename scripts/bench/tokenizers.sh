#!/usr/bin/env bash
# Tokenizer speed on real Wikipedia text (the enwiki excerpt's wikiextractor text in
# ../shared/data, one paragraph per line), at 1 and 2 threads, each tokenizer against its peer
# measured in the same run: our WordPiece vs HF tokenizers' BertWordPieceTokenizer.encode_batch,
# our GPT-2 BPE vs tiktoken and HF's ByteLevelBPETokenizer, our SentencePiece wrapper vs
# libsentencepiece called directly. Tokens/s, best of 3 runs; token counts must agree.
#   scripts/bench/tokenizers.sh [--threads "1 2"] [--repeat K] [--runs R]
# --repeat K: the text K times over (more work per run; BPE word caches do get warmer).

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
threads="1 $(nproc)" repeat=1 runs=3
bench_args --threads=threads --repeat=repeat --runs=runs -- "$@"
vocab=$shared_data/vocab
wiki=$enwiki_jsonl
bench_require "$wiki" "tokenizers.sh: $wiki not found (set PRETRAIN_SHARED_DATA)"
py=.venv/bin/python
bench_venv
bench_build_missing build bench/bench_tokenizers
bench_tmpdir tok
dir=$bench_tmp
text=$dir/enwiki.txt
/usr/bin/python3 - "$wiki" "$text" "$repeat" <<'PY'
import json, sys
src, dst, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [l for doc in map(json.loads, open(src, encoding="utf-8")) for l in doc["text"].split("\n") if l.strip()]
with open(dst, "w", encoding="utf-8", newline="\n") as f:
    for _ in range(repeat):
        f.write("\n".join(lines) + "\n")
PY
echo "# text: $(wc -l <"$text") lines, $(($(wc -c <"$text") / 1024)) KiB, from $(basename "$wiki")" >&2

results=$dir/results.txt
: >"$results"
run() {  # run SIDE THREADS CMD...: keeps the RESULT lines, tagged with side and threads
  local side=$1 t=$2; shift 2
  echo "# $side, $t thread(s): $*" >&2
  "$@" | bench_collect "$results" "$side" "$t"
}
ours=build/bench/bench_tokenizers
for t in $threads; do
  run ours "$t" $ours --case wordpiece --tokenizer "$vocab/bert-base-uncased-vocab.txt" --text "$text" --threads "$t" --runs "$runs"
  run peer "$t" $py scripts/bench/tokenizers_peer.py --case wordpiece_hf --lowercase --vocab "$vocab/bert-base-uncased-vocab.txt" \
    --text "$text" --threads "$t" --runs "$runs"
  run ours "$t" $ours --case bpe --tokenizer "$vocab/gpt2-encoder.json" --text "$text" --threads "$t" --runs "$runs"
  run peer "$t" $py scripts/bench/tokenizers_peer.py --case bpe_tiktoken --vocab "$vocab/gpt2-encoder.json" \
    --merges "$vocab/gpt2-vocab.bpe" --text "$text" --threads "$t" --runs "$runs"
  run peer "$t" $py scripts/bench/tokenizers_peer.py --case bpe_hf --vocab "$vocab/gpt2-encoder.json" \
    --merges "$vocab/gpt2-vocab.bpe" --text "$text" --threads "$t" --runs "$runs"
  run ours "$t" $ours --case sentencepiece --tokenizer "$vocab/spm-test_model.model" --text "$text" --threads "$t" --runs "$runs"
  run peer "$t" $ours --case sentencepiece_lib --spm-direct --tokenizer "$vocab/spm-test_model.model" --text "$text" \
    --threads "$t" --runs "$runs"
done

/usr/bin/python3 - "$results" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    side, t, case, rate, secs, tokens = line.split()[:6]
    rows[(case, int(t))] = (float(rate), int(tokens))
pairs = [("wordpiece", "wordpiece_hf", "HF tokenizers BertWordPiece", "≥ 3× (1 thread)"),
         ("bpe", "bpe_tiktoken", "tiktoken gpt2", "≥ 1× (1 thread)"),
         ("bpe", "bpe_hf", "HF tokenizers ByteLevelBPE", ""),
         ("sentencepiece", "sentencepiece_lib", "libsentencepiece direct", "≈ 1×")]
threads = sorted({t for _, t in rows})
print("\ntokenizers benchmark: tokens/s on enwiki text")
print("| ours | threads | ours tokens/s | peer | peer tokens/s | ratio | goal | tokens agree |")
print("|---|---:|---:|---|---:|---:|---|---|")
for ours, peer, peer_name, goal in pairs:
    for t in threads:
        o, p = rows.get((ours, t)), rows.get((peer, t))
        if not o or not p:
            continue
        agree = "yes" if o[1] == p[1] else f"NO ({o[1]} vs {p[1]})"
        print(f"| {ours} | {t} | {o[0]:,.0f} | {peer_name} | {p[0]:,.0f} | {o[0] / p[0]:.2f}× | {goal} | {agree} |")
for ours in ("wordpiece", "bpe", "sentencepiece"):
    if (ours, 1) in rows and len(threads) > 1 and (ours, threads[-1]) in rows:
        s = rows[(ours, threads[-1])][0] / rows[(ours, 1)][0]
        print(f"scaling {ours}: {threads[-1]} threads = {s:.2f}× of 1 thread")
PY
