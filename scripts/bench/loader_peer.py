#!/usr/bin/python3
"""The PyTorch and numpy peers of bench_loader: the same batches from the same files, the way the
reference trainers get them.

bert_torch: NVIDIA DeepLearningExamples' BERT run_pretraining.py. The shard files are shuffled
  (random.Random(seed + epoch)); each file becomes a `pretraining_dataset` (h5py reads every dataset
  whole into numpy; __getitem__ makes int64 tensors and the dense masked_lm_labels, -1 off the masked
  positions) in a DataLoader(RandomSampler, batch_size, num_workers); the next file's dataset is made
  on a one-thread pool while the current one is consumed, as run_pretraining.py does.
gpt_torch: Megatron-LM's GPTDataset in outline: the .idx read by numpy, the .bin as a memmap, a
  shuffled document order, a sample index (document, offset) per seq_len tokens and a shuffle index;
  __getitem__ joins the seq_len + 1 tokens of a sample across documents and returns int64 tokens and
  labels (no attention mask, loss mask or position ids: less work than Megatron does). Sequential
  sampler over the shuffled index, as MegatronPretrainingSampler.
bert_numpy / gpt_numpy: no DataLoader, one process: random rows of the h5py-loaded arrays (fancy
  indexing, labels built with numpy), or random windows of the .bin memmap, batch by batch.

Throughput is timed from opening the data to the last batch. --paced-batches N adds a run (the
*_torch cases) where the consumer sleeps --step-ms after each batch; the first batch is left out.
Prints RESULT lines as bench_loader does:
  RESULT <case> <workers> <samples/s> <seconds> <samples>
  RESULT <case>_paced <workers> <wait ms/batch> <share of batches that waited> <batches> <first batch ms>
"""
import argparse
import concurrent.futures
import glob
import os
import random
import struct
import sys
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

BERT_KEYS = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
             "next_sentence_labels"]


class PretrainingDataset(Dataset):
    """NVIDIA's pretraining_dataset (run_pretraining.py), unchanged in what it computes."""

    def __init__(self, input_file, max_pred_length):
        self.max_pred_length = max_pred_length
        with h5py.File(input_file, "r") as f:
            self.inputs = [np.asarray(f[key][:]) for key in BERT_KEYS]

    def __len__(self):
        return len(self.inputs[0])

    def __getitem__(self, index):
        [input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels] = [
            torch.from_numpy(input[index].astype(np.int64)) if indice < 5
            else torch.from_numpy(np.asarray(input[index].astype(np.int64)))
            for indice, input in enumerate(self.inputs)]
        masked_lm_labels = torch.ones(input_ids.shape, dtype=torch.long) * -1
        index = self.max_pred_length
        padded_mask_indices = (masked_lm_positions == 0).nonzero()
        if len(padded_mask_indices) != 0:
            index = padded_mask_indices[0].item()
        masked_lm_labels[masked_lm_positions[:index]] = masked_lm_ids[:index]
        return [input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels]


def bert_files(source, seed, epoch=0):
    files = sorted(glob.glob(os.path.join(source, "*.hdf5"))) if os.path.isdir(source) else [source]
    if not files:
        sys.exit(f"loader_peer.py: no .hdf5 files in {source}")
    random.Random(seed + epoch).shuffle(files)
    return files


def max_predictions(path):
    with h5py.File(path, "r") as f:
        return f["masked_lm_positions"].shape[1]


