"""How much of a BERT batch is padding, and what LDDL-style binning and packing would leave of it.

Reads BERT HDF5 shards (ours or NVIDIA's), takes each record's unpadded length (the sum of its
input_mask), and counts the tokens a trainer computes per real token:
  * unbinned: every record padded to seq_len;
  * binned (LDDL's rule, --bin-size B): nbins = seq_len / B, a record of length n goes to bin
    (n - 1) // B and is padded to that bin's upper edge, min((bin + 1) * B, seq_len);
  * packed: records packed first-fit-decreasing into sequences of seq_len, at most --max-pack per
    sequence; each sequence computes seq_len tokens.
This is the reference the binning and packing of make-pretraining-shards (issue 17) are held to.
  padding.py SHARD_DIR_OR_FILE... [--bin-size 64 [32 ...]] [--max-pack 3]
"""
import argparse
import bisect
import glob
import os

import h5py
import numpy as np


def lengths_of(paths):
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "*.hdf5"))) if os.path.isdir(p) else [p]
    lengths, seq_len = [], None
    for f in files:
        with h5py.File(f, "r") as h:
            mask = h["input_mask"][:]
            seq_len = mask.shape[1] if seq_len is None else seq_len
            if mask.shape[1] != seq_len:
                raise SystemExit(f"{f}: seq_len {mask.shape[1]}, the others {seq_len}")
            lengths.append(mask.astype(np.int64).sum(axis=1))
    if not files:
        raise SystemExit(f"no .hdf5 shards in {paths}")
    return np.concatenate(lengths), seq_len, len(files)


def binned_tokens(lengths, seq_len, bin_size):
    edges = np.minimum(((lengths - 1) // bin_size + 1) * bin_size, seq_len)
    return int(edges.sum())


def packed_sequences(lengths, seq_len, max_pack):
    """First-fit decreasing: each length into the first open sequence with room and fewer than
    max_pack records, else a new one. Open sequences are kept sorted by free room, so "first fit"
    is the lowest-indexed sequence among those with enough room; with equal room any is equivalent
    for the count."""
    free, count = [], []  # per sequence: room left, records in it
    by_room = []          # (room, sequence) of sequences that can still take a record
    for n in sorted(lengths.tolist(), reverse=True):
        i = bisect.bisect_left(by_room, (n, -1))
        if i < len(by_room):
            room, s = by_room.pop(i)
            free[s] -= n
            count[s] += 1
            if count[s] < max_pack and free[s] > 0:
                bisect.insort(by_room, (free[s], s))
        else:
            free.append(seq_len - n)
            count.append(1)
            s = len(free) - 1
            if max_pack > 1 and free[s] > 0:
                bisect.insort(by_room, (free[s], s))
    return len(free)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shards", nargs="+")
    ap.add_argument("--bin-size", type=int, nargs="+", default=[64, 32])
    ap.add_argument("--max-pack", type=int, default=3)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    lengths, seq_len, files = lengths_of(a.shards)
    real = int(lengths.sum())
    rows = [("unbinned", "unbinned", len(lengths), len(lengths) * seq_len)]
    for b in a.bin_size:
        rows.append((f"bin{b}", f"--bin-size {b} ({seq_len // b} bins)", len(lengths),
                     binned_tokens(lengths, seq_len, b)))
    packs = packed_sequences(lengths, seq_len, a.max_pack)
    rows.append((f"packed{a.max_pack}", f"packed, ≤ {a.max_pack} per sequence", packs, packs * seq_len))
    label = a.label or ", ".join(a.shards)
    print(f"\npadding: {label}: {len(lengths):,} instances in {files} shard(s), seq_len {seq_len}, "
          f"{real:,} real tokens (mean length {real / len(lengths):.1f})")
    print("| case | sequences | tokens computed | per real token | padding share |")
    print("|---|---:|---:|---:|---:|")
    for tag, name, seqs, computed in rows:
        print(f"| {name} | {seqs:,} | {computed:,} | {computed / real:.3f} | {1 - real / computed:.1%} |")
    for tag, _, _, computed in rows:  # machine-readable: seq_len, case, tokens computed per real token
        print(f"RESULT {seq_len} {tag} {computed / real:.4f}")


if __name__ == "__main__":
    main()
