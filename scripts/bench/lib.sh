# Shared header of the scripts/bench/*.sh benchmarks; each sources it right after its comment block:
#
#   # shellcheck source=scripts/bench/lib.sh
#   source "$(dirname "$0")/lib.sh"
#
# Sourcing it sets strict mode and moves to the repository root. A script's --help is its leading
# comment block (the lines after the shebang up to the first line that is not a comment, so a
# blank line ends it), and the usage text lives in one place, at the top of the script.
# shellcheck shell=bash
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# The shared data (real dump excerpts, vocabularies) and the enwiki excerpt's wikiextractor text.
# shellcheck disable=SC2034  # used by the scripts that source this
shared_data=${PRETRAIN_SHARED_DATA:-../shared/data}
# shellcheck disable=SC2034
enwiki_jsonl=$shared_data/wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl

# bench_help: prints the calling script's leading comment block.
bench_help() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"
}

# bench_args --flag=var... -- "$@": sets each var from "--flag VALUE"; -h/--help prints the help and
# exits 0; anything else is a usage error (exit 2).
bench_args() {
  local -A vars=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    vars[${1%%=*}]=${1#*=}
    shift
  done
  shift
  while [[ $# -gt 0 ]]; do
    case $1 in
      -h|--help) bench_help; exit 0 ;;
    esac
    if [[ -n ${vars[$1]:-} ]]; then
      printf -v "${vars[$1]}" '%s' "$2"
      shift 2
    else
      echo "unknown argument $1" >&2
      exit 2
    fi
  done
}

# bench_require PATH MESSAGE: exits 1 with MESSAGE when PATH does not exist.
bench_require() {
  [[ -e $1 ]] || { echo "$2" >&2; exit 1; }
}

# bench_venv: makes the project's .venv (scripts/setup_deps.sh) when it is missing.
bench_venv() {
  [[ -x .venv/bin/python ]] || scripts/setup_deps.sh
}

# bench_build DIR TARGET...: configures DIR and builds the targets, quietly.
bench_build() {
  local build=$1; shift
  cmake -S . -B "$build" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target "$@" >/dev/null
}

# bench_build_missing DIR BINARY...: builds the BINARYs (paths under DIR; the target is the file
# name) when one of them is missing, showing the build's output.
bench_build_missing() {
  local build=$1 bin missing=0 targets=(); shift
  for bin in "$@"; do
    [[ -x $build/$bin ]] || missing=1
    targets+=("$(basename "$bin")")
  done
  if ((missing)); then
    cmake -S . -B "$build" >/dev/null && cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
  fi
}

# What goes on exit: the temporary directories below add to it.
bench_cleanup=()
trap 'rm -rf "${bench_cleanup[@]}"' EXIT

# bench_tmpdir NAME: a fresh temporary directory in $bench_tmp, removed on exit.
bench_tmpdir() {
  bench_tmp=$(mktemp -d -t "pretrain-bench-$1.XXXXXX")
  bench_cleanup+=("$bench_tmp")
}

# bench_workdir VAR NAME SUBDIR...: the directory in VAR (a fresh temporary one when VAR is empty),
# created; on exit only its SUBDIRs are removed, so what else it holds (inputs made once, results)
# stays for a rerun with --dir.
bench_workdir() {
  local path=${!1} sub
  [[ -n $path ]] || path=$(mktemp -d -t "pretrain-bench-$2.XXXXXX")
  mkdir -p "$path"
  printf -v "$1" '%s' "$path"
  for sub in "${@:3}"; do bench_cleanup+=("$path/$sub"); done
}

# bench_corpus COPIES OUT: the enwiki excerpt's documents COPIES times over, each copy with new ids,
# as JSON lines in OUT.
bench_corpus() {
  /usr/bin/python3 - "$enwiki_jsonl" "$1" "$2" <<'PY'
import json, sys
src, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
docs = [json.loads(l) for l in open(src, encoding="utf-8")]
with open(out, "w", encoding="utf-8") as f:
    for c in range(copies):
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": f"{c}-{i}", "url": "", "title": d["title"], "text": d["text"]}, ensure_ascii=False) + "\n")
PY
}

# bench_sized_shards EXE MODEL TOKENIZER WANT FIELD OUT ARGS...: make-pretraining-shards (EXE)
# shards with about WANT of FIELD ("instances" or "tokens") from the excerpt repeated, the copies
# sized from a one-copy run; kept in OUT (skipped when OUT/manifest.json is there), so benchmarks
# that ask for the same shards share them. Works in $bench_tmp (bench_tmpdir).
bench_sized_shards() {
  local exe=$1 model=$2 tok=$3 want=$4 field=$5 out=$6 copies; shift 6
  [[ -f $out/manifest.json ]] && return
  echo "# making $model shards in $out (once; cached)" >&2
  bench_corpus 1 "$bench_tmp/one.jsonl"
  "$exe" --model "$model" -i "$bench_tmp/one.jsonl" --tokenizer "$tok" -o "$bench_tmp/one" --quiet "$@" >"$bench_tmp/one.json"
  copies=$(/usr/bin/python3 -c "import json, math, sys; print(math.ceil($want / json.load(open(sys.argv[1]))['$field']))" "$bench_tmp/one.json")
  bench_corpus "$copies" "$bench_tmp/corpus.jsonl"
  rm -rf "$out" "$bench_tmp/one"
  "$exe" --model "$model" -i "$bench_tmp/corpus.jsonl" --tokenizer "$tok" -o "$out.tmp" --quiet "$@" >"$bench_tmp/stats.json"
  rm -f "$bench_tmp/corpus.jsonl"
  mv "$out.tmp" "$out"
}

# ... | bench_collect FILE TAG...: passes a benchmark's output through to stderr and appends its
# RESULT lines to FILE as "TAG... FIELD..." (the fields after the word RESULT).
bench_collect() {
  local file=$1; shift
  tee -a /dev/stderr | awk -v tags="$*" '$1 == "RESULT" { $1 = tags; print }' >>"$file"
}

# bench_nvidia_script CLONE DIR: NVIDIA's create_pretraining_data.py, unmodified, from a clone (or
# a bare git dir) of NVIDIA/DeepLearningExamples, at the commit ../shared/data/golden/ was made
# with, into DIR, with its tokenization.py and file_utils.py beside it. file_utils.py imports boto3
# and botocore only to fetch vocabularies from S3, which a local vocabulary file never reaches;
# where Debian's packages are absent, empty stand-ins for the two imports go in DIR/shims (put it
# on PYTHONPATH).
bench_nvidia_script() {
  local git_dir=$1 out=$2 commit=729963dd47e7c8bd462ad10bfac7a7b0b604e6dd f
  mkdir -p "$out/shims/botocore"
  for f in create_pretraining_data.py tokenization.py file_utils.py; do
    git -C "$git_dir" show "$commit:PyTorch/LanguageModeling/BERT/$f" >"$out/$f" || {
      echo "bench: $git_dir has no PyTorch/LanguageModeling/BERT/$f at $commit (want a clone of NVIDIA/DeepLearningExamples)" >&2
      return 1
    }
  done
  if ! .venv/bin/python -c "import boto3, botocore.exceptions" 2>/dev/null; then
    : >"$out/shims/boto3.py"
    : >"$out/shims/botocore/__init__.py"
    echo "class ClientError(Exception): pass" >"$out/shims/botocore/exceptions.py"
  fi
}

# bench_nvidia_command VAR DIR VOCAB TEXT OUTPUT DUPE: sets the array VAR to the command that runs
# the script bench_nvidia_script put in DIR with the golden files' arguments
# (../shared/data/golden/README.md) at dupe factor DUPE, for /usr/bin/time or a benchmark's measure.
bench_nvidia_command() {
  local -n cmd=$1
  # shellcheck disable=SC2034  # cmd names the caller's array
  cmd=(env PYTHONPATH="$2/shims" .venv/bin/python "$2/create_pretraining_data.py" --vocab_file "$3"
    --input_file "$4" --output_file "$5" --do_lower_case --max_seq_length 128 --max_predictions_per_seq 20
    --masked_lm_prob 0.15 --random_seed 12345 --dupe_factor "$6" --short_seq_prob 0.1)
}
