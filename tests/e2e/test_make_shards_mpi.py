"""make-pretraining-shards under mpirun (ranks oversubscribed on this machine's cores, loopback only),
on the English Wikipedia excerpt (205 documents, so that 3 ranks each tokenize blocks of it):

- N = 1 (no mpirun), 2 and 3 ranks give the same files, byte for byte, and the same manifests but
  for the fields that record time and arguments: BERT (with a valid split, --pack, --bin-size, and
  from document shards small enough that ranks skip whole files),
  BERT --rng python (rank 0 alone), GPT Megatron (with a valid split) and llm.c; and (--keep-work)
  the same token store, which the ranks write together, no part left behind.
- A rank that fails (PRETRAIN_FAULT=RANK:STAGE) ends the job: a non-zero exit naming the rank and
  the reason, every rank gone within the timeout.
- Interrupted (every rank stops after one shard, as a kill would), then --resume at another N
  (3 → 2, and 2 → one process): the uninterrupted run's bytes.
- A rank killed while tokenizing, after a checkpoint (PRETRAIN_FAULT=1:tokenize-checkpoint): --resume
  at the same N continues each part from its checkpoint (rank 1's at least, which says so); at
  another N it says tokenizing starts over; both give the uninterrupted run's bytes."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402

EXE = cu.tool("make-pretraining-shards")
ENWIKI = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl"
fail = cu.fail
differences = cu.differences


def run(np, args, rc=0, env=None, quiet=True):
    return h.run(h.mpirun(np, EXE, *args, *(["--quiet"] if quiet else []), "--threads", 1), rc, env, timeout=120)


def output(out):
    """Every file under out: its bytes, manifests without the fields that say when a run was made."""
    return h.files(out, [("stats", k) for k in ("seconds", "stage_seconds", "stage_cpu_seconds")])


def gone(out, seconds=20):
    """Waits until every rank that left a temp file in `out` has exited: mpirun may return while
    the ranks it killed are still going away, and the resumed run removes only a dead writer's."""
    pids = set()
    for _, _, names in os.walk(out):
        pids |= {n.rsplit(".tmp-", 1)[1] for n in names if ".tmp-" in n}
    end = time.time() + seconds
    while any(os.path.exists(f"/proc/{p}") for p in pids):
        if time.time() > end:
            fail(f"ranks writing {out} still running {seconds} s after mpirun returned")
        time.sleep(0.05)


STORE = tuple(os.path.join(".work", "store", n) for n in ("tokens.bin", "sentences.bin", "documents.bin", "store.json"))


def same_at_every_n(tmp, name, args, keep_work=False):
    """keep_work: also the token store (.work/store) is the same at every N, and no rank's part is left."""
    def run_at(np):
        out = os.path.join(tmp, f"{name}-{np}")
        run(np, [*args, "-o", out, *(["--keep-work"] if keep_work else [])])
        got = output(out)
        if keep_work:
            if any(k.startswith(os.path.join(".work", "store-part-")) for k in got):
                fail(f"{name}: -np {np} left a part of the token store")
            got = {k: v for k, v in got.items() if not k.startswith(".work") or k in STORE}
            if not all(k in got for k in STORE):
                fail(f"{name}: -np {np} kept no whole token store: {sorted(k for k in got if k.startswith('.work'))}")
        return got

    return h.same_at(name, (1, 2, 3), run_at, lambda files: any(k.endswith((".hdf5", ".bin")) for k in files))


