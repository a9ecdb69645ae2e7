"""BERT HDF5 shards against h5py: h5py reads what our writer wrote (names, dtypes, shapes, gzip,
every value), a packed shard's ten datasets and its rows' invariants, and our reader gets from
NVIDIA's real files exactly what h5py gets."""
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
            assert d.compression == "gzip" and d.compression_opts == 1, (name, d.compression)  # our default level
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


PACKED_DTYPES = {"position_ids": "<i4", "sequence_ids": "|i1", "next_sentence_positions": "<i4",
                 "packed_next_sentence_labels": "|i1"}


def check_packed_shard_in_h5py(tmp):
    """make-pretraining-shards --pack on a toy corpus: h5py finds NVIDIA's six datasets and the four
    packed ones with their dtypes and shapes, and every row keeps the invariants of bert_hdf5.h."""
    words = ["the", "ship", "light", "tower", "sea", "stone", "bread", "lamp", "island", "storm"]
    vocab = os.path.join(tmp, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."] + words) + "\n")
    rng = np.random.default_rng(5)
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        for _ in range(80):
            for _ in range(rng.integers(1, 6)):
                f.write(" ".join(rng.choice(words, rng.integers(3, 10))) + " .\n")
            f.write("\n")
    seq, max_pred, max_pack = 64, 10, 3
    out = os.path.join(tmp, "packed")
    run(tool("make-pretraining-shards"), "-q", "-i", corpus, "--tokenizer", vocab, "-o", out, "--seq-len", seq,
        "--max-predictions", max_pred, "--dupe-factor", 2, "--pack", "--max-pack", max_pack)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    assert manifest["extra"]["max_pack"] == max_pack, manifest["extra"]
    rows = instances = 0
    for shard in manifest["shards"]:
        with h5py.File(os.path.join(out, shard["file"]), "r") as f:
            assert list(f.keys()) == sorted(NAMES + list(PACKED_DTYPES)), list(f.keys())
            n = f["input_ids"].shape[0]
            shapes = {"input_ids": (n, seq), "input_mask": (n, seq), "segment_ids": (n, seq),
                      "masked_lm_positions": (n, max_pred), "masked_lm_ids": (n, max_pred),
                      "next_sentence_labels": (n,), "position_ids": (n, seq), "sequence_ids": (n, seq),
                      "next_sentence_positions": (n, max_pack), "packed_next_sentence_labels": (n, max_pack)}
            for name, dtype in {**DTYPES, **PACKED_DTYPES}.items():
                assert f[name].dtype.str == dtype and f[name].shape == shapes[name], (name, f[name].dtype, f[name].shape)
                assert f[name].compression == "gzip", name
            d = {name: f[name][...] for name in shapes}
        rows += n
        for i in range(n):
            sid, pos = d["sequence_ids"][i].astype(int), d["position_ids"][i]
            k = int(sid.max())
            used = int((sid > 0).sum())
            assert 1 <= k <= max_pack, (i, k)
            assert (sid[:used] > 0).all() and (sid[used:] == 0).all(), f"row {i}: instances then padding"
            assert (np.diff(sid[:used]) >= 0).all() and set(sid[:used]) == set(range(1, k + 1)), f"row {i}: runs 1..k"
            assert (d["input_mask"][i] == (sid > 0)).all(), f"row {i}: input_mask is the instances' tokens"
            starts = np.searchsorted(sid[:used], np.arange(1, k + 1))
            assert (d["next_sentence_positions"][i][:k] == starts).all() and (d["next_sentence_positions"][i][k:] == 0).all()
            assert (pos[:used] == np.arange(used) - starts[sid[:used] - 1]).all() and (pos[used:] == 0).all(), i
            labels = d["packed_next_sentence_labels"][i]
            assert np.isin(labels[:k], [0, 1]).all() and (labels[k:] == -1).all(), (i, labels)
            assert d["next_sentence_labels"][i] == labels[0], i
            assert d["input_ids"][i][starts].tolist() == [2] * k, f"row {i}: each instance starts with [CLS]"
            mp = d["masked_lm_positions"][i]
            real = mp[mp > 0]
            assert (np.diff(real) > 0).all() and (mp[len(real):] == 0).all(), f"row {i}: ascending, then 0"
            assert (sid[real] > 0).all() and not np.isin(real, starts).any(), f"row {i}: inside instances, not on [CLS]"
            instances += k
    assert rows < instances, (rows, instances)
    print(f"h5py reads our packed shards: {instances} instances in {rows} rows, ten datasets, invariants hold")


def main():
    helper = tool("bert_shard_dump")
    with tempdir() as tmp:
        check_our_file_in_h5py(helper, tmp)
        check_h5py_file_with_user_block(helper, tmp)
        check_packed_shard_in_h5py(tmp)
    data = shared_data()
    golden = [os.path.join(data, "golden", f"nvidia-{name}-s128.hdf5") for name in ("bert-sample", "botchan")] if data else []
    golden = [p for p in golden if os.path.exists(p)]
    if not golden:
        skip("shared data with NVIDIA's golden shards not found (set PRETRAIN_SHARED_DATA)")
    for path in golden:
        check_file_through_our_reader(helper, path)


if __name__ == "__main__":
    main()
