"""BERT HDF5 shards against h5py: h5py reads what our writer wrote (names, dtypes, shapes, gzip,
every value), and our reader gets from NVIDIA's real files exactly what h5py gets."""
import json
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compat_util import run, shared_data, skip, tempdir, tool  # noqa: E402

NAMES = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
         "next_sentence_labels"]
DTYPES = {"input_ids": "<i4", "input_mask": "|i1", "segment_ids": "|i1", "masked_lm_positions": "<i4",
          "masked_lm_ids": "<i4", "next_sentence_labels": "|i1"}


def expected_shard(n, seq, max_pred):
    """The formula of known_record() in bert_shard_dump.cpp, as padded arrays."""
    out = {"input_ids": np.zeros((n, seq), np.int32), "input_mask": np.zeros((n, seq), np.int8),
           "segment_ids": np.zeros((n, seq), np.int8),
           "masked_lm_positions": np.zeros((n, max_pred), np.int32),
           "masked_lm_ids": np.zeros((n, max_pred), np.int32),
           "next_sentence_labels": np.zeros((n,), np.int8)}
    for i in range(n):
        tokens = 2 + (i * 37) % (seq - 1)
        j = np.arange(tokens)
        out["input_ids"][i, :tokens] = (i * 131 + j * 7 + 1) % 30522
        out["input_mask"][i, :tokens] = 1
        out["segment_ids"][i, :tokens] = j >= tokens // 2
        preds = min(max_pred, i % (max_pred + 1))
        k = np.arange(preds)
        out["masked_lm_positions"][i, :preds] = 1 + (i + 3 * k) % (seq - 1)
        out["masked_lm_ids"][i, :preds] = (i * 17 + k * 5) % 30522
        out["next_sentence_labels"][i] = i % 3 == 0
    return out


def check_our_file_in_h5py(helper, tmp):
    n, seq, max_pred, per_chunk = 1003, 64, 7, 100  # 11 chunks, the last one partial
    path = os.path.join(tmp, "ours.hdf5")
    run(helper, "write", path, n, seq, max_pred, per_chunk)
    expected = expected_shard(n, seq, max_pred)
    with h5py.File(path, "r") as f:
        assert sorted(f.keys()) == sorted(NAMES), list(f.keys())
        for name in NAMES:
            d = f[name]
            assert d.dtype.str == DTYPES[name], (name, d.dtype.str)
            assert d.shape == expected[name].shape, (name, d.shape)
            assert d.compression == "gzip" and d.compression_opts == 4, (name, d.compression)
            assert d.chunks[0] == per_chunk, (name, d.chunks)
            got = d[...]
            bad = np.argwhere(got != expected[name])
            assert bad.size == 0, f"{name}: first mismatch at {bad[0].tolist()}"
        assert dict(f.attrs) == {}
    print(f"h5py reads our shard: {n} records, {per_chunk} per chunk, all values equal")


def check_h5py_file_with_user_block(helper, tmp):
    """Raw chunks are read at the chunk index's addresses, which count from the superblock: a
    512-byte user block moves every one of them. gzip and unfiltered datasets (both raw-chunk
    layouts); the hyperslab path reads the same file through HDF5."""
    path = os.path.join(tmp, "userblock.hdf5")
    n, seq, max_pred = 301, 32, 5
    data = expected_shard(n, seq, max_pred)
    with h5py.File(path, "w", userblock_size=512) as f:
        for i, name in enumerate(NAMES):
            kwargs = dict(compression="gzip") if i % 2 else {}
            f.create_dataset(name, data=data[name], chunks=(64,) + data[name].shape[1:], **kwargs)
    assert check_file_through_our_reader(helper, path)["raw_chunk_path"]


def check_file_through_our_reader(helper, path):
    """Returns what the automatic path reported."""
    with h5py.File(path, "r") as f:
        want = {name: f[name][...] for name in NAMES}
    first = None
    for read_path in ("auto", "hyperslab"):
        got = json.loads(run(helper, "dump", path, read_path).stdout)
        first = first or got
        assert got["size"] == want["input_ids"].shape[0]
        assert got["seq_len"] == want["input_ids"].shape[1]
        assert got["max_predictions"] == want["masked_lm_positions"].shape[1]
        for name in NAMES:
            ours = np.asarray(got[name], dtype=np.int64).reshape(want[name].shape)
            bad = np.argwhere(ours != want[name].astype(np.int64))
            assert bad.size == 0, f"{path} {name} ({read_path}): first mismatch at {bad[0].tolist()}"
        print(f"{os.path.basename(path)} ({read_path}, raw chunks: {got['raw_chunk_path']}): "
              f"{got['size']} records equal h5py's")
    return first


def main():
    helper = tool("bert_shard_dump")
    with tempdir() as tmp:
        check_our_file_in_h5py(helper, tmp)
        check_h5py_file_with_user_block(helper, tmp)
    data = shared_data()
    golden = [os.path.join(data, "golden", f"nvidia-{name}-s128.hdf5") for name in ("bert-sample", "botchan")] if data else []
    golden = [p for p in golden if os.path.exists(p)]
    if not golden:
        skip("shared data with NVIDIA's golden shards not found (set PRETRAIN_SHARED_DATA)")
    for path in golden:
        check_file_through_our_reader(helper, path)


if __name__ == "__main__":
    main()
