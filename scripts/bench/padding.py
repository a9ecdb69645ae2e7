"""How much of a BERT batch is padding, and what LDDL-style binning and packing would leave of it.

Reads BERT HDF5 shards (ours or NVIDIA's), takes each record's unpadded length (the sum of its
input_mask), and counts the tokens a trainer computes per real token:
  * unbinned: every record padded to seq_len;
  * binned (LDDL's rule, --bin-size B): nbins = seq_len / B, a record of length n goes to bin
    (n - 1) // B and is padded to that bin's upper edge, min((bin + 1) * B, seq_len);
  * packed: records packed first-fit-decreasing into sequences of seq_len, at most --max-pack per
    sequence; each sequence computes seq_len tokens.
This is the reference the binning and packing of make-pretraining-shards (issue 17) are held to.
With --made-binned DIR (make-pretraining-shards --bin-size output of the same instances), the
bins' own shards are counted too and set beside the reference's figure for that bin size; with
--made-packed DIR (make-pretraining-shards --pack), its packed rows beside the reference's packing.
  padding.py SHARD_DIR_OR_FILE... [--bin-size 64 [32 ...]] [--max-pack 3] [--made-binned DIR] [--made-packed DIR]
"""
import argparse
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
    """First-fit decreasing: lengths longest first, each into the lowest-numbered sequence that has
    room for it and fewer than max_pack records, else into a new one. A max-tree over the
    sequences' free room finds that sequence in O(log n)."""
    order = sorted(lengths.tolist(), reverse=True)
    size = 1
    while size < max(len(order), 1):
        size *= 2
    room = [-1] * (2 * size)  # leaves size..2·size-1: free room of sequence i, -1 when closed or unused
    count = [0] * size
    used = 0

    def set_room(i, value):
        k = size + i
        room[k] = value
        while k > 1:
            k //= 2
            room[k] = max(room[2 * k], room[2 * k + 1])

    for n in order:
        if room[1] >= n:  # the leftmost sequence with room ≥ n
            k = 1
            while k < size:
                k = 2 * k if room[2 * k] >= n else 2 * k + 1
            i = k - size
        else:
            i, used = used, used + 1
            room[size + i] = seq_len
        count[i] += 1
        left = room[size + i] - n
        set_room(i, left if count[i] < max_pack and left > 0 else -1)
    return used


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shards", nargs="+")
    ap.add_argument("--bin-size", type=int, nargs="+", default=[64, 32])
    ap.add_argument("--max-pack", type=int, default=3)
    ap.add_argument("--label", default="")
    ap.add_argument("--made-binned", default="", help="make-pretraining-shards --bin-size output of the same run")
    ap.add_argument("--made-packed", default="", help="make-pretraining-shards --pack output of the same run")
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
    if a.made_binned:
        made_binned(a.made_binned, rows, real)
    if a.made_packed:
        made_packed(a.made_packed, rows, real)


def made_binned(out, rows, reference_real):
    """The binned shards make-pretraining-shards wrote: tokens they make a trainer compute (each bin
    padded to its edge) per real token, beside the reference's figure for the same bin size."""
    import json
    m = json.load(open(os.path.join(out, "manifest.json")))
    real = computed = 0
    for b in m["extra"]["bins"]:
        lengths, bin_len, _ = lengths_of([os.path.join(out, b["dir"])])
        real += int(lengths.sum())
        computed += len(lengths) * bin_len
    if real != reference_real:
        raise SystemExit(f"{out}: {real} real tokens, the unbinned shards {reference_real}: not the same instances")
    ours = computed / real
    reference = dict((tag, c / reference_real) for tag, _, _, c in rows)[f"bin{m['extra']['bin_size']}"]
    print(f"| make-pretraining-shards --bin-size {m['extra']['bin_size']} (ours, from its shards) | reference | ratio |")
    print("|---|---:|---:|")
    print(f"| {ours:.3f} per real token | {reference:.3f} | {ours / reference:.3f} |")
    print(f"RESULT {m['seq_len']} made_bin{m['extra']['bin_size']} {ours:.4f}")


def made_packed(out, rows, reference_real):
    """The packed shards make-pretraining-shards wrote: every row computes seq_len tokens; the real
    ones are the input_mask (1 on every instance's tokens), which must be the unpacked run's."""
    import json
    m = json.load(open(os.path.join(out, "manifest.json")))
    lengths, seq_len, _ = lengths_of([out])
    real = int(lengths.sum())
    if real != reference_real:
        raise SystemExit(f"{out}: {real} real tokens, the unpacked shards {reference_real}: not the same instances")
    ours = len(lengths) * seq_len / real
    k = m["extra"]["max_pack"]
    reference = dict((tag, c / reference_real) for tag, _, _, c in rows)[f"packed{k}"]
    print(f"| make-pretraining-shards --pack --max-pack {k} (ours, from its {len(lengths):,} rows) | reference | ratio |")
    print("|---|---:|---:|")
    print(f"| {ours:.3f} per real token | {reference:.3f} | {ours / reference:.3f} |")
    print(f"RESULT {seq_len} made_packed{k} {ours:.4f}")


if __name__ == "__main__":
    main()
