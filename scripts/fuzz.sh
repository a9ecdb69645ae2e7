#!/usr/bin/env bash
# Runs a libFuzzer target: scripts/fuzz.sh TARGET SECONDS (TARGET: megatron, llmc, bert_hdf5, …),
# or scripts/fuzz.sh --all SECONDS. Builds build-fuzz/ with clang first (PRETRAIN_FUZZ_BUILD names
# another build directory configured with PRETRAIN_FUZZ=ON, e.g. scripts/test.sh's clang ASan
# build, which is then used as it is configured). New interesting inputs
# go to <build>/corpus/TARGET; a crash leaves crash-* there and exits non-zero — copy the
# reproducer into tests/fuzz/corpus/TARGET/ once fixed, so the replay test keeps it fixed.
# PRETRAIN_FUZZ_SEED fixes libFuzzer's random seed (unset: a new one each run, for real fuzzing);
# scripts/test.sh sets it so a CI verdict can be reproduced, and long runs stay random.
#
# scripts/fuzz.sh --campaign HOURS [TARGET…]: every target (or those named) in turn, HOURS shared
# equally; after each, the inputs that add coverage are merged (-merge=1, which keeps only those)
# into tests/fuzz/corpus/TARGET, and a row (date, seconds fuzzed, executions, coverage, features,
# inputs added, findings, machine) is appended to tests/fuzz/campaign.md, whose totals per target it
# then prints. PRETRAIN_FUZZ_PARALLEL=P runs P targets at a time (a many-core machine), each for
# HOURS × P / targets (at most HOURS), so the campaign still takes HOURS.
# PRETRAIN_FUZZ_PREBUILT=1 uses the binaries already in $PRETRAIN_FUZZ_BUILD/fuzz as they are (no
# cmake), for a machine they were copied to.
# scripts/fuzz.sh --log-status LOG prints a libFuzzer log's last status: EXECUTIONS COVERAGE FEATURES.
set -euo pipefail
# The last status of libFuzzer log $1 as "EXECUTIONS COVERAGE FEATURES" (? where absent). Fork mode
# (bert_hdf5) prints "#N: cov: C ft: F …" lines for all its children; after a crash it echoes the
# crashing child's log, whose "#N NEW cov: …" lines count that child alone, so its own lines win
# where there are any (campaign rows of crashed fork-mode runs read the child's count before).
log_status() {
  local line
  line=$(grep -E '^#[0-9]+: cov: ' "$1" | tail -n 1 || true)
  [[ -n $line ]] || line=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$1" | tail -n 1 || true)
  local execs cov ft
  execs=$(grep -oE '^#[0-9]+' <<<"$line" | tr -d '#' || true)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$line" | grep -oE '[0-9]+' || true)
  ft=$(grep -oE 'ft: [0-9]+' <<<"$line" | grep -oE '[0-9]+' || true)
  echo "${execs:-0} ${cov:-?} ${ft:-?}"
}
if [[ ${1:-} == --log-status && $# -eq 2 ]]; then
  log_status "$2"
  exit 0
fi
cd "$(dirname "$0")/.."
campaign= named=()
if [[ ${1:-} == --campaign && $# -ge 2 ]]; then
  campaign=1 hours=$2
  shift 2
  named=("$@")
  set -- --all 0
fi
[[ $# -eq 2 ]] || { echo "usage: scripts/fuzz.sh TARGET|--all SECONDS, or --campaign HOURS [TARGET…]" >&2; exit 2; }
target=$1 seconds=$2
jobs=${PRETRAIN_JOBS:-$(nproc)}
build=${PRETRAIN_FUZZ_BUILD:-build-fuzz}
parallel=${PRETRAIN_FUZZ_PARALLEL:-1}
prebuilt=${PRETRAIN_FUZZ_PREBUILT:-}
# Configured every time (quick once done): a new fuzz_*.cpp becomes a target only at configure.
if [[ -n $prebuilt ]]; then
  :
elif grep -qs "^PRETRAIN_FUZZ:BOOL=ON" "$build/CMakeCache.txt"; then
  cmake -S . -B "$build" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
else
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRETRAIN_FUZZ=ON \
    -DPRETRAIN_CUDA=OFF >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
fi
if [[ -n $campaign && ${#named[@]} -gt 0 ]]; then
  targets=${named[*]}
elif [[ $target == --all ]]; then
  targets=$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/^fuzz_//; s/\.cpp$//')
else
  targets=$target
fi
if [[ -n $campaign ]]; then
  seconds=$(awk -v h="$hours" -v n="$(wc -w <<<"$targets")" -v p="$parallel" \
    'BEGIN { s = int(h * 3600 * (p < n ? p : n) / n); print s < 1 ? 1 : s }')
fi
[[ -n $prebuilt ]] || cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' $targets)
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0  # libhdf5's own leaks
table=tests/fuzz/campaign.md
shared=${PRETRAIN_SHARED_DATA:-../shared/data}
if [[ -n $campaign && ! -d $shared/vocab ]]; then
  echo "fuzz.sh: no shared data at $shared (set PRETRAIN_SHARED_DATA): the tokenizer targets fuzz their" \
    "small built-in vocabularies and models, not BERT's, GPT-2's and the SentencePiece test models" >&2
fi
# How many reproducers of the kinds in $2 (crash|leak|…) target $1 left.
reproducers() { ls "$build/corpus" | grep -cE "^$1-($2)-" || true; }
# Appends the row of target $1's run of $2 seconds (its log in $build/corpus/$1.log) and merges its
# new inputs.
campaign_row() {
  local t=$1 ran=$2 execs cov ft findings before after
  read -r execs cov ft < <(log_status "$build/corpus/$1.log")
  findings=$(reproducers "$t" "crash|leak|timeout|oom")
  if ignores_ooms "$t"; then
    local ooms
    ooms=$(reproducers "$t" oom)
    findings=$((findings - ooms))
    ((ooms == 0)) || findings+=" (+$ooms out-of-memory, ignored)"
  fi
  mkdir -p "tests/fuzz/corpus/$t"
  before=$(ls "tests/fuzz/corpus/$t" | wc -l)
  (cd "$build/corpus" && ../fuzz/fuzz_$t -merge=1 -rss_limit_mb=2048 "$OLDPWD/tests/fuzz/corpus/$t" "$t" >"$t.merge.log" 2>&1) ||
    echo "fuzz $t: merging its corpus failed (see $build/corpus/$t.merge.log)" >&2
  after=$(ls "tests/fuzz/corpus/$t" | wc -l)
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$t" "$ran" "$execs" \
    "$cov" "$ft" "$((after - before))" "$findings" "$(nproc) cores, $parallel at a time" >>"$table"
}
# Executions and findings per target over every campaign in the table.
campaign_totals() {
  echo "campaign totals ($table):"
  awk -F'|' '/^\| [0-9]/ { t = $3; gsub(/^ +| +$/, "", t); e[t] += $5; f[t] += $9; s[t] += $4 }
             END { for (t in e) printf "  %-26s %12d executions in %8d s, %d findings\n", t, e[t], s[t], f[t] }' "$table" | sort
}
# Targets whose out-of-memory inputs are not findings (see fuzz_one).
ooms_ignored=" bert_hdf5 "
ignores_ooms() { [[ $ooms_ignored == *" $1 "* ]]; }
# Runs target $1 (and its campaign row); non-zero when it found something.
fuzz_one() {
  local t=$1 corpus=$build/corpus/$1 seeds=tests/fuzz/corpus/$1 extra=() asan_extra= status=0 start=$SECONDS ran
  mkdir -p "$corpus"
  [[ -d $seeds ]] || seeds=
  # libhdf5 1.10 mallocs whatever size a damaged file states (e.g. a local heap in H5HL_protect,
  # a metadata entry in H5C_protect) before it can notice the file is too short; such an
  # out-of-memory is libhdf5's, not ours, so this target runs in fork mode and skips OOMs, and a
  # malloc past ASan's limit returns NULL as it would in production (libhdf5 then reports an
  # error, which the reader turns into ours). Crashes and other sanitizer reports still fail it.
  # A file may also declare a chunk of 2^24 rows for a 12-record dataset, which the reader then
  # allocates and inflates whole, as h5py does: legal, but ~0.1 s per execution under ASan (page
  # faults, shadow poisoning), and such inputs, kept for their coverage, took the target from ~240
  # to 35 executions/s as they piled up in the corpus. A malloc over 64 MB is therefore an ignored
  # out-of-memory too, so they never enter it (the code paths they reach, smaller chunks reach).
  ignores_ooms "$t" && extra=(-fork=1 -ignore_ooms=1 -malloc_limit_mb=64) && asan_extra=allocator_may_return_null=1
  [[ -n ${PRETRAIN_FUZZ_SEED:-} ]] && extra+=(-seed="$PRETRAIN_FUZZ_SEED")
  echo "fuzz $t for ${seconds}s${PRETRAIN_FUZZ_SEED:+ (seed $PRETRAIN_FUZZ_SEED)}"
  # Fork mode exits non-zero after an ignored out-of-memory too: such a target fails on a crash,
  # leak or timeout reproducer only.
  if ! (cd "$build/corpus" && ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}$asan_extra ../fuzz/fuzz_$t -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
          "${extra[@]}" -artifact_prefix="$t-" -print_final_stats=0 "$t" ${seeds:+"$OLDPWD/$seeds"} >"$t.log" 2>&1) &&
     ! { ignores_ooms "$t" && [[ $(reproducers "$t" "crash|leak|timeout") == 0 ]]; }; then
    tail -n 40 "$build/corpus/$t.log"
    echo "fuzz $t: FAILED (reproducer in $build/corpus/$t-*)" >&2
    status=1
  else
    # Named: with PRETRAIN_FUZZ_PARALLEL > 1 the lines of targets running side by side interleave.
    grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|oom/timeout/crash" "$build/corpus/$t.log" | tail -n 1 | sed "s/^/fuzz $t: /" || true
  fi
  # The seconds it fuzzed: fewer than planned when it stopped on a crash.
  ran=$((SECONDS - start))
  ((ran < seconds)) || ran=$seconds
  if [[ -n $campaign ]]; then campaign_row "$t" "$ran"; fi
  return $status
}
# The table's header, once, before targets run side by side.
if [[ -n $campaign && ! -f $table ]]; then
  printf '%s\n' "| date | target | seconds | executions | coverage | features | corpus inputs added | findings | machine |" \
    "|---|---|---:|---:|---:|---:|---:|---:|---|" >"$table"
fi
status=0 running=0
for t in $targets; do
  if ((parallel <= 1)); then
    fuzz_one "$t" || status=1
    continue
  fi
  if ((running >= parallel)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
if [[ -n $campaign ]]; then campaign_totals; fi
exit $status
