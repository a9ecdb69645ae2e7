"""The pretrain_loader Python module against h5py, on BERT shards written here with h5py itself
(NVIDIA's layout, h5py's own chunking and gzip, statically masked as NVIDIA's script masks):

- shuffle=False, world_size 1: the batch rows are the files' records in order, every field; mlm_labels
  is masked_lm_ids scattered to masked_lm_positions. With shuffle: the epoch's rows are the files'
  rows (as a multiset) in another order, and another epoch has another order.
- world_size 2 and 3, drop_last=False: the ranks together give every record exactly once; with
  drop_last=True every rank gets the same number of full batches.
- Zero copy: arrays are views (base is set, not OWNDATA), all of a batch share one owner, torch and
  numpy see the same address, addresses come from a ring of `prefetch` slots, a batch whose arrays
  are alive holds its slot (holding `prefetch` of them raises instead of hanging).
- state()/restore(): a new loader restored from a state gives the same following batches.
- Dynamic masking: mask_id at ≈ 15%·80% of the non-special tokens, labels = the original tokens,
  the same for a seed, different for another seed and another epoch.
- Errors: a missing shard raises naming it, an unknown option raises ValueError naming it, a bad
  state string raises ValueError.
- The defaults Loader's docstring gives in brackets are those a loader takes without the option."""
import ast
import gc
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util as cu  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(cu.build_dir(), "python"))
try:
    import pretrain_loader  # noqa: E402
except ImportError as e:
    cu.skip(f"the pretrain_loader module is not built in {cu.build_dir()}/python: {e}")

CLS, SEP, MASK, VOCAB = 101, 102, 103, 3000
SEQ, MAX_PRED = 64, 20
FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check(ok, message):
    if not ok:
        fail(message)


