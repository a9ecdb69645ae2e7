#!/usr/bin/env bash
# scripts/fuzz.sh --log-status: the executions, coverage and features a campaign row records, read
# from libFuzzer logs of each shape (lines abridged from real runs). A fork-mode run that stopped on
# a crash echoes the crashing child's log after its own status lines; the row took that child's
# count (10,319 of 192,027 executions) until the parent's lines were preferred.
set -euo pipefail
fuzz_sh="${PRETRAIN_SOURCE_DIR:?}/scripts/fuzz.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect() {  # expect LOG "EXECUTIONS COVERAGE FEATURES"
  local got
  got=$(bash "$fuzz_sh" --log-status "$1")
  [[ $got == "$2" ]] || { echo "FAIL: $1: got '$got', expected '$2'" >&2; exit 1; }
}

printf '%s\n' "INFO: -fork=1: fuzzing in separate process(s)" \
  "#620: cov: 1615 ft: 1615 corp: 7 exec/s 310 oom/timeout/crash: 0/0/0 time: 2s job: 1 dft_time: 0" \
  "#192027: cov: 2784 ft: 4055 corp: 142 exec/s 266 oom/timeout/crash: 3/0/0 time: 794s job: 39 dft_time: 0" \
  "INFO: Seed: 595934690" \
  "#2	INITED cov: 1100 ft: 2500 corp: 60/1100Kb exec/s: 0 rss: 300Mb" \
  "#10319	NEW    cov: 1252 ft: 3284 corp: 69/1246Kb lim: 20160 exec/s: 264 rss: 385Mb L: 20160/20160 MS: 2 ChangeBinInt-ChangeByte-" \
  "==14231==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x61600000ce88" \
  "stat::number_of_executed_units: 10409" "INFO: exiting: 1 time: 794s" >"$dir/fork-crash.log"
expect "$dir/fork-crash.log" "192027 2784 4055"

printf '%s\n' "#2	INITED cov: 460 ft: 2000 corp: 50/20Kb exec/s: 0 rss: 60Mb" \
  "#4096	pulse  cov: 466 ft: 2130 corp: 90/40Kb lim: 4096 exec/s: 2048 rss: 70Mb" \
  "#442115	DONE   cov: 466 ft: 2132 corp: 95/45Kb lim: 4096 exec/s: 409 rss: 90Mb" \
  "Done 442115 runs in 1081 second(s)" >"$dir/done.log"
expect "$dir/done.log" "442115 466 2132"

printf '%s\n' "#2	INITED cov: 1800 ft: 8000 corp: 40/1Mb exec/s: 0 rss: 80Mb" \
  "#57036	REDUCE cov: 1819 ft: 8733 corp: 60/2Mb lim: 9000 exec/s: 57 rss: 200Mb L: 100/9000 MS: 1 EraseBytes-" \
  "==1==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000" >"$dir/crash.log"
expect "$dir/crash.log" "57036 1819 8733"

: >"$dir/empty.log"
expect "$dir/empty.log" "0 ? ?"
echo "fuzz.sh --log-status: 4 logs read as expected"
