"""h5py peer of bench_bert_hdf5: the same N seq-128 records written with gzip level 4 and the same
chunk shape (512 whole records, our writer's default), read back in slices, then random records.
Prints the same RESULT lines:  RESULT hdf5_write|hdf5_read_seq <MB/s> <s>, hdf5_read_random <rec/s> <s>.
MB = uncompressed bytes of all six datasets / 1e6. Reads come from the page cache."""
import argparse
import os
import time

import h5py
import numpy as np

SEQ, PRED, BATCH = 128, 20, 4096
NAMES = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
         "next_sentence_labels"]


def make_batch(rng):
    """Same shapes and value ranges as bench_bert_hdf5.cpp's make_batch (other random draws)."""
    tokens = rng.integers(20, SEQ + 1, BATCH)
    cols = np.arange(SEQ)
    live = cols[None, :] < tokens[:, None]
    split = (1 + rng.random(BATCH) * (tokens - 2)).astype(np.int64)
    preds = np.clip(tokens * 15 // 100, 1, PRED)
    k = np.arange(PRED)
    positions = np.sort(rng.integers(1, tokens[:, None], (BATCH, PRED)), axis=1)
    used = k[None, :] < preds[:, None]
    return {
        "input_ids": np.where(live, rng.integers(0, 30522, (BATCH, SEQ)), 0).astype(np.int32),
        "input_mask": live.astype(np.int8),
        "segment_ids": (live & (cols[None, :] > split[:, None])).astype(np.int8),
        "masked_lm_positions": np.where(used, positions, 0).astype(np.int32),
        "masked_lm_ids": np.where(used, rng.integers(0, 30522, (BATCH, PRED)), 0).astype(np.int32),
        "next_sentence_labels": rng.integers(0, 2, BATCH).astype(np.int8),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--random", type=int, default=100_000)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--records-per-chunk", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    n, chunk = a.records, a.records_per_chunk
    path = os.path.join(a.dir, "bench-bert-h5py.hdf5")
    mb = n * (SEQ * (4 + 1 + 1) + PRED * (4 + 4) + 1) / 1e6
    rng = np.random.default_rng(a.seed)
    pool = [make_batch(rng) for _ in range(16)]

    t0, cpu0 = time.perf_counter(), time.process_time()
    with h5py.File(path, "w") as f:
        sets = {}
        for name, arr in pool[0].items():
            shape = (n,) + arr.shape[1:]
            sets[name] = f.create_dataset(name, shape=shape, dtype=arr.dtype, compression="gzip",
                                          compression_opts=4, chunks=(min(chunk, max(n, 1)),) + arr.shape[1:])
        for k, begin in enumerate(range(0, n, BATCH)):
            end = min(n, begin + BATCH)
            for name in NAMES:
                sets[name][begin:end] = pool[k % len(pool)][name][: end - begin]
    fd = os.open(path, os.O_RDONLY)  # ours fsyncs at commit; so does this
    os.fsync(fd)
    os.close(fd)
    write_s = time.perf_counter() - t0
    print(f"RESULT hdf5_write {mb / write_s:.1f} {write_s:.3f}", flush=True)
    print(f"# hdf5_write cpu {time.process_time() - cpu0:.3f} s")

    t0, cpu0 = time.perf_counter(), time.process_time()
    checksum = 0
    with h5py.File(path, "r") as f:
        sets = [f[name] for name in NAMES]
        for begin in range(0, n, 2 * BATCH):
            got = [d[begin:begin + 2 * BATCH] for d in sets]
            checksum += int(got[0][0, 0])
    read_s = time.perf_counter() - t0
    print(f"RESULT hdf5_read_seq {mb / read_s:.1f} {read_s:.3f}", flush=True)
    print(f"# hdf5_read_seq cpu {time.process_time() - cpu0:.3f} s")

    t0, cpu0 = time.perf_counter(), time.process_time()
    with h5py.File(path, "r") as f:
        sets = [f[name] for name in NAMES]
        pick = np.random.default_rng(a.seed + 1).integers(0, max(n, 1), a.random)
        for i in pick.tolist():
            got = [d[i] for d in sets]
            checksum += int(got[0][1])
    random_s = time.perf_counter() - t0
    print(f"RESULT hdf5_read_random {a.random / random_s:.1f} {random_s:.3f}")
    print(f"# hdf5_read_random cpu {time.process_time() - cpu0:.3f} s")
    print(f"# checksum {checksum}")
    if not a.keep:
        os.remove(path)


if __name__ == "__main__":
    main()
