"""Megatron indexed datasets written by our MegatronWriter, read the way Megatron-LM reads them.

`MegatronIndex` follows megatron/core/datasets/indexed_dataset.py (_IndexReader and
_MMapBinReader) step for step: struct-unpacked header, np.frombuffer over an np.memmap of the
.idx at the offsets Megatron computes, np.frombuffer over an np.memmap of the .bin. It reads
(1) random datasets our writer made, checked against the content the helper wrote beside them;
(2) the golden files Megatron-LM itself wrote, checked against their JSON — which validates this
reader against Megatron's own output; (3) our writer fed the golden recipe, byte for byte against
the golden files. Also reads the llm.c shard our converter made from (1) like llm.c does.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compat_util import run, shared_data, skip, tempdir, tool  # noqa: E402

_INDEX_HEADER = b"MMIDIDX\x00\x00"
# Megatron's DType codes.
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
          8: np.uint16}


class MegatronIndex:
    """Megatron's _IndexReader + _MMapBinReader, without torch and without the multimodal modes."""

    def __init__(self, prefix):
        idx_path, bin_path = prefix + ".idx", prefix + ".bin"
        with open(idx_path, "rb") as stream:
            header = stream.read(9)
            assert header == _INDEX_HEADER, f"bad header in {idx_path}"
            version = struct.unpack("<Q", stream.read(8))[0]
            assert version == 1, f"bad version {version}"
            code = struct.unpack("<B", stream.read(1))[0]
            self.dtype = DTYPES[code]
            self.dtype_size = np.dtype(self.dtype).itemsize
            self.sequence_count = struct.unpack("<Q", stream.read(8))[0]
            self.document_count = struct.unpack("<Q", stream.read(8))[0]
            offset = stream.tell()
        self._idx_mmap = np.memmap(idx_path, mode="r", order="C")
        buf = memoryview(self._idx_mmap)
        self.sequence_lengths = np.frombuffer(buf, dtype=np.int32, count=self.sequence_count, offset=offset)
        self.sequence_pointers = np.frombuffer(buf, dtype=np.int64, count=self.sequence_count,
                                               offset=offset + self.sequence_lengths.nbytes)
        self.document_indices = np.frombuffer(buf, dtype=np.int64, count=self.document_count,
                                              offset=offset + self.sequence_lengths.nbytes
                                              + self.sequence_pointers.nbytes)
        # np.memmap refuses empty files, and so does Megatron's reader: an empty .bin has no view.
        self._bin = None
        if os.path.getsize(bin_path):
            self._bin_mmap = np.memmap(bin_path, mode="r", order="C")
            self._bin = memoryview(self._bin_mmap)

    def __len__(self):
        return self.sequence_count

    def __getitem__(self, i):  # IndexedDataset.__getitem__ for an int
        pointer, length = self.sequence_pointers[i], self.sequence_lengths[i]
        if length == 0:
            return np.zeros(0, dtype=self.dtype)
        return np.frombuffer(self._bin, dtype=self.dtype, count=int(length), offset=int(pointer))

    def get(self, i, offset=0, length=None):  # IndexedDataset.get
        pointer, size = self.sequence_pointers[i], self.sequence_lengths[i]
        if length is None:
            length = size - offset
        pointer += offset * self.dtype_size
        return np.frombuffer(self._bin, dtype=self.dtype, count=int(length), offset=int(pointer))


def check_equal(ds, sequences, document_indices, what):
    assert len(ds) == len(sequences), f"{what}: {len(ds)} sequences, expected {len(sequences)}"
    assert ds.document_indices.tolist() == document_indices, f"{what}: document_indices differ"
    assert ds.sequence_lengths.tolist() == [len(s) for s in sequences], f"{what}: lengths differ"
    pointer = 0
    for i, want in enumerate(sequences):
        assert ds.sequence_pointers[i] == pointer, f"{what}: pointer {i}"
        pointer += len(want) * ds.dtype_size
        got = ds[i]
        assert got.dtype == ds.dtype and got.tolist() == want, f"{what}: sequence {i} differs"


def read_llmc(path):
    """llm.c's dataloader: 256 int32 header (magic, version, count), then uint16 tokens."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520 and header[1] == 1, f"bad llm.c header in {path}"
    tokens = np.fromfile(path, dtype=np.uint16, offset=256 * 4)
    assert len(tokens) == header[2], f"{path}: {len(tokens)} tokens, header says {header[2]}"
    return tokens


def check_ours(tmp):
    for dtype, seed in (("uint16", 11), ("int32", 12)):
        prefix = os.path.join(tmp, f"ours-{dtype}")
        run(tool("megatron_write_dataset"), "random", prefix, dtype, seed)
        with open(prefix + ".json") as f:
            expected = json.load(f)
        ds = MegatronIndex(prefix)
        assert ds.dtype == {"uint16": np.uint16, "int32": np.int32}[dtype]
        check_equal(ds, expected["sequences"], expected["document_indices"], f"ours {dtype}")
        print(f"ours {dtype}: {len(ds)} sequences, {ds.document_count - 1} documents read back OK")
        if dtype == "uint16":  # llm.c: one EOT in front of every document
            want, di = [], expected["document_indices"]
            for d in range(len(di) - 1):
                want.append(50256)
                for s in expected["sequences"][di[d]:di[d + 1]]:
                    want.extend(s)
            assert read_llmc(prefix + ".llmc.bin").tolist() == want, "llm.c conversion differs"
            print("ours uint16 -> llm.c shard read back OK")


def check_golden(tmp, golden):
    with open(os.path.join(golden, "megatron-botchan.json")) as f:
        meta = json.load(f)
    for dtype in ("uint16", "int32"):
        prefix = os.path.join(golden, f"megatron-botchan-{dtype}")
        ds = MegatronIndex(prefix)
        assert ds.dtype == {"uint16": np.uint16, "int32": np.int32}[dtype]
        check_equal(ds, meta["sequences"], meta["document_indices"], f"golden {dtype}")
        assert ds.sequence_pointers.tolist() == meta["sequence_pointers"][dtype]
        for i in (0, 7, 4287):
            assert ds.get(i, offset=1, length=3).tolist() == meta["sequences"][i][1:4]
        ours = os.path.join(tmp, f"golden-recipe-{dtype}")
        run(tool("megatron_write_dataset"), "json", os.path.join(golden, "megatron-botchan.json"), ours, dtype)
        for ext in (".bin", ".idx"):
            with open(ours + ext, "rb") as a, open(prefix + ext, "rb") as b:
                assert a.read() == b.read(), f"our {dtype}{ext} differs from Megatron's"
        print(f"golden {dtype}: Megatron's files read OK; our writer's files are byte-identical")


def main():
    with tempdir() as tmp:
        check_ours(tmp)
        data = shared_data()
        golden = os.path.join(data, "golden") if data else None
        if not golden or not os.path.exists(os.path.join(golden, "megatron-botchan.json")):
            skip("shared data (golden/megatron-botchan.*) not found; our own datasets passed")
        check_golden(tmp, golden)
    print("OK")


if __name__ == "__main__":
    main()
