"""make-pretraining-shards --rng python against NVIDIA's create_pretraining_data.py: with the same
input, vocabulary, flags and seed (../shared/data/golden/README.md), every dataset of our HDF5 shard
has the golden file's dtype, shape and values, as h5py reads them. This runs the whole command:
our text reader, our WordPiece tokenizer, the instance algorithm and the HDF5 writer."""
import os
import sys

import compat_util as cu

import h5py
import numpy as np

GOLDEN = [("bert-sample", "golden/inputs/bert-sample_text.txt", "golden/nvidia-bert-sample-s128.hdf5"),
          ("botchan", "golden/inputs/botchan-docs.txt", "golden/nvidia-botchan-s128.hdf5")]


def main():
    data = cu.shared_data()
    if not data:
        cu.skip("shared data not found")
    exe = cu.tool("make-pretraining-shards")
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    for name, text, golden in GOLDEN:
        with cu.tempdir() as tmp:
            out = os.path.join(tmp, name)
            cu.run(exe, "--model", "bert", "-i", os.path.join(data, text), "--tokenizer", vocab, "--lowercase",
                   "-o", out, "--rng", "python", "--seq-len", 128, "--max-predictions", 20, "--masked-lm-prob", 0.15,
                   "--short-seq-prob", 0.1, "--dupe-factor", 2, "--seed", 12345, "--quiet")
            ours = h5py.File(os.path.join(out, "train-00000.hdf5"), "r")
            ref = h5py.File(os.path.join(data, golden), "r")
            if sorted(ours.keys()) != sorted(ref.keys()):
                sys.exit(f"{name}: datasets {sorted(ours.keys())} != golden {sorted(ref.keys())}")
            for key in ref.keys():
                a, b = ours[key][...], ref[key][...]
                if a.dtype != b.dtype or a.shape != b.shape:
                    sys.exit(f"{name}/{key}: {a.dtype}{a.shape} != golden {b.dtype}{b.shape}")
                if not np.array_equal(a, b):
                    row = int(np.argwhere(a != b)[0][0])
                    sys.exit(f"{name}/{key}: first differing record {row}:\n ours   {a[row]}\n golden {b[row]}")
            print(f"{name}: {ref['input_ids'].shape[0]} records, all {len(ref.keys())} datasets equal to NVIDIA's")


if __name__ == "__main__":
    main()
