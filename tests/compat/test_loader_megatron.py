"""The loader's GPT samples are Megatron-LM's, sample for sample.

Reference: megatron-core 0.16.1 from PyPI (scripts/requirements-venv-nodeps.txt, in .venv): its
real GPTDataset (`_build_document_sample_shuffle_indices`, `_query_document_sample_shuffle_indices`),
its compiled helpers (build_sample_idx, build_blending_indices) and BlendedDataset. Only the imports
are shimmed: megatron/core/__init__.py and megatron/core/utils.py pull in the training stack
(parallel_state, DDP), which needs torch >= 2.6; the dataset code runs on Debian's torch 1.13.

Our epoch e of a dataset is Megatron's GPTDataset (every sequence, num_samples None = one epoch)
built with random_seed seed + e; a blend is Megatron's BlendedDataset over the sum of the
components' samples, component d's k-th sample of blend epoch e being its sample g = e*c_d + k,
which is sample g % n_d of its epoch g // n_d. Checked on the shared golden Megatron files
(uint16 and int32) and on a random dataset of our writer, seq_len 32 and 128, seeds 1234 and 7,
epochs 0 and 1, alone and blended.
"""
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util as cu  # noqa: E402

cu.require_venv_modules("megatron", "numpy", "torch")


def import_megatron_datasets():
    import logging
    import megatron
    base = os.path.join(list(megatron.__path__)[0], "core")
    if not os.path.isfile(os.path.join(base, "datasets", "gpt_dataset.py")):
        cu.skip("megatron-core is not installed in .venv (scripts/setup_deps.sh)")
    core = types.ModuleType("megatron.core")
    core.__path__ = [base]
    sys.modules["megatron.core"] = core
    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda logger, *args, rank=0, **kwargs: logger.log(*args, **kwargs)
    sys.modules["megatron.core.utils"] = utils
    tokenizers = types.ModuleType("megatron.core.tokenizers")
    tokenizers.MegatronTokenizerBase = object
    sys.modules["megatron.core.tokenizers"] = tokenizers
    logging.getLogger("megatron").setLevel(logging.ERROR)
    from megatron.core.datasets import gpt_dataset, blended_dataset, indexed_dataset, utils as dutils
    return gpt_dataset, blended_dataset, indexed_dataset, dutils


gpt_dataset, blended_dataset, indexed_dataset, dutils = import_megatron_datasets()
import numpy as np  # noqa: E402


class Tokenizer:
    """What GPTDataset asks of a tokenizer: eod, vocab_size, and an identity for its cache key
    (no pad: -1)."""
    eod = 0
    vocab_size = None
    unique_identifiers = {"class": "Tokenizer"}


def config(seq_len, seed, prefixes, cache):
    return gpt_dataset.GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_len, blend=(prefixes, None), split="100,0,0",
        path_to_cache=cache, tokenizer=Tokenizer(), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, add_extra_token_to_sequence=True)


class Megatron:
    """GPTDataset per (prefix, seq_len, seed), built once."""

    def __init__(self, cache):
        self.cache = cache
        self.built = {}
        self.low = {}

    def dataset(self, prefix, seq_len, seed):
        key = (prefix, seq_len, seed)
        if key not in self.built:
            if prefix not in self.low:
                self.low[prefix] = indexed_dataset.IndexedDataset(prefix, multimodal=False, mmap=True)
            low = self.low[prefix]
            indices = np.arange(len(low.sequence_lengths), dtype=np.int32)
            self.built[key] = gpt_dataset.GPTDataset(
                low, prefix, indices, None, dutils.Split.train,
                config(seq_len, seed % 2**32, [prefix], self.cache))
        return self.built[key]

    def sample(self, prefix, seq_len, seed, i):
        text, _ = self.dataset(prefix, seq_len, seed)._query_document_sample_shuffle_indices(i)
        return text


def ours(tmp, seq_len, seed, epochs, weights, prefixes):
    out = os.path.join(tmp, "samples.bin")
    r = cu.run(cu.tool("loader_gpt_dump"), out, seq_len, seed, epochs,
               ",".join(map(repr, weights)) if weights else "-", *prefixes)
    n = int(r.stdout.strip())
    tokens = np.fromfile(out, dtype="<i8")
    assert tokens.size == epochs * n * (seq_len + 1), (tokens.size, epochs, n)
    return tokens.reshape(epochs, n, seq_len + 1)


