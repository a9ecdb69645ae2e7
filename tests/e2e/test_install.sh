#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then two consumers outside the source tree built
# against it alone: tests/install/cpp (CMake, find_package(pretrain CONFIG COMPONENTS loader
# tokenizer), built with g++ and with clang++, compiling every installed header too) and
# tests/install/c (plain cc + pkg-config). Both read the first batch of BERT shards made by the
# installed tools and must agree on it; the C++ one's token ids must equal the tokenize CLI's.
set -euo pipefail
build=${PRETRAIN_BUILD_DIR:?}
src=${PRETRAIN_SOURCE_DIR:?}
work=$(mktemp -d -t pretrain-e2e-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
quiet() {  # quiet CMD...: runs CMD, shows its output only when it fails
  local rc=0
  "$@" >"$work/log" 2>&1 || rc=$?
  [[ $rc == 0 ]] || { cat "$work/log" >&2; fail "exit $rc: $*"; }
}
prefix=$work/prefix

quiet cmake --install "$build" --prefix "$prefix"
for tool in wikiprep train-tokenizer tokenize make-pretraining-shards shard-tool bert_pretrain gpt_pretrain; do
  [[ -x $prefix/bin/$tool ]] || fail "tool $tool not installed"
done
for lib in common mpi formats tokenizer wikiprep shards loader trainer; do
  [[ -f $prefix/lib/libpretrain_$lib.a ]] || fail "libpretrain_$lib.a not installed"
  [[ -f $prefix/lib/pkgconfig/pretrain_$lib.pc ]] || fail "pretrain_$lib.pc not installed"
  [[ -f $prefix/lib/cmake/pretrain/pretrain-$lib-targets.cmake ]] || fail "pretrain::$lib's CMake targets not installed"
done
for header in loader/c_api.h loader/loader.h tokenizer/tokenizer.h common/manifest.h; do
  [[ -f $prefix/include/pretrain/$header ]] || fail "header $header not installed"
done
# The package must stand alone: nothing installed may point back into the build or source tree.
if grep -rlF -e "$build" -e "$src/" "$prefix/include" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  fail "installed files above name the build or source tree"
fi

# Shards and a vocabulary from the installed tools; the expected ids from the installed tokenize.
bin=$prefix/bin
quiet "$bin/train-tokenizer" -q --kind wordpiece --vocab-size 500 -o "$work/wp" "$src/tests/data/sample-docs.jsonl"
vocab=$work/wp/vocab.txt
quiet "$bin/make-pretraining-shards" -q --model bert -i "$src/tests/data/sample-docs.jsonl" --tokenizer "$vocab" \
  -o "$work/bert" --seq-len 64 --max-predictions 10 --dupe-factor 2 --num-shards 1
text="The bay opens to the sea; tides follow a pattern."
expected_ids=$(printf '%s\n' "$text" | "$bin/tokenize" -q --tokenizer "$vocab")
[[ -n $expected_ids ]] || fail "tokenize gave no ids"
cls=$(printf '[CLS]\n' | "$bin/tokenize" -q --tokenizer "$vocab")

export CMAKE_PREFIX_PATH=$prefix  # the prefix alone: no build tree, no package registry
compilers=(g++)
command -v clang++ >/dev/null && compilers+=(clang++)
for cxx in "${compilers[@]}"; do
  out=$work/cpp-$cxx
  cp -r "$src/tests/install/cpp" "$out"
  quiet cmake -S "$out" -B "$out/build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCHECK_ALL_HEADERS="$([[ $cxx == g++ ]] && echo ON || echo OFF)"
  quiet cmake --build "$out/build" -j2
  "$out/build/consumer" "$work/bert" "$vocab" "$text" >"$work/cpp-$cxx.out" || fail "$cxx consumer failed"
  grep -qx "batch 4 input_ids 4 64 masked_lm_positions 4 10" "$work/cpp-$cxx.out" ||
    fail "$cxx consumer: batch shape: $(head -n 1 "$work/cpp-$cxx.out")"
  [[ $(sed -n 's/^row0 //p' "$work/cpp-$cxx.out" | cut -d' ' -f1) == "$cls" ]] ||
    fail "$cxx consumer: the first row does not start with [CLS] ($cls)"
  [[ $(sed -n 's/^ids //p' "$work/cpp-$cxx.out") == "$expected_ids" ]] ||
    fail "$cxx consumer: ids '$(sed -n 's/^ids //p' "$work/cpp-$cxx.out")', tokenize gives '$expected_ids'"
done

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc_flags=$(pkg-config --static --cflags --libs pretrain_loader) || fail "pkg-config pretrain_loader"
for cc in cc clang; do
  command -v "$cc" >/dev/null || continue
  # shellcheck disable=SC2086  # cc_flags is a list of flags
  quiet "$cc" -std=c11 -Wall -Wextra -Werror "$src/tests/install/c/consumer.c" -o "$work/c-$cc" $cc_flags
  "$work/c-$cc" "$work/bert" >"$work/c-$cc.out" || fail "C consumer ($cc) failed"
  diff <(grep -v '^ids ' "$work/cpp-g++.out") "$work/c-$cc.out" >&2 ||
    fail "the C consumer ($cc) and the C++ one read different first batches"
done
echo "install: tools, libraries, headers, CMake package and pkg-config files: ok"
