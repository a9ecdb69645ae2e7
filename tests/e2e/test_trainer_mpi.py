"""Data parallel training under mpirun on this machine's CPU (ranks oversubscribed on 2 cores).
On shards made from the bundled sample, BERT tiny and GPT tiny, dropout off:
  * 50 steps with 1 rank × global batch 8, 2 ranks × 4 and 4 ranks × 2: the same losses (relative
    1e-5) and the same final weights (1e-4 of each tensor's largest magnitude), all but the
    attention key bias, whose exact gradient is 0 (see without_key_bias);
  * gradients reduced in 0.05 MB buckets while the backward pass runs give bitwise the losses of
    one all-reduce after it;
  * gradient accumulation: 4 micro-batches of 2 equal one batch of 8 (inside one epoch: with
    another batch size the loader's epoch tail is another);
  * --zero 1 (ZeRO-1) against --zero 0 at 2 ranks: the same losses, less device memory;
  * resume at 2 ranks under ZeRO-1: from the step-10 checkpoint of a 2-rank run, steps 11..20 are
    bitwise its own;
  * a rank that fails alone (PRETRAIN_FAULT=1:3, an error only it sees) names itself and ends the job;
  * a rank killed with SIGKILL: mpirun ends every rank within 30 s, naming the rank.
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402
from mpi_harness import fail  # noqa: E402  (h.finish() reports what it collects)

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
SAMPLE = os.path.join(SRC, "tests", "data", "sample-docs.jsonl")


def train(kind, shards, tmp, name, np, batch, steps, *extra, lr="2e-3"):
    tool = cu.tool("bert_pretrain" if kind == "bert" else "gpt_pretrain")
    args = [tool, "--data", shards, "--model", "tiny", "--dropout", 0, "--batch-size", batch, "--max-steps", steps,
            "--lr", lr, "--warmup", 5, "--threads", 1, "--seed", 3, "--log-interval", 1000,
            "--log-dir", os.path.join(tmp, name), *extra]
    if kind == "gpt":
        args += ["--seq-len", 32]
    r = h.run(h.mpirun(np, *args))
    # mpirun binds each rank to a core: the loader's oneTBB arena must not ask for workers there are
    # none of (oneTBB then prints a warning per rank, as it did).
    if "TBB Warning" in r.stdout + r.stderr:
        fail(f"{name}: oneTBB warned:\n{(r.stdout + r.stderr)[-500:]}")
    return h.metrics(os.path.join(tmp, name))


def repeated_docs(tmp, times):
    """The sample's documents `times` over (new ids), so an epoch holds more than 10 steps of 8."""
    docs = os.path.join(tmp, "docs.jsonl")
    with open(SAMPLE) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    with open(docs, "w") as f:
        for k in range(times):
            for d in lines:
                f.write(json.dumps(dict(d, id=f"{d['id']}-{k}")) + "\n")
    return docs


def close_losses(what, got, want, tol=1e-5):
    if len(got) != len(want):
        return fail(f"{what}: {len(got)} steps, expected {len(want)}")
    diffs = [abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(got, want)]
    worst = max(diffs)
    if worst > tol:
        fail(f"{what}: losses differ by {worst:.2e} (relative): {[f'{d:.1e}' for d in diffs]}")
    else:
        print(f"{what}: {len(got)} losses within {worst:.1e}")


def without_key_bias(name, w):
    """The attention key bias has a gradient that is 0 in exact arithmetic (softmax ignores a
    constant added to a row of scores): what the optimizer does with its rounding noise is noise,
    in PyTorch as here. Leave it out of the comparison."""
    if name.endswith("key.bias"):
        return w[:0]
    if name.endswith("c_attn.bias"):
        c = w.shape[0] // 3
        return w[list(range(c)) + list(range(2 * c, 3 * c))]
    return w


def close_weights(what, a, b, tol=1e-4):
    from safetensors.numpy import load_file
    wa, wb = load_file(a), load_file(b)
    worst = 0.0
    for k in wb:
        x, y = without_key_bias(k, wa[k]), without_key_bias(k, wb[k])
        if y.size:
            worst = max(worst, float(abs(x - y).max() / max(abs(y).max(), 1e-6)))
    if set(wa) != set(wb) or worst > tol:
        fail(f"{what}: final weights differ by {worst:.2e} of a tensor's largest magnitude")
    else:
        print(f"{what}: final weights within {worst:.1e}")


