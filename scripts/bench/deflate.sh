#!/usr/bin/env bash
# Deflate and inflate of BERT HDF5 chunks: zlib (what NVIDIA's files and HDF5's gzip filter use)
# against libdeflate and ISA-L (formats/deflate.h), one thread, on the chunks of real shards: ours
# from the enwiki excerpt (seq 128, dupe --dupe) and NVIDIA's golden files. Deflate MB/s per CPU
# second and output size at each gzip level (ISA-L's own level beside it), inflate MB/s of zlib's
# gzip-4 streams and of each library's own; each figure with zlib's beside it and the ratio. Our
# chunks once more byte-shuffled first (bench_deflate --shuffle: HDF5's shuffle filter, which h5py
# and NVIDIA's reader undo unasked), their sizes also against unshuffled zlib gzip 4.
# Then the writer's criterion: make-pretraining-shards --rng python on the golden inputs at each
# --compression-level, its file's size against NVIDIA's gzip-4 file of the same records.
#   scripts/bench/deflate.sh [--dupe 1] [--levels "1 2 3 4 5 6"] [--runs 3] [--build build]

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
dupe=1 levels="1 2 3 4 5 6" runs=3 build=build
bench_args --dupe=dupe --levels=levels --runs=runs --build=build -- "$@"
wiki=$enwiki_jsonl
vocab=$shared_data/vocab/bert-base-uncased-vocab.txt
golden=$shared_data/golden
bench_require "$wiki" "deflate.sh: $wiki not found (set PRETRAIN_SHARED_DATA)"
bench_require "$golden/nvidia-botchan-s128.hdf5" "deflate.sh: $golden not found (set PRETRAIN_SHARED_DATA)"
bench_build "$build" make-pretraining-shards bench_deflate
bench_tmpdir deflate
dir=$bench_tmp

"$build/datagen/make-pretraining-shards" --model bert -i "$wiki" --tokenizer "$vocab" -o "$dir/ours" --seq-len 128 \
  --dupe-factor "$dupe" --num-shards 2 --quiet >/dev/null
for set in ours nvidia shuffled; do
  if [[ $set == nvidia ]]; then files=("$golden"/nvidia-*-s128.hdf5); else files=("$dir"/ours/*.hdf5); fi
  shuffle=()
  [[ $set == shuffled ]] && shuffle=(--shuffle)
  echo "# $set: ${files[*]}" >&2
  # shellcheck disable=SC2086  # the levels are words
  "$build/bench/bench_deflate" "${files[@]}" "${shuffle[@]}" --runs "$runs" --levels $levels |
    awk -v s="$set" '$1=="RESULT"{$1=s; print}' >>"$dir/results.txt"
done

# The writer at each level on the golden inputs, with the golden files' flags (tests/compat/
# test_make_shards_golden.py): the same records, so only the compression differs.
for level in 0 $levels; do
  for name in bert-sample botchan; do
    text=$golden/inputs/bert-sample_text.txt
    [[ $name == botchan ]] && text=$golden/inputs/botchan-docs.txt
    out=$dir/golden-$name-$level
    "$build/datagen/make-pretraining-shards" --model bert -i "$text" --tokenizer "$vocab" --lowercase -o "$out" \
      --rng python --seq-len 128 --max-predictions 20 --masked-lm-prob 0.15 --short-seq-prob 0.1 --dupe-factor 2 \
      --seed 12345 --compression-level "$level" --quiet >/dev/null
    echo "golden $name $level $(stat -c %s "$out/train-00000.hdf5") $(stat -c %s "$golden/nvidia-$name-s128.hdf5")" \
      >>"$dir/results.txt"
  done
done

/usr/bin/python3 - "$dir/results.txt" <<'PY'
import sys
deflate, inflate, golden = {}, {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "deflate":   # set deflate codec level liblevel MB cpu bytes
        deflate[(f[0], f[2], int(f[3]))] = (int(f[4]), float(f[5]), float(f[6]), int(f[7]))
    elif f[1] == "inflate":  # set inflate codec from level MB cpu
        inflate[(f[0], f[2], f[3])] = float(f[5]) / float(f[6])
    elif f[0] == "golden":   # golden name level ours nvidia
        golden.setdefault(int(f[2]), []).append((f[1], int(f[3]), int(f[4])))
for s in ("ours", "nvidia", "shuffled"):
    # Shuffled chunks' sizes against what the same chunks take unshuffled at zlib gzip 4.
    z4 = deflate.get(("ours" if s == "shuffled" else s, "zlib", 4))
    what = "our shards' chunks byte-shuffled" if s == "shuffled" else f"{s} shards' chunks"
    print(f"\ndeflate, {what} ({z4[1]:.1f} MB), one thread: MB/s per CPU-second, output size")
    print("| library | gzip level (library's) | MB/s | zlib MB/s | × zlib | output MB | zlib's | size / zlib's | size / zlib gzip 4 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (set_, codec, level), (lib, mb, cpu, size) in sorted(deflate.items(), key=lambda kv: (kv[0][1] != "zlib", kv[0][1], kv[0][2])):
        if set_ != s:
            continue
        z = deflate[(s, "zlib", level)]
        print(f"| {codec} | {level} ({lib}) | {mb / cpu:.0f} | {z[1] / z[2]:.0f} | {(mb / cpu) / (z[1] / z[2]):.2f} | "
              f"{size / 1e6:.2f} | {z[3] / 1e6:.2f} | {size / z[3]:.3f} | {size / z4[3]:.3f} |")
    if s == "shuffled":
        continue
    print(f"\ninflate, {s} shards' chunks, one thread: MB/s (decoded) per CPU-second")
    print("| library | streams written by (gzip 4) | MB/s | zlib MB/s | × zlib |")
    print("|---|---|---:|---:|---:|")
    for (set_, codec, src), rate in sorted(inflate.items()):
        if set_ == s:
            z = inflate[(s, "zlib", src)]
            print(f"| {codec} | {src} | {rate:.0f} | {z:.0f} | {rate / z:.2f} |")
print("\nmake-pretraining-shards --rng python on the golden inputs: our file's size / NVIDIA's gzip-4 file (goal ≤ 1.10)")
print("| --compression-level | bert-sample | botchan |")
print("|---:|---:|---:|")
for level in sorted(golden):
    cells = {n: f"{o / g:.3f} ({o:,} / {g:,} bytes)" for n, o, g in golden[level]}
    print(f"| {level} | {cells.get('bert-sample', '')} | {cells.get('botchan', '')} |")
PY
