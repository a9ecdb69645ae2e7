"""bert_pretrain on LDDL-binned shards (make-pretraining-shards --bin-size), on the bundled sample:
  * each step trains at its bin's length: metrics.jsonl's tokens are samples × one of the bins'
    lengths, and more than one length occurs;
  * 2 data-parallel ranks (mpirun) with half the batch each give the one-rank run's losses: every
    rank drew the same bin for every step (a rank at another length would hang or differ);
  * a run stopped at step 8 and resumed from its step-6 checkpoint logs steps 7..12 bitwise as the
    uninterrupted run.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

BIN, SEQ = 16, 64
failures = []


def fail(message):
    print(f"FAIL: {message}")
    failures.append(message)


def metrics(log_dir):
    with open(os.path.join(log_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def train(shards, log_dir, *extra, ranks=1, batch=4, rc=0, env=None):
    # Dropout off: its masks depend on the data rank, and the ranks' losses are compared.
    args = [cu.tool("bert_pretrain"), "--data", shards, "--model", "tiny", "--dropout", 0, "--batch-size", batch,
            "--grad-accum", 2,
            "--max-steps", 12, "--lr", "1e-3", "--warmup", 2, "--seed", 7, "--log-dir", log_dir, *extra]
    if ranks > 1:
        args = [shutil.which("mpirun"), "--oversubscribe", "-np", ranks, "--mca", "btl", "self,vader", *args,
                "--threads", 1]
    else:
        args += ["--threads", 2]
    r = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=600,
                       env={**os.environ, **(env or {})})
    if r.returncode != rc:
        print(r.stdout + r.stderr)
        sys.exit(f"bert_pretrain ({ranks} rank(s)) on binned shards: exit {r.returncode}, expected {rc}")
    return metrics(log_dir)


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
    if failures:
        sys.exit(f"{len(failures)} failure(s)")


if __name__ == "__main__":
    main()