def write_shard(path, n, rng):
    """n records [CLS] A [SEP] B [SEP] + padding, ~15% of the tokens masked (80/10/10) as NVIDIA's
    create_pretraining_data.py stores them: input_ids hold [MASK]/random/kept, labels the originals."""
    ids = np.zeros((n, SEQ), np.int32)
    seg = np.zeros((n, SEQ), np.int8)
    msk = np.zeros((n, SEQ), np.int8)
    pos = np.zeros((n, MAX_PRED), np.int32)
    lab = np.zeros((n, MAX_PRED), np.int32)
    nsp = rng.integers(0, 2, n).astype(np.int8)
    for i in range(n):
        length = int(rng.integers(SEQ // 2, SEQ + 1))
        a = int(rng.integers(1, length - 3))
        tokens = rng.integers(1000, VOCAB, length)
        tokens[0], tokens[a + 1], tokens[length - 1] = CLS, SEP, SEP
        ids[i, :length] = tokens
        seg[i, a + 2:length] = 1
        msk[i, :length] = 1
        candidates = [p for p in range(length) if tokens[p] not in (CLS, SEP)]
        k = min(MAX_PRED, max(1, round(0.15 * len(candidates))))
        chosen = np.sort(rng.choice(candidates, k, replace=False))
        pos[i, :k] = chosen
        lab[i, :k] = tokens[chosen]
        for p in chosen:
            r = rng.random()
            ids[i, p] = MASK if r < 0.8 else (rng.integers(1000, VOCAB) if r < 0.9 else tokens[p])
    with h5py.File(path, "w") as f:
        for name, data in (("input_ids", ids), ("input_mask", msk), ("segment_ids", seg),
                           ("masked_lm_positions", pos), ("masked_lm_ids", lab), ("next_sentence_labels", nsp)):
            f.create_dataset(name, data=data, dtype=data.dtype, compression="gzip")


def read_shards(paths):
    out = {k: [] for k in FIELDS}
    for p in paths:
        with h5py.File(p, "r") as f:
            for k in FIELDS:
                out[k].append(f[k][...])
    return {k: np.concatenate(v) for k, v in out.items()}


def mlm_labels(ref):
    labels = np.full(ref["input_ids"].shape, -1, np.int64)
    for i in range(len(labels)):
        for p, t in zip(ref["masked_lm_positions"][i], ref["masked_lm_ids"][i]):
            if p > 0:
                labels[i, p] = t
    return labels


def unmasked(ref):
    """The records' original tokens (the stored masks undone)."""
    ids = ref["input_ids"].astype(np.int64)
    for i in range(len(ids)):
        for p, t in zip(ref["masked_lm_positions"][i], ref["masked_lm_ids"][i]):
            if p > 0:
                ids[i, p] = t
    return ids


def epoch(loader):
    """One epoch's batches, copied out (so the ring slots go back)."""
    return [{k: np.array(v) for k, v in b.items()} for b in loader]


def stack(batches):
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def rows(data, fields=FIELDS):
    """Each row as one hashable tuple of all its fields, sorted: a multiset to compare."""
    n = len(data[fields[0]])
    return sorted(tuple(np.concatenate([np.atleast_1d(data[k][i]).astype(np.int64) for k in fields]).tolist())
                  for i in range(n))


def in_order(shards, ref):
    loader = pretrain_loader.Loader(shards, batch_size=32, shuffle=False, drop_last=False, epochs=1)
    check(loader.samples_per_epoch == len(ref["input_ids"]), f"samples_per_epoch {loader.samples_per_epoch}")
    check(loader.batches_per_epoch == len(loader) == -(-len(ref["input_ids"]) // 32),
          f"batches_per_epoch {loader.batches_per_epoch}")
    check(loader.seq_len == SEQ and loader.max_predictions == MAX_PRED, "seq_len / max_predictions")
    batches = epoch(loader)
    check(len(batches) == loader.batches_per_epoch, f"{len(batches)} batches, expected {loader.batches_per_epoch}")
    got = stack(batches)
    for k in FIELDS:
        check(np.array_equal(got[k], ref[k]), f"{k} differs from what h5py reads (shuffle=False)")
    check(np.array_equal(got["mlm_labels"], mlm_labels(ref)), "mlm_labels is not masked_lm_ids at masked_lm_positions")
    check(got["input_ids"].dtype == np.int64, f"input_ids dtype {got['input_ids'].dtype}: the module's default is int64")
    check(sorted(batches[0]) == sorted(FIELDS + ("mlm_labels",)), f"batch keys {sorted(batches[0])}")
    check(list(loader) == [], "iterating after the last epoch yields nothing")
    loader32 = pretrain_loader.Loader(shards, batch_size=32, shuffle=False, id_dtype="int32", epochs=1)
    first = loader32.next_batch()
    check(first["input_ids"].dtype == np.int32, f"id_dtype='int32' gives {first['input_ids'].dtype}")
    check(np.array_equal(first["input_ids"], ref["input_ids"][:32]), "int32 ids differ")
    print(f"in order: {len(ref['input_ids'])} records in {len(batches)} batches equal h5py's, all fields")


def shuffled(shards, ref):
    loader = pretrain_loader.Loader(shards, batch_size=32, shuffle=True, seed=5, drop_last=False, shuffle_window=100)
    e0, e1 = stack(epoch(loader)), stack(epoch(loader))
    check(rows(e0) == rows(ref), "a shuffled epoch is not the files' rows")
    check(rows(e1) == rows(ref), "the second shuffled epoch is not the files' rows")
    check(not np.array_equal(e0["input_ids"], ref["input_ids"]), "shuffle=True gave the files' order")
    check(not np.array_equal(e0["input_ids"], e1["input_ids"]), "two epochs have the same order")
    print("shuffled: every epoch is the files' rows once, in a new order")


def ranks(shards, ref):
    n = len(ref["input_ids"])
    for w in (2, 3):
        parts = []
        for r in range(w):
            loader = pretrain_loader.Loader(shards, batch_size=16, rank=r, world_size=w, seed=9, drop_last=False, epochs=1)
            batches = epoch(loader)
            check(len(batches) == loader.batches_per_epoch,
                  f"rank {r}/{w}: {len(batches)} batches, batches_per_epoch says {loader.batches_per_epoch}")
            parts += batches
        check(rows(stack(parts)) == rows(ref), f"world_size {w}: the ranks do not cover the epoch exactly once")
        sizes = set()
        for r in range(w):
            loader = pretrain_loader.Loader(shards, batch_size=16, rank=r, world_size=w, seed=9, drop_last=True, epochs=1)
            batches = epoch(loader)
            check(all(len(b["input_ids"]) == 16 for b in batches), f"drop_last: rank {r}/{w} got a short batch")
            sizes.add(len(batches))
        check(sizes == {n // (16 * w)}, f"drop_last: ranks of {w} got {sizes} batches, expected {n // (16 * w)}")
        print(f"world_size {w}: every record exactly once over the ranks; drop_last gives {n // (16 * w)} full batches each")


def address(a):
    return a.__array_interface__["data"][0]


def zero_copy(shards):
    import torch
    prefetch = 3
    loader = pretrain_loader.Loader(shards, batch_size=8, prefetch=prefetch, seed=1)
    batch = loader.next_batch()
    ids = batch["input_ids"]
    check(ids.base is not None and not ids.flags["OWNDATA"], "input_ids owns its data: a copy")
    check(ids.flags["C_CONTIGUOUS"], "input_ids is not contiguous")
    owners = {id(a.base) for a in batch.values()}
    check(len(owners) == 1, f"the arrays of one batch have {len(owners)} owners, expected one capsule")
    check(address(batch["input_ids"]) == address(ids) == address(np.asarray(ids)), "the data pointer moves per access")
    t = torch.from_numpy(ids)
    check(t.data_ptr() == address(ids), "torch.from_numpy copied")
    # Every batch comes from one of the ring's slots: few distinct addresses however many batches.
    del batch, ids, t
    seen = set()
    for _ in range(40):
        b = loader.next_batch()
        if b is None:
            continue
        seen.add(address(b["input_ids"]))
        del b
    check(len(seen) <= 2 * prefetch, f"{len(seen)} distinct input_ids addresses over 40 batches: not a ring")
    # A batch whose arrays live holds its slot; one array alone holds it too.
    held = [loader.next_batch() for _ in range(prefetch - 1)]
    held.append(loader.next_batch()["input_ids"])  # the dict dies, the array keeps the slot
    try:
        loader.next_batch()
        fail(f"a {prefetch + 1}th batch came while {prefetch} slots were held")
    except RuntimeError as e:
        print(f"holding every slot: RuntimeError: {e}")
    del held
    gc.collect()
    check(loader.next_batch() is not None, "the slots did not come back when the arrays died")
    # An array may outlive its loader.
    keep = loader.next_batch()["input_ids"]
    before = keep.copy()
    loader.close()
    del loader
    gc.collect()
    check(np.array_equal(keep, before), "an array changed after its loader was closed")
    print(f"zero copy: views of the ring ({len(seen)} addresses over 40 batches, prefetch {prefetch}), torch shares them")


def state_restore(shards):
    opts = dict(batch_size=24, seed=3, shuffle_window=64)
    a = pretrain_loader.Loader(shards, **opts)
    for _ in range(len(a) - 2):  # stop near the end, so the following batches cross into epoch 1
        a.next_batch()
    state = a.state()
    following = []
    while len(following) < 6:
        b = a.next_batch()
        if b is not None:
            following.append({k: np.array(v) for k, v in b.items()})
    b = pretrain_loader.Loader(shards, **opts)
    b.restore(state)
    check(b.state() == state, "state() after restore() differs")
    got = []
    while len(got) < 6:
        x = b.next_batch()
        if x is not None:
            got.append({k: np.array(v) for k, v in x.items()})
    for i, (x, y) in enumerate(zip(got, following)):
        for k in y:
            check(np.array_equal(x[k], y[k]), f"batch {i} after restore: {k} differs")
    s = b.stats()
    check(set(s) >= {"batches", "samples", "seconds", "samples_per_second", "wait_seconds", "wait_ms_per_batch",
                     "read_seconds"}, f"stats keys {sorted(s)}")
    print(f"state/restore: the 6 batches after {state} are identical; stats {s}")


def dynamic_masking(shards, ref):
    originals = unmasked(ref)
    special = [0, CLS, SEP, MASK]
    opts = dict(batch_size=32, shuffle=False, drop_last=False, epochs=2, dynamic_masking=True, mask_probability=0.15,
                max_predictions=MAX_PRED, mask_id=MASK, vocab_size=VOCAB, special_ids=special)
    loader = pretrain_loader.Loader(shards, seed=11, **opts)
    e0, e1 = stack(epoch(loader)), stack(epoch(loader))
    ids, labels = e0["input_ids"], e0["mlm_labels"]
    candidates = ~np.isin(originals, special)
    picked = labels >= 0
    check(not (picked & ~candidates).any(), "a special or padding token was picked")
    check(np.array_equal(labels[picked], originals[picked]), "mlm_labels are not the original tokens")
    check(np.array_equal(ids[~picked], originals[~picked]), "an unpicked token is not the original")
    n = candidates.sum()
    masked = (ids == MASK).sum() / n
    check(0.11 <= masked <= 0.13, f"[MASK] at {masked:.4f} of the non-special tokens, expected ≈ 0.12")
    check(0.14 <= picked.sum() / n <= 0.16, f"{picked.sum() / n:.4f} picked, expected ≈ 0.15")
    kept = (picked & (ids == originals)).sum() / picked.sum()
    check(0.07 <= kept <= 0.13, f"{kept:.4f} of the picked tokens kept, expected ≈ 0.1 (+ random hits)")
    # masked_lm_positions / masked_lm_ids describe the same picks.
    for i in range(0, len(ids), 37):
        p = e0["masked_lm_positions"][i]
        want = np.flatnonzero(picked[i])
        check(np.array_equal(np.sort(p[: len(want)]), want) and (p[len(want):] == 0).all(),
              f"record {i}: masked_lm_positions {p} are not the picked positions {want}")
    again = stack(epoch(pretrain_loader.Loader(shards, seed=11, **opts)))
    check(all(np.array_equal(again[k], e0[k]) for k in e0), "the same seed gave other masks")
    other = stack(epoch(pretrain_loader.Loader(shards, seed=12, **opts)))
    check(not np.array_equal(other["input_ids"], ids), "another seed gave the same masks")
    check(not np.array_equal(e1["input_ids"], ids), "epoch 1 has epoch 0's masks")
    print(f"dynamic masking: [MASK] at {masked:.4f} of {n} non-special tokens, picked {picked.sum() / n:.4f}, "
          f"kept {kept:.3f}; deterministic per seed, new per epoch")


def errors(shards, tmp):
    missing = os.path.join(tmp, "no-such-shard.hdf5")
    try:
        pretrain_loader.Loader([missing])
        fail("a missing shard did not raise")
    except (ValueError, RuntimeError) as e:
        check("no-such-shard.hdf5" in str(e), f"the error does not name the file: {e}")
        print(f"missing shard: {type(e).__name__}: {e}")
    try:
        pretrain_loader.Loader(shards, batch_sise=4)
        fail("an unknown option did not raise")
    except ValueError as e:
        check("batch_sise" in str(e), f"the error does not name the option: {e}")
    try:
        pretrain_loader.Loader(shards, kind="t5")
        fail("kind='t5' did not raise")
    except ValueError:
        pass
    loader = pretrain_loader.Loader(shards)
    try:
        loader.restore("not a state")
        fail("a bad state string did not raise")
    except ValueError as e:
        print(f"bad state: ValueError: {e}")
    other = pretrain_loader.Loader(shards, seed=999).state()
    try:
        loader.restore(other)
        fail("a state from another seed was accepted")
    except (ValueError, RuntimeError) as e:
        print(f"another run's state: {type(e).__name__}: {e}")
    check(loader.next_batch() is not None, "the loader does not work after refused calls")


def documented_defaults(shards):
    config = pretrain_loader.Loader(shards).config
    doc = " ".join(pretrain_loader.Loader.__doc__.split())
    compared = []
    for key, text in re.findall(r"(\w+) \[([^\]]*)\]", doc):  # `name [default]`, `name [0 = what it means]`
        try:
            value = ast.literal_eval(text.split(" = ")[0].split(" | ")[0])
        except (ValueError, SyntaxError):
            continue  # words, not a value: seq_len [BERT: the shards'; ...]
        check(key in config, f"the docstring gives a default for {key}, which is no option")
        check(config[key] == value, f"the docstring says {key} [{text}], a loader takes {config[key]!r}")
        compared.append(key)
    check(len(compared) >= 20, f"only {compared} found in the docstring")
    print(f"docstring: the {len(compared)} defaults in brackets are a loader's")


def main():
    with cu.tempdir() as tmp:
        rng = np.random.default_rng(2024)
        shards = [os.path.join(tmp, f"train-{i:05d}.hdf5") for i in range(2)]
        write_shard(shards[0], 301, rng)
        write_shard(shards[1], 220, rng)
        ref = read_shards(shards)
        in_order(shards, ref)
        shuffled(shards, ref)
        ranks(shards, ref)
        zero_copy(shards)
        state_restore(shards)
        dynamic_masking(shards, ref)
        errors(shards, tmp)
        documented_defaults(shards)
    print("OK")


if __name__ == "__main__":
    main()