def check_single(tmp, megatron, prefix, seq_len, seed):
    got = ours(tmp, seq_len, seed, 2, None, [prefix])
    for epoch in range(2):
        ds = megatron.dataset(prefix, seq_len, seed + epoch)
        assert len(ds) == got.shape[1], f"{prefix} seq {seq_len}: Megatron has {len(ds)} samples, we {got.shape[1]}"
        want = np.stack([megatron.sample(prefix, seq_len, seed + epoch, i) for i in range(len(ds))])
        bad = np.nonzero((want != got[epoch]).any(axis=1))[0]
        assert bad.size == 0, (f"{os.path.basename(prefix)} seq_len {seq_len} seed {seed} epoch {epoch}: "
                               f"{bad.size} samples differ, first {bad[0]}:\n{want[bad[0]]}\n{got[epoch][bad[0]]}")
    print(f"ok: {os.path.basename(prefix)} seq_len {seq_len} seed {seed}: {got.shape[1]} samples x 2 epochs")


class Stand_in:
    """A component for BlendedDataset that is as long as the blend. Megatron builds its components
    with ceil(weight * size * 1.005) samples, i.e. several epochs in one index when a component is
    oversampled, and refuses components shorter than their share; ours wrap into their next epoch
    instead (seed + 1, see loader/gpt_source.cpp), so the blend's indices come from BlendedDataset
    and every sample read is compared with a real GPTDataset of the component's epoch."""

    def __init__(self, name, size):
        self.unique_identifiers = {"class": "Stand_in", "name": name}
        self.index_split = dutils.Split.train
        self.size = size

    def __len__(self):
        return self.size


def check_blend(tmp, megatron, prefixes, weights, seq_len, seed):
    got = ours(tmp, seq_len, seed, 2, weights, prefixes)
    sizes = [len(megatron.dataset(p, seq_len, seed)) for p in prefixes]
    total = sum(sizes)
    assert got.shape[1] == total
    # Megatron's builder normalises the weights; BlendedDataset normalises them again.
    blend = blended_dataset.BlendedDataset([Stand_in(p, total) for p in prefixes],
                                           dutils.normalize(weights), total,
                                           config(seq_len, seed, prefixes, None))
    dataset_index = np.asarray(blend.dataset_index)
    sample_index = np.asarray(blend.dataset_sample_index)
    counts = np.bincount(dataset_index, minlength=len(prefixes))
    wrapped = 0
    for epoch in range(2):
        for p in range(total):
            d, k = int(dataset_index[p]), int(sample_index[p])
            g = epoch * int(counts[d]) + k
            wrapped += g >= sizes[d]
            want = megatron.sample(prefixes[d], seq_len, seed + g // sizes[d], g % sizes[d])
            assert (want == got[epoch][p]).all(), \
                f"blend {weights} seq_len {seq_len} seed {seed} epoch {epoch} position {p}: dataset {d} sample {g}"
    print(f"ok: blend {[os.path.basename(p) for p in prefixes]} weights {weights} seq_len {seq_len} seed {seed}: "
          f"{total} samples x 2 epochs, counts {counts.tolist()} of {sizes}, {wrapped} reads past a component epoch")


def main():
    shared = cu.shared_data()
    golden = os.path.join(shared, "golden") if shared else None
    if not golden or not os.path.exists(os.path.join(golden, "megatron-botchan-uint16.idx")):
        cu.skip("shared golden Megatron files not found (PRETRAIN_SHARED_DATA)")
    with cu.tempdir() as tmp:
        cache = os.path.join(tmp, "megatron-cache")
        megatron = Megatron(cache)
        u16 = os.path.join(golden, "megatron-botchan-uint16")
        i32 = os.path.join(golden, "megatron-botchan-int32")
        rnd = os.path.join(tmp, "random")  # empty sequences and documents included
        cu.run(cu.tool("megatron_write_dataset"), "random", rnd, "uint16", 11)
        for seq_len in (32, 128):
            for seed in (1234, 7):
                for prefix in (u16, i32, rnd):
                    check_single(tmp, megatron, prefix, seq_len, seed)
                check_blend(tmp, megatron, [u16, rnd], [0.3, 0.7], seq_len, seed)
        # Three components, one heavily over-weighted: it wraps into later epochs of its own.
        check_blend(tmp, megatron, [i32, rnd, u16], [0.1, 0.6, 0.3], 32, 1234)
        # The seed wraps at 2^32 as Megatron's must stay below it: epoch 1 of seed 2^32-1 is seed 0.
        check_single(tmp, megatron, rnd, 32, 2**32 - 1)


if __name__ == "__main__":
    main()
