#!/usr/bin/env bash
# shard-tool end to end: exit codes, import-docs -> verify -> corrupt -> verify fails naming the
# file, llm.c <-> Megatron conversion round trip, inspect of every kind, clear errors on bad files,
# packed BERT shards verified row by row.
set -euo pipefail
tool=${PRETRAIN_BUILD_DIR:?}/formats/shard-tool
src=${PRETRAIN_SOURCE_DIR:?}
work=$(mktemp -d -t pretrain-e2e-shard-tool.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {  # expect_rc CODE CMD... : runs CMD, checks its exit code, keeps stderr in $work/err
  local want=$1; shift
  set +e; "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [[ $rc == "$want" ]] || { cat "$work/out" "$work/err" >&2; fail "exit $rc, expected $want: $*"; }
}

expect_rc 0 "$tool" --version
grep -q "shard-tool" "$work/out" || fail "--version does not name the tool"
expect_rc 0 "$tool" --help
expect_rc 2 "$tool"
expect_rc 2 "$tool" inspect --no-such-flag x
expect_rc 2 "$tool" --threads -3 inspect x

# Documents: import, verify, inspect.
expect_rc 0 "$tool" -q import-docs "$src/tests/data/sample-docs.jsonl" -o "$work/docs"
[[ -f $work/docs/manifest.json && -f $work/docs/docs-00000.jsonl.zst ]] || fail "import-docs wrote no shard"
expect_rc 0 "$tool" verify "$work/docs"
grep -q "6 records" "$work/out" || fail "verify does not report 6 records: $(cat "$work/out")"
expect_rc 0 "$tool" inspect -n 6 "$work/docs/docs-00000.jsonl.zst"
grep -q "東京" "$work/out" || fail "inspect lost the Japanese title"
grep -q "ירושלים" "$work/out" || fail "inspect lost the Hebrew title"

# Corrupt one byte in the middle: verify exits 1 and names the file.
printf '\xff' | dd of="$work/docs/docs-00000.jsonl.zst" bs=1 seek=100 conv=notrunc status=none
expect_rc 1 "$tool" verify "$work/docs"
grep -q "docs-00000.jsonl.zst" "$work/out" || fail "verify does not name the bad shard"
rm "$work/docs/docs-00000.jsonl.zst"
expect_rc 1 "$tool" verify "$work/docs"
grep -q "missing" "$work/out" || fail "verify does not report the missing shard"
expect_rc 1 "$tool" verify "$work"
grep -q "manifest.json" "$work/err" || fail "verify without a manifest does not say so"

# llm.c -> Megatron -> llm.c gives the same bytes back.
/usr/bin/python3 - "$work/tokens.bin" <<'PY'
import struct, sys, random
rng = random.Random(7)
toks = []
for d in range(50):
    toks.append(50256)
    toks += [rng.randrange(50256) for _ in range(rng.randrange(1, 300))]
header = [20240520, 1, len(toks)] + [0] * 253
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack(f"<{len(toks)}H", *toks))
PY
expect_rc 0 "$tool" -q convert --to megatron "$work/tokens.bin" "$work/gpt"
[[ -f $work/gpt.bin && -f $work/gpt.idx ]] || fail "convert wrote no .bin/.idx"
expect_rc 0 "$tool" inspect "$work/gpt.idx"
grep -q "documents *50" "$work/out" || fail "expected 50 documents: $(cat "$work/out")"
expect_rc 0 "$tool" -q convert --to llmc "$work/gpt" "$work/back.bin"
cmp "$work/tokens.bin" "$work/back.bin" || fail "llm.c -> Megatron -> llm.c changed the bytes"
expect_rc 0 "$tool" inspect "$work/back.bin"
grep -qi "20240520" "$work/out" || fail "inspect of an llm.c file does not show its magic"

# Truncated files: exit 1, the message names the file; no temp files left behind anywhere.
head -c 40 "$work/gpt.idx" >"$work/cut.idx"; cp "$work/gpt.bin" "$work/cut.bin"
expect_rc 1 "$tool" inspect "$work/cut.idx"
grep -q "cut.idx" "$work/err" || fail "truncated .idx error does not name the file: $(cat "$work/err")"
head -c 2000 "$work/tokens.bin" >"$work/cut-llmc.bin"
expect_rc 1 "$tool" inspect "$work/cut-llmc.bin"
grep -q "cut-llmc.bin" "$work/err" || fail "truncated llm.c error does not name the file"
expect_rc 1 "$tool" convert --to megatron "$work/cut-llmc.bin" "$work/never"
[[ ! -e $work/never.bin && ! -e $work/never.idx ]] || fail "a failed convert left output files"
! ls "$work" | grep -q '\.tmp-' || fail "temp files left behind: $(ls "$work")"

# Packed BERT shards (make-pretraining-shards --pack): verify checks every row and passes them;
# a corrupted shard fails naming it. (A row made inconsistent under matching checksums:
# tests/formats/shard_tool_test.cpp.)
make_shards=${PRETRAIN_BUILD_DIR}/datagen/make-pretraining-shards
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' . the ship light tower sea stone bread lamp >"$work/vocab.txt"
/usr/bin/python3 - "$work/corpus.txt" <<'PY'
import random, sys
rng = random.Random(3)
words = "the ship light tower sea stone bread lamp".split()
with open(sys.argv[1], "w") as f:
    for d in range(60):
        for s in range(rng.randrange(1, 6)):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randrange(3, 10))) + " .\n")
        f.write("\n")
PY
expect_rc 0 "$make_shards" -q -i "$work/corpus.txt" --tokenizer "$work/vocab.txt" -o "$work/packed" --seq-len 64 \
  --max-predictions 10 --dupe-factor 2 --pack --max-pack 3
expect_rc 0 "$tool" verify "$work/packed"
grep -q "packed rows (up to 3 instances) consistent" "$work/out" || fail "verify does not check packed rows: $(cat "$work/out")"
expect_rc 0 "$tool" inspect -n 1 "$work/packed/train-00000.hdf5"
grep -q "sequence_ids: dtype=|i1" "$work/out" || fail "inspect does not show sequence_ids: $(cat "$work/out")"
expect_rc 2 "$make_shards" -q -i "$work/corpus.txt" --tokenizer "$work/vocab.txt" -o "$work/refused" --max-pack 2
grep -q -- "--max-pack" "$work/err" || fail "--max-pack without --pack is not refused by name: $(cat "$work/err")"
size=$(stat -c %s "$work/packed/train-00000.hdf5")
printf '\xff\xff\xff\xff' | dd of="$work/packed/train-00000.hdf5" bs=1 seek=$((size - 64)) conv=notrunc status=none
expect_rc 1 "$tool" verify "$work/packed"
grep -q "BAD .*train-00000.hdf5" "$work/out" || fail "verify does not name the corrupted packed shard: $(cat "$work/out")"

echo "1 passed, 0 failed"
