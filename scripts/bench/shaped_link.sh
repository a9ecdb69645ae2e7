#!/usr/bin/env bash
# Data-parallel BERT over a link we shape, beside scripts/bench/scaling_model.py's prediction for
# that link: the model checked against a network we control, not only against published tables.
#   scripts/bench/shaped_link.sh [--links "10gbit:25 1gbit:25"] [--model small] [--batch 8]
#     [--warmup 3] [--steps 10] [--build build] [--out DIR]
# Two hosts are network namespaces joined by a bridge (tests/e2e/hosts.py; needs root and iproute2,
# as the multi-host tests); each link setting RATE[:DELAY_US] ("bare": unshaped) is put on both
# hosts' links both ways with tc (netem delay and rate, or a token bucket where the kernel has no
# netem). Per setting: the link measured (one TCP stream node0 -> node1, half the median round trip
# of one byte), then BERT trained on 2 hosts x 1 rank (scripts/run_multi_node.sh --hostfile, ranks
# of one thread, ZeRO off, fp32 gradients all-reduced in buckets as the backward pass fills them);
# one rank on one host before and after, as the compute the model is given (--link-step-ms). Prints
# the table of measured against predicted ms per step and speedup, with the nominal link and with
# the link as measured, and writes DIR/shaped_link.json.
# The shards: BERT seq 128, 20 masked predictions, from the shared enwiki excerpt (made once into
# DIR/shards).

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
links="10gbit:25 1gbit:25" model=small batch=8 warmup=3 steps=10 build=build out=""
bench_args --links=links --model=model --batch=batch --warmup=warmup --steps=steps --build=build --out=out -- "$@"
[[ $(id -u) == 0 ]] || { echo "shaped_link.sh: network namespaces need root" >&2; exit 1; }
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
bench_require "$enwiki_jsonl" "shaped_link.sh: $enwiki_jsonl not found (set PRETRAIN_SHARED_DATA)"
bench_build_missing "$build" datagen/make-pretraining-shards trainer/bert_pretrain
bench_workdir out shaped-link
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

shards=$out/shards
if [[ ! -f $shards/manifest.json ]]; then
  echo "# making BERT shards in $shards (once)" >&2
  "$build/datagen/make-pretraining-shards" --model bert -i "$enwiki_jsonl" --tokenizer "$vocab" -o "$shards.tmp" \
    --seq-len 128 --max-predictions 20 --dupe-factor 1 --num-shards 4 --quiet >/dev/null
  mv "$shards.tmp" "$shards"
fi
/usr/bin/python3 scripts/bench/shaped_link.py --build "$build" --data "$shards" --links "$links" --model "$model" \
  --predictions 20 --batch "$batch" --warmup "$warmup" --steps "$steps" --out "$out"
