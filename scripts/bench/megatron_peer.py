#!/usr/bin/python3
"""The numpy peer of bench_megatron: the same three measurements, done the way Megatron-LM does them.

Write: IndexedDatasetBuilder.add_item writes `numpy.array(tensor.numpy(), dtype).tobytes()` per
sequence to the open .bin and appends the length; end_document appends the sequence count;
finalize runs _IndexWriter (a Python loop for the pointers, then numpy .tobytes()). Read:
_IndexReader's np.frombuffer over an np.memmap of the .idx, np.frombuffer per sequence over an
np.memmap of the .bin (IndexedDataset.__getitem__), summing every token. Random: 10 M
`bin[ptr:ptr+len][0]` lookups. Same document shapes as bench_megatron (1-8 sequences of 20-2000
tokens). Reads come from the page cache. Prints:
  RESULT megatron_write <MB/s> <s>   RESULT megatron_read_seq <MB/s> <s>   RESULT megatron_random_spans <spans/s> <s>
"""
import argparse
import os
import struct
import sys
import time

import numpy as np

_INDEX_HEADER = b"MMIDIDX\x00\x00"


def write_dataset(prefix, tokens, seed):
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 50257, size=1 << 24, dtype=np.int64)  # token ids as a tokenizer gives them
    # Shapes drawn in advance in bulk, so the timed loop is Megatron's, not the generator's.
    lengths_pool = rng.integers(20, 2001, size=tokens // 20 + 2)
    per_doc = rng.integers(1, 9, size=tokens // 20 + 2)
    starts = rng.integers(0, len(pool) - 2000, size=tokens // 20 + 2)
    t0 = time.perf_counter()
    sequence_lengths, document_indices = [], [0]
    written, s, d = 0, 0, 0
    with open(prefix + ".bin", "wb") as data_file:
        while written < tokens:
            for _ in range(per_doc[d]):
                if written >= tokens:
                    break
                n = min(int(lengths_pool[s]), tokens - written)
                item = pool[starts[s]:starts[s] + n]  # what tensor.numpy() would give
                np_array = np.array(item, dtype=np.uint16)  # IndexedDatasetBuilder.add_item
                data_file.write(np_array.tobytes(order="C"))
                sequence_lengths.append(np_array.size)
                written += n
                s += 1
            document_indices.append(len(sequence_lengths))  # end_document
            d += 1
    # _IndexWriter.write
    with open(prefix + ".idx", "wb") as idx:
        idx.write(_INDEX_HEADER)
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", 8))
        pointers, curr = [], 0
        for length in sequence_lengths:  # _IndexWriter._sequence_pointers
            pointers.append(curr)
            curr += length * 2
        idx.write(struct.pack("<Q", len(sequence_lengths)))
        idx.write(struct.pack("<Q", len(document_indices)))
        idx.write(np.array(sequence_lengths, dtype=np.int32).tobytes(order="C"))
        idx.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        idx.write(np.array(document_indices, dtype=np.int64).tobytes(order="C"))
    return time.perf_counter() - t0


def open_index(prefix):
    with open(prefix + ".idx", "rb") as stream:
        assert stream.read(9) == _INDEX_HEADER
        struct.unpack("<Q", stream.read(8))
        struct.unpack("<B", stream.read(1))
        count = struct.unpack("<Q", stream.read(8))[0]
        doc_count = struct.unpack("<Q", stream.read(8))[0]
        offset = stream.tell()
    buf = memoryview(np.memmap(prefix + ".idx", mode="r", order="C"))
    lengths = np.frombuffer(buf, dtype=np.int32, count=count, offset=offset)
    pointers = np.frombuffer(buf, dtype=np.int64, count=count, offset=offset + lengths.nbytes)
    docs = np.frombuffer(buf, dtype=np.int64, count=doc_count, offset=offset + lengths.nbytes + pointers.nbytes)
    return lengths, pointers, docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=500_000_000)
    ap.add_argument("--spans", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    prefix = os.path.join(args.dir, "bench-megatron-peer")
    mb = args.tokens * 2 / 1e6

    write_s = write_dataset(prefix, args.tokens, args.seed)
    print(f"RESULT megatron_write {mb / write_s:.1f} {write_s:.3f}", flush=True)

    t0 = time.perf_counter()
    lengths, pointers, docs = open_index(prefix)
    bin_buffer = memoryview(np.memmap(prefix + ".bin", mode="r", order="C"))
    total = 0
    for i in range(len(lengths)):  # IndexedDataset.__getitem__(i), then use the tokens
        seq = np.frombuffer(bin_buffer, dtype=np.uint16, count=int(lengths[i]), offset=int(pointers[i]))
        total += int(seq.sum(dtype=np.uint64))
    read_s = time.perf_counter() - t0
    print(f"RESULT megatron_read_seq {mb / read_s:.1f} {read_s:.3f}", flush=True)
    print(f"  {len(lengths)} sequences, {len(docs) - 1} documents; token sum {total}", file=sys.stderr)

    # A plain ndarray over the map (slicing an np.memmap object itself is ~20x slower).
    tokens_u16 = np.frombuffer(bin_buffer, dtype=np.uint16)
    picks = np.random.default_rng(args.seed).integers(0, len(lengths), size=args.spans)
    starts = (pointers // 2).tolist()
    ends = (pointers // 2 + lengths).tolist()
    first = 0
    t0 = time.perf_counter()
    for i in picks.tolist():
        first += int(tokens_u16[starts[i]:ends[i]][0])
    random_s = time.perf_counter() - t0
    print(f"RESULT megatron_random_spans {args.spans / random_s:.0f} {random_s:.3f}", flush=True)
    print(f"  first-token sum {first} (reads are from the page cache)", file=sys.stderr)

    if not args.keep:
        os.remove(prefix + ".bin")
        os.remove(prefix + ".idx")


if __name__ == "__main__":
    main()
