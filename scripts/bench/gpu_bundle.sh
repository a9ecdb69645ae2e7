#!/usr/bin/env bash
# Makes, here, what scripts/bench/gpu.sh needs on a lent GPU machine. That machine's image has CUDA,
# PyTorch and python3 but none of our Debian libraries, and no package registry; the device tool
# carries the working tree and up to 8 ignored paths (64 MiB in all). So this builds Release for
# sm_90 (H100/H200) in its own build directory and packs into OUT (git-ignored):
#   OUT/bundle.tar.xz  bin/    bert_pretrain, gpt_pretrain and the gpu tests (gpu_*), stripped
#                      lib/    every shared library they load that the image lacks (ldd), stripped:
#                              all but glibc's and CUDA's (cuBLAS, cuBLASLt, NCCL come from the image)
#                      lib/cxx libstdc++ and libgcc_s, which gpu.sh uses only where the image's are older
#                      shards/ bert128, bert512 (BERT HDF5, 20 and 80 predictions), gpt (Megatron,
#                              GPT-2 BPE): the enwiki excerpt of the shared data, made here
#   OUT/MANIFEST.txt   commit, date, contents and sizes, the libraries and glibc the image must have
# Then it proves the bundle needs nothing of this machine but glibc: the tarball unpacked into a
# chroot holding only glibc, the bundle and CUDA's three libraries, where bert_pretrain and
# gpt_pretrain train BERT and GPT tiny on the CPU from the bundled shards and each gpu test runs
# (and skips: no GPU). It fails if the bundle and the working tree exceed the tool's 64 MiB.
#   scripts/bench/gpu_bundle.sh [--build build-gpu-bundle] [--out gpu-bundle] [--arch 90] [--check 1]
#   scripts/bench/gpu_bundle.sh --shards-only DIR [--build build]   (just the shards: gpu.sh --dry-run)
# The device call that carries it is in docs/benchmarks.md, "GPU check".

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=build-gpu-bundle out=gpu-bundle arch=90 check=1 shards_only=""
bench_args --build=build --out=out --arch=arch --check=check --shards-only=shards_only -- "$@"
wiki=$enwiki_jsonl
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
encoder=$shared_data/vocab/gpt2-encoder.json
for f in "$wiki" "$vocab" "$encoder"; do
  bench_require "$f" "gpu_bundle.sh: $f not found (set PRETRAIN_SHARED_DATA)"
done

# make_shards EXE DIR: the three shard sets gpu.sh trains on, from the enwiki excerpt (~6000 BERT
# instances at seq 128, ~1900 at 512, ~550k GPT tokens; the trainer starts another epoch at the end).
make_shards() {
  local exe=$1 dir=$2
  mkdir -p "$dir"
  "$exe" -q --model bert -i "$wiki" --tokenizer "$vocab" -o "$dir/bert128" --seq-len 128 --max-predictions 20 \
    --dupe-factor 1 >/dev/null
  "$exe" -q --model bert -i "$wiki" --tokenizer "$vocab" -o "$dir/bert512" --seq-len 512 --max-predictions 80 \
    --dupe-factor 1 >/dev/null
  "$exe" -q --model gpt -i "$wiki" --tokenizer "$encoder" -o "$dir/gpt" >/dev/null
}

if [[ -n $shards_only ]]; then
  bench_build_missing "$build" datagen/make-pretraining-shards
  make_shards "$build/datagen/make-pretraining-shards" "$shards_only"
  exit 0
fi

bench_require /usr/local/cuda/bin/nvcc "gpu_bundle.sh: no nvcc in /usr/local/cuda (the bundle is a CUDA build)"
launchers=()
if command -v ccache >/dev/null; then
  launchers=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
