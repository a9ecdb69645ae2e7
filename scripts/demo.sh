#!/usr/bin/env bash
# The whole flow that exists so far, on the bundled sample (tests/data/), in one command.
# Installs what is missing, builds, runs each stage, and prints where the outputs are.
#   scripts/demo.sh [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/demo-out
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,4p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
step() { printf '\n== %s\n' "$*"; }

step "dependencies"
scripts/setup_deps.sh
step "build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target shard-tool wikiprep train-tokenizer tokenize make-pretraining-shards \
  pretrain_loader_python bert_pretrain gpt_pretrain
bin=$root/build

rm -rf "$out"
mkdir -p "$out"
step "wikiprep: tests/data/sample-dump.xml -> $out/docs (clean documents, zstd JSON Lines + manifest)"
"$bin/datagen/wikiprep" tests/data/sample-dump.xml -o "$out/docs"
step "wikiprep --format sentences: the same dump in Google BERT's input format"
"$bin/datagen/wikiprep" -q tests/data/sample-dump.xml -o "$out/sentences" --format sentences
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

step "done"
echo "outputs:"
echo "  documents:       $out/docs/ (manifest: $out/docs/manifest.json)"
echo "  sentences:       $out/sentences/ (one sentence per line, blank line between documents)"
echo "  tokenizers:      $out/wordpiece/vocab.txt, $out/sentencepiece/spm.model"
echo "  BERT shards:     $out/bert/ (statistics: $out/bert-stats.json)"
echo "  GPT shards:      $out/gpt/ (statistics: $out/gpt-stats.json)"
echo "  loader + torch:  $out/torch-bert.log, $out/torch-gpt.log (loss per step through pretrain_loader)"
echo "  trainers:        $out/bert-logs/metrics.jsonl, $out/gpt-logs/metrics.jsonl (one JSON object per step),"
echo "                   $out/bert-ckpt/ (checkpoints), $out/bert-tiny.safetensors (HF BertForPreTraining names)"
echo "next stages (mpirun data parallel, DLPerf tables and plots) join this demo as they land; see README.md"
