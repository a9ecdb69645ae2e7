"""bert_pretrain on LDDL-binned shards (make-pretraining-shards --bin-size), on the bundled sample:
  * each step trains at its bin's length: metrics.jsonl's tokens are samples × one of the bins'
    lengths, and more than one length occurs;
  * 2 data-parallel ranks (mpirun) with half the batch each give the one-rank run's losses: every
    rank drew the same bin for every step (a rank at another length would hang or differ);
  * a run stopped at step 8 and resumed from its step-6 checkpoint logs steps 7..12 bitwise as the
    uninterrupted run.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402
from mpi_harness import fail  # noqa: E402  (h.finish() reports what it collects)

BIN, SEQ = 16, 64


def train(shards, log_dir, *extra, **options):
    return h.train_bert_tiny(shards, log_dir, *extra, steps=12, **options)


def main():
    docs = cu.test_data("sample-docs.jsonl")
    with cu.tempdir() as tmp:
        vocab = os.path.join(tmp, "wordpiece")
        cu.run(cu.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 1000, "-o", vocab, docs)
        shards = os.path.join(tmp, "binned")
        cu.run(cu.tool("make-pretraining-shards"), "-q", "--model", "bert", "-i", docs, "--tokenizer",
               os.path.join(vocab, "vocab.txt"), "-o", shards, "--seq-len", SEQ, "--max-predictions", 10,
               "--dupe-factor", 10, "--bin-size", BIN)
        bins = cu.read_manifest(shards)["extra"]["bins"]
        print("bins:", {b["max_length"]: b["records"] for b in bins})

        one = train(shards, os.path.join(tmp, "one"))
        lengths = set()
        for m in one:
            length, rest = divmod(m["tokens"], m["samples"])
            if rest or length % BIN or not BIN <= length <= SEQ:
                fail(f"step {m['step']}: {m['tokens']} tokens for {m['samples']} samples is no bin's length")
            lengths.add(length)
        if len(lengths) < 2:
            fail(f"every step at one length {lengths}: the bins were not drawn")
        print(f"one rank: steps at lengths {sorted(lengths)}; loss {one[0]['loss']:.4f} -> {one[-1]['loss']:.4f}")

        if shutil.which("mpirun"):
            two = train(shards, os.path.join(tmp, "two"), ranks=2, batch=2)
            for a, b in zip(one, two):
                if a["tokens"] != b["tokens"] or abs(a["loss"] - b["loss"]) > 1e-5 * abs(a["loss"]):
                    fail(f"step {a['step']}: 2 ranks {b['loss']} ({b['tokens']} tokens), 1 rank {a['loss']} "
                         f"({a['tokens']} tokens)")
            print("2 data-parallel ranks: the one-rank run's lengths and losses")

        # Stopped at step 8 (after the step-6 checkpoint), then resumed: the bins come in the same order.
        ckpt = os.path.join(tmp, "ckpt")
        train(shards, os.path.join(tmp, "stopped"), "--checkpoint-dir", ckpt, "--save-interval", 6, rc=1,
              env={"PRETRAIN_FAULT": "0:8"})
        resumed = train(shards, os.path.join(tmp, "resumed"), "--checkpoint-dir", ckpt, "--save-interval", 6, "--resume")
        if [(m["step"], m["loss"], m["tokens"]) for m in resumed] != [(m["step"], m["loss"], m["tokens"]) for m in one[6:]]:
            fail(f"resumed steps {[(m['step'], m['tokens']) for m in resumed]} differ from the uninterrupted run's "
                 f"{[(m['step'], m['tokens']) for m in one[6:]]}")
        else:
            print("resume: steps 7..12 bitwise the uninterrupted run's, at the same lengths")
    h.finish()


if __name__ == "__main__":
    main()
