"""scripts/examples/torch_loop.py end to end on the bundled sample (no shared data needed):
tests/data/sample-docs.jsonl → train-tokenizer (WordPiece for BERT, SentencePiece for GPT, as
scripts/demo.sh does) → make-pretraining-shards (BERT HDF5; GPT Megatron .bin/.idx) → the example
trains a tiny BERT (MLM + NSP) and a tiny GPT through the pretrain_loader module on CPU. Checks:
the run exits 0, the loss falls on the repeated data, the loader restored mid-run gives the batch
the old one would have given, and the summary is there. The wall time is printed (a 300 s limit
only catches a hang)."""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
EXAMPLE = os.path.join(SRC, "scripts", "examples", "torch_loop.py")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def train(model, shards, *extra, steps=60, factor=0.8):
    cmd = [sys.executable, EXAMPLE, "--model", model, shards, "--steps", steps, "--threads", 2,
           "--build-dir", cu.build_dir(), *extra]
    start = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        fail(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", r.stdout, re.M)]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    if len(losses) != steps or summary["steps"] != steps:
        fail(f"{model}: {len(losses)} loss lines, expected {steps}\n{r.stdout}")
    if "the next batch is identical" not in r.stdout or summary["resumed_identical"] is not True:
        fail(f"{model}: no identical batch after restoring the loader state\n{r.stdout}")
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    if not last < factor * first:
        fail(f"{model}: the loss did not fall: first 5 steps {first:.3f}, last 5 {last:.3f}\n{r.stdout}")
    print(f"{model}: loss {first:.3f} -> {last:.3f} over {steps} steps in {seconds:.1f} s "
          f"({summary['steps_per_second']} steps/s; loader {summary['loader']})")


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        cu.skip("torch is not installed for this python (Debian: python3-torch)")
    if not os.path.exists(os.path.join(cu.build_dir(), "python")) or \
            not any(f.startswith("pretrain_loader") for f in os.listdir(os.path.join(cu.build_dir(), "python"))):
        cu.skip(f"the pretrain_loader module is not built in {cu.build_dir()}/python")
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp)
        bert, gpt = shards["bert"], shards["gpt"]
        train("bert", bert, "--batch-size", 8)
        # New masks every epoch: the targets move, so the loss falls more slowly.
        train("bert", bert, "--batch-size", 8, "--dynamic-masking", "--resume-at", 20, steps=60, factor=0.9)
        train("gpt", gpt, "--batch-size", 8, "--seq-len", 32)
    print("OK")


if __name__ == "__main__":
    main()
