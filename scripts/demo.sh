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
cmake --build build -j "$(nproc)" --target shard-tool wikiprep
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

step "done"
echo "outputs:"
echo "  documents:  $out/docs/ (manifest: $out/docs/manifest.json)"
echo "  sentences:  $out/sentences/ (one sentence per line, blank line between documents)"
echo "next stages (tokenizers, make-pretraining-shards, loader, trainers, logs and plots)"
echo "join this demo as they land; see README.md"