def bert_torch_batches(args):
    """run_pretraining.py's loop over files, one DataLoader per file; epochs repeat."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    epoch = 0
    files = bert_files(args.source, args.seed, epoch)
    max_pred = max_predictions(files[0])

    def make_loader(path):
        data = PretrainingDataset(path, max_pred)
        return DataLoader(data, sampler=RandomSampler(data), batch_size=args.batch, num_workers=args.workers,
                          pin_memory=False)  # pin_memory: no GPU here (ours runs on the CPU too)

    i = 0
    future = pool.submit(make_loader, files[0])
    while True:
        loader = future.result()
        i += 1
        if i == len(files):
            epoch, i = epoch + 1, 0
            files = bert_files(args.source, args.seed, epoch)
        future = pool.submit(make_loader, files[i])
        for batch in loader:
            yield batch


def read_index(prefix):
    """Megatron's _IndexReader: header, then sequence lengths, byte pointers, document indices."""
    with open(prefix + ".idx", "rb") as f:
        if f.read(9) != b"MMIDIDX\x00\x00":
            sys.exit(f"loader_peer.py: {prefix}.idx is not a Megatron index")
        struct.unpack("<Q", f.read(8))
        code = struct.unpack("<B", f.read(1))[0]
        count, doc_count = struct.unpack("<QQ", f.read(16))
        offset = f.tell()
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
             8: np.uint16}[code]
    buf = np.memmap(prefix + ".idx", mode="r")
    lengths = np.frombuffer(buf, dtype=np.int32, count=count, offset=offset)
    pointers = np.frombuffer(buf, dtype=np.int64, count=count, offset=offset + lengths.nbytes)
    return dtype, lengths, pointers


def gpt_prefix(source):
    return source[:-4] if source.endswith((".bin", ".idx")) else source


class GptDataset(Dataset):
    """Megatron's GPTDataset for one epoch: document, sample and shuffle indices built with numpy."""

    def __init__(self, prefix, seq_len, seed):
        dtype, lengths, pointers = read_index(prefix)
        self.bin = np.memmap(prefix + ".bin", dtype=dtype, mode="r")
        self.starts = pointers // np.dtype(dtype).itemsize
        self.lengths = lengths.astype(np.int64)
        rng = np.random.RandomState(seed)
        self.doc_order = rng.permutation(len(lengths))
        cum = np.concatenate([[0], np.cumsum(self.lengths[self.doc_order])])
        self.num_samples = (int(cum[-1]) - 1) // seq_len  # add_extra_token: seq_len + 1 per sample
        begins = np.arange(self.num_samples + 1, dtype=np.int64) * seq_len
        self.sample_doc = np.searchsorted(cum, begins, side="right") - 1
        self.sample_offset = begins - cum[self.sample_doc]
        self.shuffle = rng.permutation(self.num_samples)

    def __len__(self):
        return self.num_samples

    def __getitem__(self, idx):
        i = self.shuffle[idx]
        d0, o0 = self.sample_doc[i], self.sample_offset[i]
        d1, o1 = self.sample_doc[i + 1], self.sample_offset[i + 1]
        if d0 == d1:
            s = self.starts[self.doc_order[d0]]
            sample = self.bin[s + o0:s + o1 + 1]
        else:
            parts = [self.bin[self.starts[self.doc_order[d0]] + o0:
                              self.starts[self.doc_order[d0]] + self.lengths[self.doc_order[d0]]]]
            for d in range(d0 + 1, d1):
                s = self.starts[self.doc_order[d]]
                parts.append(self.bin[s:s + self.lengths[self.doc_order[d]]])
            s = self.starts[self.doc_order[d1]]
            parts.append(self.bin[s:s + o1 + 1])
            sample = np.concatenate(parts)
        sample = np.array(sample, dtype=np.int64)
        return {"tokens": torch.from_numpy(sample[:-1]), "labels": torch.from_numpy(sample[1:])}


def gpt_torch_batches(args):
    data = GptDataset(gpt_prefix(args.source), args.seq_len, args.seed)
    while True:
        for batch in DataLoader(data, sampler=SequentialSampler(data), batch_size=args.batch,
                                num_workers=args.workers, pin_memory=False):
            yield batch


