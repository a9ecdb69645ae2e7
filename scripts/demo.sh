#!/usr/bin/env bash
# The whole flow on the bundled sample (tests/data/), in one command: a MediaWiki dump → wikiprep →
# train-tokenizer → make-pretraining-shards → the loader (PyTorch examples) → bert_pretrain under
# mpirun (data parallel, ZeRO-1) and gpt_pretrain → the DLPerf matrix (1 and --np ranks) →
# extract_logs.py's table → plot_throughput.py's plot. Installs what is missing, builds, prints
# where everything is.
#   scripts/demo.sh [--out DIR] [--dump PATH] [--model bert|gpt] [--device cpu|cuda] [--np N]
# --dump: another MediaWiki dump (.xml, .xml.bz2); --model: which model the matrix trains;
# --device/--np: where and on how many ranks it trains (default: 2 CPU ranks).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/demo-out
dump=tests/data/sample-dump.xml
model=bert device=cpu np=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --dump) dump=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $model == bert || $model == gpt ]] || { echo "--model: bert or gpt, not '$model'" >&2; exit 2; }
[[ -f $dump ]] || { echo "--dump: no such file '$dump'" >&2; exit 2; }
[[ $np =~ ^[1-9][0-9]*$ ]] || { echo "--np: a positive number, not '$np'" >&2; exit 2; }
step() { printf '\n== %s\n' "$*"; }

step "dependencies"
scripts/setup_deps.sh
step "build"
# The configuration scripts/test.sh uses, so that it reuses this build (PRETRAIN_WERROR: CI sets ON).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPRETRAIN_WERROR="${PRETRAIN_WERROR:-OFF}" >/dev/null
cmake --build build -j "$(nproc)" --target pretrain_tools pretrain_python
bin=$root/build

rm -rf "$out"
mkdir -p "$out"
step "wikiprep: $dump -> $out/docs (clean documents, zstd JSON Lines + manifest)"
"$bin/datagen/wikiprep" "$dump" -o "$out/docs"
step "wikiprep --format sentences: the same dump in Google BERT's input format"
"$bin/datagen/wikiprep" -q "$dump" -o "$out/sentences" --format sentences
head -n 8 "$out/sentences/sentences-00000.txt"
step "verify the document shards against their manifest"
"$bin/formats/shard-tool" verify "$out/docs"
step "inspect"
"$bin/formats/shard-tool" inspect --records 3 "$out"/docs/docs-00000.jsonl.zst

step "train-tokenizer: a WordPiece vocabulary (as HF's BertWordPieceTokenizer trains one) from the documents"
"$bin/tokenizer/train-tokenizer" --kind wordpiece --vocab-size 2000 -o "$out/wordpiece" "$out/docs"
step "train-tokenizer: a SentencePiece unigram model from the same documents"
"$bin/tokenizer/train-tokenizer" -q --kind sentencepiece --vocab-size 300 --character-coverage 1.0 \
  -o "$out/sentencepiece" "$out/docs"
step "tokenize: the first sentence with each"
line=$(head -n 1 "$out/sentences/sentences-00000.txt")
echo "text:          $line"
echo "wordpiece:     $(echo "$line" | "$bin/tokenizer/tokenize" -q --tokenizer "$out/wordpiece/vocab.txt" --tokens)"
echo "sentencepiece: $(echo "$line" | "$bin/tokenizer/tokenize" -q --tokenizer "$out/sentencepiece/spm.model" --tokens)"
step "make-pretraining-shards: BERT (NSP + masked LM) HDF5 shards, NVIDIA's layout"
"$bin/datagen/make-pretraining-shards" -q --model bert -i "$out/docs" --tokenizer "$out/wordpiece/vocab.txt" \
  -o "$out/bert" --seq-len 64 --max-predictions 10 --dupe-factor 5 --num-shards 2 >"$out/bert-stats.json"
"$bin/formats/shard-tool" verify "$out/bert"
"$bin/formats/shard-tool" inspect --records 1 "$out/bert/train-00000.hdf5"
step "make-pretraining-shards: GPT Megatron .bin/.idx with the SentencePiece model"
"$bin/datagen/make-pretraining-shards" -q --model gpt -i "$out/docs" --tokenizer "$out/sentencepiece/spm.model" \
  -o "$out/gpt" >"$out/gpt-stats.json"
