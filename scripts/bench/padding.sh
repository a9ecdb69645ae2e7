#!/usr/bin/env bash
# Padding in BERT batches on real Wikipedia text, and what binning and packing would leave of it
# (scripts/bench/padding.py: LDDL's bin rule and first-fit-decreasing packing, the reference for
# issue 17). Makes shards from the enwiki excerpt's wikiextractor documents with
# make-pretraining-shards (Google's algorithm, dupe 1) at each --seq-lens and counts the tokens a
# trainer computes per real token: unbinned, --bin-size 64 and 32, packed (≤ --max-pack); then the
# same run with make-pretraining-shards --bin-size 64 and --pack --max-pack N for real, their
# shards counted beside the reference's figures (--made-binned, --made-packed).
#   scripts/bench/padding.sh [--seq-lens "128 512"] [--max-pack 3] [--dupe 1]

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
seq_lens="128 512" max_pack=3 dupe=1
bench_args --seq-lens=seq_lens --max-pack=max_pack --dupe=dupe -- "$@"
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
bench_require "$enwiki_jsonl" "padding.sh: $enwiki_jsonl not found (set PRETRAIN_SHARED_DATA)"
bench_venv
bench_build build make-pretraining-shards
bench_tmpdir padding
for s in $seq_lens; do
  # Google's defaults scale with the sequence: max_predictions_per_seq = round(0.15 · seq_len).
  build/datagen/make-pretraining-shards -q --model bert -i "$enwiki_jsonl" --tokenizer "$vocab" \
    -o "$bench_tmp/s$s" --seq-len "$s" --max-predictions $(((s * 15 + 50) / 100)) --dupe-factor "$dupe" >/dev/null
  build/datagen/make-pretraining-shards -q --model bert -i "$enwiki_jsonl" --tokenizer "$vocab" \
    -o "$bench_tmp/b$s" --seq-len "$s" --max-predictions $(((s * 15 + 50) / 100)) --dupe-factor "$dupe" \
    --bin-size 64 >/dev/null
  build/datagen/make-pretraining-shards -q --model bert -i "$enwiki_jsonl" --tokenizer "$vocab" \
    -o "$bench_tmp/p$s" --seq-len "$s" --max-predictions $(((s * 15 + 50) / 100)) --dupe-factor "$dupe" \
    --pack --max-pack "$max_pack" >/dev/null
  .venv/bin/python scripts/bench/padding.py "$bench_tmp/s$s" --max-pack "$max_pack" --bin-size 64 32 \
    --label "enwiki excerpt, seq $s, dupe $dupe" --made-binned "$bench_tmp/b$s" --made-packed "$bench_tmp/p$s"
done