def main():
    data = h.require_mpirun(shared_data="the enwiki excerpt")
    text = os.path.join(data, ENWIKI)
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    bert = ["-i", text, "--tokenizer", vocab, "--dupe-factor", 2, "--seq-len", 128]
    gpt = ["--model", "gpt", "-i", text, "--tokenizer", os.path.join(data, "vocab", "gpt2-encoder.json")]
    with cu.tempdir() as tmp:
        plain = same_at_every_n(tmp, "bert", [*bert, "--num-shards", 5, "--valid-fraction", 0.1])
        same_at_every_n(tmp, "bert-pack", [*bert, "--num-shards", 3, "--pack"])
        # Document shards of a few documents each: a rank skips, undecoded, the files with none of its blocks.
        docs = os.path.join(tmp, "docs")
        subprocess.run([cu.tool("shard-tool"), "--quiet", "import-docs", text, "-o", docs, "--shard-bytes", "20000"],
                       check=True, capture_output=True)
        same_at_every_n(tmp, "bert-docs", ["-i", docs, *bert[2:], "--num-shards", 2])
        same_at_every_n(tmp, "bert-bins", [*bert, "--num-shards", 2, "--bin-size", 32])
        same_at_every_n(tmp, "bert-python", ["-i", text, "--tokenizer", vocab, "--dupe-factor", 1, "--rng", "python",
                                             "--num-shards", 2], keep_work=True)
        same_at_every_n(tmp, "gpt-megatron", [*gpt, "--num-shards", 3, "--valid-fraction", 0.05])
        same_at_every_n(tmp, "gpt-llmc", [*gpt, "--num-shards", 2, "--format", "llmc"], keep_work=True)

        # One failing rank ends the job, naming itself and why.
        for stage in ("tokenize", "instances"):
            r = run(3, [*bert, "--num-shards", 5, "-o", os.path.join(tmp, "fault")], rc=1,
                    env={"PRETRAIN_FAULT": f"1:{stage}"})
            if "rank 1 of 3" not in r.stderr or "fault injected" not in r.stderr:
                fail(f"a failing rank ({stage}): the error does not name rank 1 and the reason:\n{r.stderr[-1500:]}")
        print("a failing rank ends the job, naming itself")

        # Interrupted, then resumed at another N.
        args = [*bert, "--num-shards", 5, "--valid-fraction", 0.1]
        for first, then in ((3, 2), (2, 1)):
            out = os.path.join(tmp, f"resume-{first}-{then}")
            run(first, [*args, "-o", out, "--stop-after-shards", 1], rc=1)
            gone(out)
            if os.path.exists(os.path.join(out, "manifest.json")) and cu.read_manifest(out)["complete"]:
                fail(f"an interrupted {first}-rank run's manifest says complete")
            run(then, [*args, "-o", out, "--resume"])
            got = output(out)
            if got != plain:
                fail(f"interrupted at -np {first}, resumed at -np {then}: differs in {differences(plain, got)}")
        print("interrupted at N = 3 and 2, resumed at N = 2 and 1: the uninterrupted bytes")

        # Killed while tokenizing, with checkpoints on disk; resumed at the same N, then at another.
        for first, then in ((3, 3), (2, 2), (3, 2), (2, 1)):
            out = os.path.join(tmp, f"tokenize-{first}-{then}")
            r = run(first, [*args, "-o", out, "--checkpoint-bytes", 20000], rc=1,
                    env={"PRETRAIN_FAULT": "1:tokenize-checkpoint"})
            if f"rank 1 of {first}" not in r.stderr or "fault injected" not in r.stderr:
                fail(f"a rank failing while tokenizing: the error does not name rank 1 and the reason:\n{r.stderr[-1500:]}")
            gone(out)
            r = run(then, [*args, "-o", out, "--checkpoint-bytes", 20000, "--resume"], quiet=False)
            log = r.stdout + r.stderr
            if then == first and not re.search(r"rank 1 (done|from input document [1-9])", log):
                fail(f"resumed at the same N = {first}: rank 1 did not continue its checkpoint:\n{log[-3000:]}")
            if then != first and "tokenizing starts over" not in log:
                fail(f"resumed at N = {then} after N = {first}: no word that tokenizing starts over:\n{log[-3000:]}")
            got = output(out)
            if got != plain:
                fail(f"killed tokenizing at -np {first}, resumed at -np {then}: differs in {differences(plain, got)}")
        print("killed while tokenizing: resumed from the parts' checkpoints at the same N, started over at another")
    print("OK")


if __name__ == "__main__":
    main()
