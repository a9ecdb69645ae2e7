#!/usr/bin/env bash
# Builds the whole project (libraries, tools, tests, benchmarks) in every build type with every
# compiler, with and without CUDA, each in its own build-matrix/<compiler>-<type>-<cuda>/ with
# -DPRETRAIN_WERROR=ON (so a warning any of them raises fails it, as CI's would), and prints a table
# of what built, with the time each took. Users build with -Werror off; this is how we keep every
# combination they may pick clean.
#   scripts/build_matrix.sh [--compilers "gcc clang"] [--types "Debug Release RelWithDebInfo MinSizeRel"]
#                           [--cuda "OFF ON"] [--jobs N] [--keep]
# CUDA ON needs nvcc (/usr/local/cuda); its host compiler is the C++ compiler of the row. Each build
# takes 5-10 minutes on 2 cores: the full matrix (16 builds) is an hour or two, not for CI, which
# builds Release with GCC (and CUDA when nvcc is there) and Debug with clang (the sanitizer build).
# When ccache is installed it is used (cache in build-matrix/ccache), so the CUDA ON build of a row
# recompiles only what PRETRAIN_HAVE_CUDA changes; ccache hashes the flags, so nothing stale is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
compilers="gcc clang" types="Debug Release RelWithDebInfo MinSizeRel" cudas="OFF ON" jobs=$(nproc) keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --compilers) compilers=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --cuda) cudas=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p build-matrix
launcher=()
if command -v ccache >/dev/null; then
  # hash_dir off: with -g the build directory is part of the key, and every row has its own.
  export CCACHE_DIR=$PWD/build-matrix/ccache CCACHE_NOHASHDIR=true
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
results=build-matrix/results.md
{
  echo "| compiler | build type | CUDA | result | minutes |"
  echo "|---|---|---|---|---:|"
} >"$results"
failed=0
for cc in $compilers; do
  case $cc in
    gcc) env=(CC=gcc CXX=g++) ;;
    clang) env=(CC=clang CXX=clang++) ;;
    *) echo "unknown compiler $cc (gcc or clang)" >&2; exit 2 ;;
  esac
  for type in $types; do
    for cuda in $cudas; do
      dir=build-matrix/$cc-$type-cuda$cuda
      extra=()
      # nvcc's host compiler: the row's, so a clang row compiles the .cu host code with clang too.
      [[ $cuda == ON ]] && extra=(-DCMAKE_CUDA_HOST_COMPILER="$(command -v "${env[1]#CXX=}")")
      start=$SECONDS
      echo "== $cc $type CUDA $cuda" >&2
      if env "${env[@]}" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DPRETRAIN_CUDA="$cuda" -DPRETRAIN_WERROR=ON \
           "${extra[@]}" "${launcher[@]}" >"$dir.log" 2>&1 && cmake --build "$dir" -j "$jobs" >>"$dir.log" 2>&1; then
        result=built
      else
        result="FAILED (see $dir.log)"
        failed=1
        grep -m 5 -E "error|Error" "$dir.log" >&2 || true
      fi
      printf '| %s | %s | %s | %s | %.1f |\n' "$cc" "$type" "$cuda" "$result" "$(echo "($SECONDS - $start) / 60" | bc -l)" >>"$results"
      ((keep)) || rm -rf "$dir"
    done
  done
done
cat "$results"
exit $failed
