#!/usr/bin/env bash
# tokenize and train-tokenizer end to end, on a vocabulary and a model trained here from our own
# sample (no shared data needed): exit codes, ids/tokens/decode round trip, CRLF input, empty input,
# -o appearing only on success, errors naming the file and line.
set -euo pipefail
build=${PRETRAIN_BUILD_DIR:?}
src=${PRETRAIN_SOURCE_DIR:?}
tok=$build/tokenizer/tokenize
train=$build/tokenizer/train-tokenizer
work=$(mktemp -d -t pretrain-e2e-tokenize.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {  # expect_rc CODE CMD... : runs CMD, checks its exit code; stdout in $work/out, stderr in $work/err
  local want=$1; shift
  set +e; "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [[ $rc == "$want" ]] || { cat "$work/out" "$work/err" >&2; fail "exit $rc, expected $want: $*"; }
}

for t in "$tok" "$train"; do
  expect_rc 0 "$t" --version
  grep -q "pretrain suite" "$work/out" || fail "$t --version does not name the suite"
  expect_rc 0 "$t" --help
  expect_rc 2 "$t"
done

expect_rc 0 "$train" -q --kind wordpiece --vocab-size 500 -o "$work/wp" "$src/tests/data/sample-docs.jsonl"
vocab=$work/wp/vocab.txt
[[ $(head -n 5 "$vocab" | tr '\n' ' ') == "[PAD] [UNK] [CLS] [SEP] [MASK] " ]] || fail "special tokens do not come first"

printf 'The bay opens to the sea.\r\n\r\nTides follow a pattern.\n' >"$work/in.txt"
expect_rc 0 "$tok" -q --tokenizer "$vocab" -i "$work/in.txt" -o "$work/ids.txt"
[[ $(wc -l <"$work/ids.txt") == 3 ]] || fail "not one output line per input line"
[[ -z $(sed -n 2p "$work/ids.txt") ]] || fail "an empty line must give an empty line"
expect_rc 0 "$tok" -q --tokenizer "$vocab" --tokens -i "$work/in.txt"
head -n 1 "$work/out" | grep -q "^the .* \.$" || fail "tokens: $(head -n 1 "$work/out")"
expect_rc 0 "$tok" -q --tokenizer "$vocab" --decode -i "$work/ids.txt"
[[ $(head -n 1 "$work/out") == "the bay opens to the sea." ]] || fail "decode: $(head -n 1 "$work/out")"
expect_rc 0 "$tok" -q --tokenizer "$vocab" -i /dev/null
[[ ! -s $work/out ]] || fail "empty input must give empty output"

# Bad input: errors name the file (and line); -o is not left behind.
expect_rc 1 "$tok" -q --tokenizer "$work/missing-vocab.txt" -i "$work/in.txt"
grep -q "missing-vocab.txt" "$work/err" || fail "a missing vocabulary is not named: $(cat "$work/err")"
printf '12 x7\n' >"$work/bad-ids.txt"
expect_rc 1 "$tok" -q --tokenizer "$vocab" --decode -i "$work/bad-ids.txt" -o "$work/decoded.txt"
grep -q "bad-ids.txt:1" "$work/err" || fail "bad ids are not located: $(cat "$work/err")"
[[ ! -e $work/decoded.txt ]] || fail "a failed run left its -o file"
ls "$work" | grep -q "tmp-" && fail "a failed run left a temp file"
printf '999999\n' >"$work/big-ids.txt"
expect_rc 1 "$tok" -q --tokenizer "$vocab" --decode -i "$work/big-ids.txt"
grep -q "outside the vocabulary" "$work/err" || fail "an id outside the vocabulary: $(cat "$work/err")"
echo "tokenize / train-tokenizer CLI: ok"