def main():
    h.require_mpirun()
    venv = os.path.join(SRC, ".venv", "bin", "python")
    if os.path.exists(venv) and not os.environ.get("PRETRAIN_IN_VENV"):  # safetensors for the weights
        os.environ["PRETRAIN_IN_VENV"] = "1"
        os.execv(venv, [venv] + sys.argv)
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp, repeated_docs(tmp, 8), bert_dupe=2)

        for kind in ("bert", "gpt"):
            ref = train(kind, shards[kind], tmp, f"{kind}-1", 1, 8, 50, "--export", os.path.join(tmp, f"{kind}-1.safetensors"))
            for np in (2, 4):
                got = train(kind, shards[kind], tmp, f"{kind}-{np}", np, 8 // np, 50,
                            "--export", os.path.join(tmp, f"{kind}-{np}.safetensors"))
                close_losses(f"{kind}: {np} ranks × {8 // np} against 1 rank × 8", got, ref)
                close_weights(f"{kind}: {np} ranks", os.path.join(tmp, f"{kind}-{np}.safetensors"), os.path.join(tmp, f"{kind}-1.safetensors"))
            # Accumulation, inside the first epoch (10 steps; the repeated sample holds more).
            one = train(kind, shards[kind], tmp, f"{kind}-one", 1, 8, 10)
            acc = train(kind, shards[kind], tmp, f"{kind}-acc", 1, 2, 10, "--grad-accum", 4)
            close_losses(f"{kind}: 4 micro-batches × 2 against one batch of 8", acc, one)

        # Gradients reduced in small buckets while the backward pass runs: the same bits as one
        # all-reduce after it (each element is still the sum of the same two values).
        whole = train("gpt", shards["gpt"], tmp, "bucket-0", 2, 4, 10, "--bucket-mb", 0)
        buckets = train("gpt", shards["gpt"], tmp, "bucket-small", 2, 4, 10, "--bucket-mb", 0.05)
        if [m["loss"] for m in whole] != [m["loss"] for m in buckets]:
            fail("--bucket-mb 0.05 (overlapped buckets) changed the losses of --bucket-mb 0")
        else:
            print("gpt: losses with 0.05 MB buckets during the backward pass are bitwise those of one all-reduce")

        # ZeRO-1 at 2 ranks: the same losses (AdamW for GPT, LAMB for BERT, whose trust ratios add
        # the shards' norms), less optimizer memory per device.
        for kind, optimizer in (("bert", "lamb"), ("gpt", "adamw")):
            off = train(kind, shards[kind], tmp, f"{kind}-z0", 2, 4, 20, "--optimizer", optimizer)
            on = train(kind, shards[kind], tmp, f"{kind}-z1", 2, 4, 20, "--optimizer", optimizer, "--zero", 1)
            close_losses(f"{kind} {optimizer}: --zero 1 against --zero 0", on, off)
            if not on[-1]["device_mb"] < off[-1]["device_mb"]:
                fail(f"{kind}: --zero 1 did not lower device memory ({on[-1]['device_mb']} vs {off[-1]['device_mb']} MB)")
            else:
                print(f"{kind}: device memory {off[-1]['device_mb']:.2f} MB -> {on[-1]['device_mb']:.2f} MB with --zero 1")

        # Resume at 2 ranks under ZeRO-1 (the checkpoint gathers the sharded moments): continue the
        # run from its step-10 checkpoint.
        ckpt = os.path.join(tmp, "ckpt")
        full = train("bert", shards["bert"], tmp, "resume-full", 2, 4, 20, "--checkpoint-dir", ckpt,
                     "--save-interval", 10, "--zero", 1)
        again = os.path.join(tmp, "ckpt-again")
        os.makedirs(again)
        subprocess.run(["cp", "-r", os.path.join(ckpt, "step-00000010"), again], check=True)
        with open(os.path.join(again, "latest"), "w") as f:
            f.write("step-00000010\n")
        resumed = train("bert", shards["bert"], tmp, "resume-again", 2, 4, 20, "--checkpoint-dir", again, "--resume",
                        "--zero", 1)
        if [m["loss"] for m in resumed] != [m["loss"] for m in full[10:]]:
            fail(f"2-rank resume: {[m['loss'] for m in resumed]} != {[m['loss'] for m in full[10:]]}")
        else:
            print("2-rank resume: steps 11..20 bitwise the uninterrupted run's")

        # A rank that fails alone (an error only in its slice): it names itself and ends the job, instead
        # of leaving the others waiting in their next all-reduce (and itself in MPI_Finalize) forever.
        h.rank_fails_alone("rank 1 failing alone", [cu.tool("bert_pretrain"), "--data", shards["bert"], "--model",
                                                   "tiny", "--batch-size", 4, "--max-steps", 1000, "--threads", 1,
                                                   "--log-interval", 100])

        # A rank killed mid-run: every rank ends within 30 s and mpirun names the rank.
        args = h.mpirun(2, cu.tool("bert_pretrain"), "--data", shards["bert"], "--model", "tiny", "--batch-size", 4,
                        "--max-steps", 1000000, "--threads", 1, "--log-interval", 1)
        p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=h.ENV)
        for line in p.stdout:
            if line.startswith("step "):
                break
        # Only this job's rank 1: ctest runs other tests' bert_pretrain ranks beside this one.
        victim = None
        for pid in h.descendants(p.pid):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
                if env.get(b"OMPI_COMM_WORLD_RANK") == b"1":
                    victim = pid
            except OSError:
                pass
        if victim is None:
            p.kill()
            return fail("could not find rank 1's process")
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        try:
            rest, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            h.kill(p)
            return fail("the other rank still ran 30 s after rank 1 was killed")
        waited = time.monotonic() - killed
        if p.returncode == 0 or "rank 1" not in rest:
            fail(f"after killing rank 1: exit {p.returncode}, output does not name rank 1:\n{rest[-2000:]}")
        else:
            print(f"rank 1 killed: mpirun ended every rank in {waited:.1f} s (exit {p.returncode}) naming rank 1")
    h.finish()


if __name__ == "__main__":
    main()