gpu_tests=()
for src in tests/gpu/*_test.cpp; do
  name=$(basename "$src" .cpp)
  gpu_tests+=("gpu_$name")
done
echo "# building $build (Release, CUDA architectures $arch): bert_pretrain gpt_pretrain make-pretraining-shards ${gpu_tests[*]}" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPRETRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" "${launchers[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target bert_pretrain gpt_pretrain make-pretraining-shards "${gpu_tests[@]}" >/dev/null

bench_tmpdir gpu-bundle
stage=$bench_tmp/stage
mkdir -p "$stage/bin" "$stage/lib/cxx"
bins=("$build/trainer/bert_pretrain" "$build/trainer/gpt_pretrain")
for t in "${gpu_tests[@]}"; do bins+=("$build/tests/$t"); done
for b in "${bins[@]}"; do strip -o "$stage/bin/$(basename "$b")" "$b"; done
make_shards "$build/datagen/make-pretraining-shards" "$stage/shards"

# The libraries: glibc's stay (every Linux has one: MANIFEST says which version the binaries need),
# CUDA's come from the image (PyTorch's nvidia-* wheels or /usr/local/cuda: gpu.sh finds them).
glibc='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl)\.so'
from_image='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn[a-z_]*|libnvrtc|libnvJitLink|libcufft|libcurand|libcusparse|libcusolver)\.so'
declare -A image_libs=()
for b in "${bins[@]}"; do
  if ldd "$b" | grep -q 'not found'; then
    echo "gpu_bundle.sh: $b: a library is not found here:" >&2
    ldd "$b" | grep 'not found' >&2
    exit 1
  fi
  while read -r name path; do
    if [[ $name =~ $glibc ]]; then continue; fi
    if [[ $name =~ $from_image ]]; then image_libs[$name]=1; continue; fi
    dest=$stage/lib
    if [[ $name == libstdc++.so.* || $name == libgcc_s.so.* ]]; then dest=$stage/lib/cxx; fi
    [[ -e $dest/$name ]] || strip --strip-unneeded -o "$dest/$name" "$(readlink -f "$path")"
  done < <(ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done

# The newest symbol versions the bundle asks of glibc and libstdc++ (gpu.sh compares the image's).
versions() {  # versions PREFIX: the newest PREFIX_x.y.z any bundled ELF file needs
  find "$stage/bin" "$stage/lib" -type f -exec objdump -T {} + 2>/dev/null | grep -o "($1_[0-9.]*)" | tr -d '()' |
    sort -u -V | tail -1
}
{
  echo "pretrain GPU bundle (scripts/bench/gpu_bundle.sh) for scripts/bench/gpu.sh"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"'), nvcc $(/usr/local/cuda/bin/nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2), CUDA architectures $arch"
  echo "needs-glibc: $(versions GLIBC)"
  echo "needs-glibcxx: $(versions GLIBCXX)"
  echo "needs-cxxabi: $(versions CXXABI)"
  echo "from-image: ${!image_libs[*]}"
  # Libraries the binaries open at run time (cudnn-frontend opens cuDNN so): ldd cannot see them.
  echo "dlopen-from-image: $(grep -aoh 'libcudnn[a-z_]*\.so\.[0-9]*' "$stage"/bin/* | sort -u | tr '\n' ' ' | sed 's/ $//')"
  echo "files:"
  (cd "$stage" && find . -type f ! -name MANIFEST.txt -printf '%s %p\n' | sort -k2)
} >"$stage/MANIFEST.txt"

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
tar -C "$stage" -cf - . | xz -T0 -6 >"$out.tmp/bundle.tar.xz"
cp "$stage/MANIFEST.txt" "$out.tmp/MANIFEST.txt"
rm -rf "$out"
mv "$out.tmp" "$out"

if ((check)); then
  # A root with glibc, the bundle as gpu.sh unpacks it, and CUDA's libraries standing in for the
  # image's: nothing else of this machine is there to be found.
  root=$bench_tmp/root
  mkdir -p "$root/lib/x86_64-linux-gnu" "$root/lib64" "$root/tmp" "$root/bundle" "$root/cuda"
  for f in /lib/x86_64-linux-gnu/{libc.so.6,libm.so.6,libpthread.so.0,libdl.so.2,librt.so.1,libresolv.so.2,ld-linux-x86-64.so.2}; do
    cp -L "$f" "$root/lib/x86_64-linux-gnu/"
  done
  ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
  for name in "${!image_libs[@]}"; do
    path=$(ldd "${bins[@]}" | awk -v n="$name" '$1 == n && !found { print $3; found = 1 }')
    cp --link "$(readlink -f "$path")" "$root/cuda/$name" 2>/dev/null || cp "$(readlink -f "$path")" "$root/cuda/$name"
  done
  tar -C "$root/bundle" -xJf "$out/bundle.tar.xz"
  in_root() {  # in_root CMD...: CMD inside the root, with an empty environment but the library path
    env -i PATH=/bundle/bin LD_LIBRARY_PATH=/bundle/lib:/bundle/lib/cxx:/cuda TMPDIR=/tmp "$(command -v chroot)" "$root" "$@"
  }
  if ((EUID != 0)); then
    echo "gpu_bundle.sh: not root, so no chroot: the bundle is not checked" >&2
  else
    echo "# checking the bundle in a chroot with glibc and CUDA's libraries alone" >&2
    in_root /bundle/bin/bert_pretrain --data /bundle/shards/bert128 --model tiny --batch-size 4 --max-steps 2 \
      --device cpu --precision bf16 --threads 2 --workers 1 --log-dir /tmp/bert 2>&1 | grep -E '^(step|summary)' >&2
    in_root /bundle/bin/gpt_pretrain --data /bundle/shards/gpt --model tiny --seq-len 256 --batch-size 2 --max-steps 2 \
      --device cpu --precision bf16 --threads 2 --workers 1 2>&1 | grep -E '^(step|summary)' >&2
    for t in "${gpu_tests[@]}"; do
      in_root "/bundle/bin/$t" --gtest_brief=1 | tail -2 | sed "s|^|$t: |" >&2
    done
  fi
fi

size=$(stat -c %s "$out/bundle.tar.xz")
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null |
  awk '{ s += $1 } END { print s + 0 }')
echo "$out/bundle.tar.xz: $((size / 1024)) KiB ($(sed -n '/^files:/,$p' "$out/MANIFEST.txt" | awk 'NR > 1 { s += $1 } END { printf "%.1f MiB", s / 1048576 }') unpacked); working tree $((tree / 1024)) KiB; the tool's limit for both: 65536 KiB"
if ((size + tree > 64 * 1024 * 1024)); then
  echo "gpu_bundle.sh: the bundle and the working tree exceed the device tool's 64 MiB" >&2
  exit 1
fi
