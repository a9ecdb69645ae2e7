"""bert_pretrain on packed shards (make-pretraining-shards --pack), on the bundled sample:
  * the packed output holds the plain output's instances, in fewer rows: a step computes rows × seq
    tokens (metrics' tokens) and counts its instances as samples (more samples than rows);
  * training from them lowers the held-out loss on the plain (unpacked) shards, evaluated beside it;
  * 2 data-parallel ranks with half the batch each give the one-rank run's losses (the NSP mean
    divides by the instances of the whole step, over the ranks);
  * tensor parallel 2 and pipeline parallel 2 give the one-rank run's losses (the block-diagonal
    mask, the position ids and the per-instance [CLS] rows reach every rank and stage).
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402
from mpi_harness import fail  # noqa: E402  (h.finish() reports what it collects)

SEQ, PACK, STEPS = 128, 3, 10


def train(shards, log_dir, *extra, **options):
    return h.train_bert_tiny(shards, log_dir, *extra, steps=STEPS, **options)


def same_losses(name, want, got, tolerance):
    steps = [m for m in want if not m.get("eval")]
    other = [m for m in got if not m.get("eval")]
    if len(steps) != len(other):
        fail(f"{name}: {len(other)} steps, the one-rank run {len(steps)}")
    for a, b in zip(steps, other):
        if a["samples"] != b["samples"] or abs(a["loss"] - b["loss"]) > tolerance * abs(a["loss"]):
            fail(f"{name}, step {a['step']}: loss {b['loss']} ({b['samples']} samples), one rank {a['loss']} "
                 f"({a['samples']} samples)")
            return
    print(f"{name}: the one-rank run's losses and instance counts")


def main():
    docs = cu.test_data("sample-docs.jsonl")
    with cu.tempdir() as tmp:
        vocab = os.path.join(tmp, "wordpiece")
        cu.run(cu.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 1000, "-o", vocab, docs)
        outputs = {}
        for kind, extra in (("plain", []), ("packed", ["--pack", "--max-pack", PACK])):
            outputs[kind] = os.path.join(tmp, kind)
            cu.run(cu.tool("make-pretraining-shards"), "-q", "--model", "bert", "-i", docs, "--tokenizer",
                   os.path.join(vocab, "vocab.txt"), "-o", outputs[kind], "--seq-len", SEQ, "--max-predictions", 20,
                   "--dupe-factor", 10, "--short-seq-prob", 0.5, *extra)
        plain, packed = (cu.read_manifest(outputs[k]) for k in ("plain", "packed"))
        rows = sum(s["records"] for s in packed["shards"])
        instances = sum(s["records"] for s in plain["shards"])
        print(f"{instances} instances in {rows} packed rows of {SEQ} tokens (max_pack {packed['extra']['max_pack']})")
        if not rows < instances:
            fail(f"packing {instances} instances left {rows} rows")

        one = train(outputs["packed"], os.path.join(tmp, "one"), "--eval-data", outputs["plain"],
                    "--eval-interval", 5, "--eval-iters", 2)
        steps = [m for m in one if not m.get("eval")]
        evals = [m for m in one if m.get("eval")]
        for m in steps:
            if m["tokens"] != 2 * 4 * SEQ:
                fail(f"step {m['step']}: {m['tokens']} tokens, expected 2 micro-batches × 4 rows × {SEQ}")
            if not 2 * 4 < m["samples"] <= 2 * 4 * PACK:
                fail(f"step {m['step']}: {m['samples']} instances in 8 packed rows of at most {PACK}")
        if len(evals) != 2 or not evals[1]["eval_loss"] < evals[0]["eval_loss"]:
            fail(f"held-out loss on the plain shards {[e['eval_loss'] for e in evals]}: training on packed rows "
                 "learned nothing")
        print(f"one rank: loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}, "
              f"{sum(m['samples'] for m in steps)} instances in {len(steps) * 8} rows; "
              f"eval loss {[round(e['eval_loss'], 4) for e in evals]}")

        if shutil.which("mpirun"):
            base = train(outputs["packed"], os.path.join(tmp, "base"))
            same_losses("2 data-parallel ranks", base, train(outputs["packed"], os.path.join(tmp, "dp"), ranks=2,
                                                             batch=2), 1e-5)
            same_losses("tensor parallel 2", base, train(outputs["packed"], os.path.join(tmp, "tp"), "--tensor-parallel",
                                                         2, ranks=2), 1e-4)
            same_losses("pipeline parallel 2", base, train(outputs["packed"], os.path.join(tmp, "pp"),
                                                           "--pipeline-parallel", 2, ranks=2), 1e-5)
    h.finish()


if __name__ == "__main__":
    main()