def bert_numpy_batches(args):
    """Random rows of each file's arrays, collated with numpy in the main process."""
    epoch = 0
    rng = np.random.default_rng(args.seed)
    while True:
        for path in bert_files(args.source, args.seed, epoch):
            with h5py.File(path, "r") as f:
                a = {key: np.asarray(f[key][:]) for key in BERT_KEYS}
            order = rng.permutation(len(a["input_ids"]))
            for b in range(0, len(order), args.batch):
                rows = order[b:b + args.batch]
                ids = a["input_ids"][rows].astype(np.int64)
                pos = a["masked_lm_positions"][rows].astype(np.int64)
                # NVIDIA's rule: the predictions end at the first 0 position.
                live = np.cumprod(pos != 0, axis=1).astype(bool)
                labels = np.full(ids.shape, -1, dtype=np.int64)
                r = np.nonzero(live)
                labels[r[0], pos[r]] = a["masked_lm_ids"][rows][r]
                yield [ids, a["segment_ids"][rows].astype(np.int64), a["input_mask"][rows].astype(np.int64),
                       labels, a["next_sentence_labels"][rows].astype(np.int64)]
        epoch += 1


def gpt_numpy_batches(args):
    """Windows of seq_len + 1 tokens at shuffled sample offsets of the .bin, in file order."""
    prefix = gpt_prefix(args.source)
    dtype, lengths, _ = read_index(prefix)
    tokens = np.frombuffer(np.memmap(prefix + ".bin", dtype=np.uint8, mode="r"), dtype=dtype)
    num_samples = (int(lengths.sum(dtype=np.int64)) - 1) // args.seq_len
    rng = np.random.default_rng(args.seed)
    span = np.arange(args.seq_len + 1)
    while True:
        order = rng.permutation(num_samples) * args.seq_len
        for b in range(0, num_samples, args.batch):
            w = tokens[order[b:b + args.batch, None] + span].astype(np.int64)
            yield {"tokens": w[:, :-1], "labels": w[:, 1:]}


CASES = {"bert_torch": bert_torch_batches, "gpt_torch": gpt_torch_batches,
         "bert_numpy": bert_numpy_batches, "gpt_numpy": gpt_numpy_batches}


def rows(batch):
    return len(batch[0]) if isinstance(batch, list) else len(batch["tokens"])


def samples_per_epoch(args):
    if args.case.startswith("bert"):
        total = 0
        for path in bert_files(args.source, args.seed):
            with h5py.File(path, "r") as f:
                total += f["input_ids"].shape[0]
        return total
    _, lengths, _ = read_index(gpt_prefix(args.source))
    return (int(lengths.sum(dtype=np.int64)) - 1) // args.seq_len


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=sorted(CASES), required=True)
    ap.add_argument("--source", required=True, help="BERT: directory of .hdf5 shards or a file; GPT: .bin/.idx prefix")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=1024, help="GPT tokens per sample")
    ap.add_argument("--workers", type=int, default=1, help="DataLoader num_workers (torch cases)")
    ap.add_argument("--samples", type=int, default=0, help="samples to take (0: one epoch)")
    ap.add_argument("--step-ms", type=float, default=5)
    ap.add_argument("--paced-batches", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    workers = args.workers if args.case.endswith("torch") else 0

    want = args.samples or samples_per_epoch(args)
    t0 = time.perf_counter()
    got = 0
    batches = CASES[args.case](args)
    for batch in batches:
        got += rows(batch)
        if got >= want:
            break
    secs = time.perf_counter() - t0
    batches.close()
    print(f"RESULT {args.case} {workers} {got / secs:.1f} {secs:.3f} {got}", flush=True)

    if args.paced_batches > 1:
        step = args.step_ms / 1e3
        t0 = time.perf_counter()
        batches = CASES[args.case](args)
        next(batches)
        first_ms = (time.perf_counter() - t0) * 1e3
        time.sleep(step)
        wait, waited = 0.0, 0
        for _ in range(args.paced_batches - 1):
            w0 = time.perf_counter()
            next(batches)
            w = time.perf_counter() - w0
            wait += w
            waited += w > 1e-4
            time.sleep(step)
        batches.close()
        n = args.paced_batches - 1
        print(f"RESULT {args.case}_paced {workers} {wait * 1e3 / n:.4f} {waited / n:.4f} {args.paced_batches} "
              f"{first_ms:.1f}", flush=True)


if __name__ == "__main__":
    main()