"$bin/formats/shard-tool" verify "$out/gpt"

step "loader: a tiny PyTorch BERT trained from the BERT shards through pretrain_loader (dynamic masking, resumed halfway)"
/usr/bin/python3 scripts/examples/torch_loop.py --build-dir "$bin" --model bert "$out/bert" --steps 40 --batch-size 16 \
  --dynamic-masking --resume-at 20 | tee "$out/torch-bert.log" | sed -n '1,3p;$p'
step "loader: a tiny PyTorch GPT from the Megatron shards"
/usr/bin/python3 scripts/examples/torch_loop.py --build-dir "$bin" --model gpt "$out/gpt" --seq-len 32 --steps 40 \
  --batch-size 8 | tee "$out/torch-gpt.log" | sed -n '1,3p;$p'

step "mpirun -np 2 bert_pretrain: BERT tiny (MLM + NSP), 2 CPU ranks (data parallel, ZeRO-1), LAMB, a checkpoint at step 40"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 \
  "$bin/trainer/bert_pretrain" --data "$out/bert" --model tiny --batch-size 8 --max-steps 60 --optimizer lamb \
  --zero 1 --lr 2e-3 --warmup 10 --log-interval 10 --save-interval 40 --checkpoint-dir "$out/bert-ckpt" \
  --log-dir "$out/bert-logs" --export "$out/bert-tiny.safetensors" --threads 1 | tee "$out/bert-train.log"
step "gpt_pretrain: GPT-2 tiny on the CPU from the Megatron shards"
"$bin/trainer/gpt_pretrain" --data "$out/gpt" --model tiny --seq-len 64 --batch-size 8 --max-steps 40 --lr 3e-3 \
  --warmup 5 --log-interval 10 --log-dir "$out/gpt-logs" --threads "$(nproc)"
step "plot_metrics.py: loss, learning rate, throughput and memory against steps"
/usr/bin/python3 scripts/plot_metrics.py "$out/bert-logs" -o "$out/bert-logs/curves.png"
/usr/bin/python3 scripts/plot_metrics.py "$out/gpt-logs" -o "$out/gpt-logs/curves.png"

step "the DLPerf matrix: $model tiny on 1 and $np $device rank(s), 40 steps each (scripts/run_single_node.sh)"
seq_args=()
[[ $model == gpt ]] && seq_args=(--seq-len 64)
scripts/run_single_node.sh --data "$out/$model" --model "$model" --model-size tiny --batch-size 8 --device "$device" \
  --gpus-per-node "$np" --runs 1 --steps 40 --log-root "$out/logs" --build-dir "$bin" -- --lr 2e-3 --warmup 5 \
  "${seq_args[@]}"
step "extract_logs.py: skip 10 iterations, average the rest, speedup against 1n1g"
/usr/bin/python3 scripts/extract_logs.py "$out/logs" --skip 10
step "plot_throughput.py"
/usr/bin/python3 scripts/plot_throughput.py "$out/logs" -o "$out/logs/throughput.png"

step "done"
echo "outputs:"
echo "  documents:       $out/docs/ (manifest: $out/docs/manifest.json)"
echo "  sentences:       $out/sentences/ (one sentence per line, blank line between documents)"
echo "  tokenizers:      $out/wordpiece/vocab.txt, $out/sentencepiece/spm.model"
echo "  BERT shards:     $out/bert/ (statistics: $out/bert-stats.json)"
echo "  GPT shards:      $out/gpt/ (statistics: $out/gpt-stats.json)"
echo "  loader + torch:  $out/torch-bert.log, $out/torch-gpt.log (loss per step through pretrain_loader)"
echo "  trainers:        $out/bert-logs/metrics.jsonl, $out/gpt-logs/metrics.jsonl (one JSON object per step),"
echo "                   $out/bert-logs/curves.png, $out/gpt-logs/curves.png (plot_metrics.py: loss, lr, throughput, memory),"
echo "                   $out/bert-ckpt/ (checkpoints), $out/bert-tiny.safetensors (HF BertForPreTraining names)"
echo "  DLPerf matrix:   $out/logs/ (run logs), $out/logs/table.md, $out/logs/result.json, $out/logs/throughput.png"
