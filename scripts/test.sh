#!/usr/bin/env bash
# Installs what is missing, builds everything (the CUDA objects too when nvcc is here), runs every
# test, then the unit tests again under ASan+UBSan, the loader's under TSan, then a short libFuzzer
# smoke run per target. The ASan build is clang's when clang is here (the main build is the default
# compiler's, usually GCC, so CI compiles with both) and also holds the libFuzzer targets, so the
# smoke run needs no build of its own.
# Exit non-zero on any failure. Environment:
#   PRETRAIN_SHARED_DATA  real reference data (default ../shared/data); tests needing it skip without it
#   PRETRAIN_JOBS         parallel build jobs (default: nproc)
#   PRETRAIN_FUZZ_SECONDS seconds per fuzz target in the smoke run (default 5; 0 skips)
#   PRETRAIN_FUZZ_SEED    libFuzzer seed of the smoke run (default 1, so a failure reproduces)
#   PRETRAIN_SKIP_ASAN=1  skip the ASan build (local iteration only; CI runs it)
#   PRETRAIN_SKIP_TSAN=1  skip the TSan build of the loader tests (local iteration only)
#   PRETRAIN_WERROR=ON    warnings are errors (CI sets it; scripts/demo.sh configures build/ the same way)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${PRETRAIN_JOBS:-$(nproc)}
werror=${PRETRAIN_WERROR:-OFF}
export PRETRAIN_SHARED_DATA=${PRETRAIN_SHARED_DATA:-$root/../shared/data}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
started=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - started)); }

step "dependencies"
scripts/setup_deps.sh

step "configure and build (build/, Release: what users build)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPRETRAIN_WERROR="$werror" >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
grep -E "CUDA backend" build.configure.log || true
cmake --build build -j "$jobs"

# The sanitizer builds compile in the background at the lowest priority while build/'s tests run:
# the end-to-end tests wait on processes, sockets and timeouts much of the time, and the builds
# take that idle CPU without slowing the tests, which have the cores first.
# The sanitizer builds keep line tables only (-g1), all their reports need (file and line): less
# to compile and link than full debug info (two test binaries: 91 CPU s against 99).
line_tables=(-DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1)
background=()  # "name pid" of each background build; each is its own process group, ended with us
trap 'for e in "${background[@]}"; do kill -- "-${e#* }" 2>/dev/null || true; done' EXIT
# background_build NAME DIR TARGET...: builds TARGETs in DIR at nice 19, output in DIR.build.log.
background_build() {
  local name=$1 dir=$2; shift 2
  setsid nice -n 19 cmake --build "$dir" -j "$jobs" --target "$@" >"$dir.build.log" 2>&1 &
  background+=("$name $!")
}
# finish_build NAME DIR: waits for NAME's background build; its log and exit 1 if it failed.
finish_build() {
  local entry pid
  for entry in "${background[@]}"; do
    [[ ${entry%% *} == "$1" ]] && pid=${entry#* }
  done
  wait "$pid" || { tail -n 80 "$2.build.log"; echo "test.sh: the $1 build failed (whole log: $2.build.log)"; exit 1; }
}

if [[ "${PRETRAIN_SKIP_ASAN:-0}" != 1 ]]; then
  asan_config=(-DCMAKE_BUILD_TYPE=Debug "${line_tables[@]}" -DPRETRAIN_SANITIZE=ON -DPRETRAIN_CUDA=OFF -DPRETRAIN_WERROR="$werror")
  asan_cc=() asan_targets=(pretrain_unit_tests)
  if command -v clang++ >/dev/null; then
    asan_cc=(CC=clang CXX=clang++)
    asan_config+=(-DPRETRAIN_FUZZ=ON)
    export PRETRAIN_FUZZ_BUILD=build-asan  # the smoke run below fuzzes these binaries
    for f in tests/fuzz/fuzz_*.cpp; do asan_targets+=("$(basename "$f" .cpp)"); done
  fi
  env "${asan_cc[@]}" cmake -S . -B build-asan "${asan_config[@]}" >build-asan.configure.log 2>&1 ||
    { cat build-asan.configure.log; exit 1; }
  background_build asan build-asan "${asan_targets[@]}"
fi
if [[ "${PRETRAIN_SKIP_TSAN:-0}" != 1 ]]; then
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug "${line_tables[@]}" -DPRETRAIN_TSAN=ON -DPRETRAIN_CUDA=OFF -DPRETRAIN_WERROR="$werror" \
    >build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log; exit 1; }
  background_build tsan build-tsan pretrain_tsan_tests
fi

step "tests (build/; the sanitizer builds compile meanwhile at low priority)"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900

if [[ "${PRETRAIN_SKIP_ASAN:-0}" != 1 ]]; then
  step "unit tests under ASan+UBSan (build-asan/)"
  finish_build asan build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L unit --timeout 900
fi

if [[ "${PRETRAIN_SKIP_TSAN:-0}" != 1 ]]; then
  # The loader's prefetcher (driver thread, ring, ready queue, slot leases, restore) under TSan.
  # Debian's oneTBB is not instrumented, so tests/tsan.supp drops reports whose stacks pass
  # through libtbb; everything our own threads hand over is checked.
  step "loader tests under ThreadSanitizer (build-tsan/)"
  finish_build tsan build-tsan
  TSAN_OPTIONS="suppressions=$root/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1" \
    ctest --test-dir build-tsan --output-on-failure -j "$jobs" -L tsan --timeout 900
fi

fuzz_seconds=${PRETRAIN_FUZZ_SECONDS:-5}
if [[ "$fuzz_seconds" != 0 ]] && command -v clang++ >/dev/null; then
  # One target per core at a time: each libFuzzer process is single-threaded (13 targets: 90 s
  # one at a time on 2 cores).
  step "fuzz smoke: ${fuzz_seconds}s per target, $jobs at a time (${PRETRAIN_FUZZ_BUILD:-build-fuzz}/)"
  PRETRAIN_FUZZ_SEED=${PRETRAIN_FUZZ_SEED:-1} PRETRAIN_FUZZ_PARALLEL=${PRETRAIN_FUZZ_PARALLEL:-$jobs} \
    scripts/fuzz.sh --all "$fuzz_seconds"
elif [[ "$fuzz_seconds" != 0 ]]; then
  echo "fuzz smoke skipped: clang++ not found (apt-get install clang libclang-rt-14-dev)"
fi

step "all tests passed"
