"""make-pretraining-shards under mpirun (ranks oversubscribed on this machine's cores, loopback only),
on the English Wikipedia excerpt (205 documents) and its document shards (a manifest counting each
file's documents, so the input is cut into pieces that 3 ranks share):

- N = 1 (no mpirun), 2 and 3 ranks give the same files, byte for byte, and the same manifests but
  for the fields that record time and arguments: BERT (with a valid split, --pack, --bin-size, and
  from document shards), BERT --rng python (rank 0 alone), GPT Megatron (with a valid split) and
  llm.c; with --keep-work the same files again (the work files aside) and the same token store,
  which the ranks' pieces are moved into, no piece left behind.
- A rank that fails (PRETRAIN_FAULT=RANK:STAGE) ends the job: a non-zero exit naming the rank and
  the reason, every rank gone within the timeout.
- Interrupted (every rank stops after one shard, as a kill would), then --resume at another N
  (3 → 2, and 2 → one process): the uninterrupted run's bytes.
- A rank killed while tokenizing, after a checkpoint of its piece (PRETRAIN_FAULT=1:tokenize-checkpoint):
  --resume at the same N and at another continues that piece from its checkpoint and keeps the
  pieces done; the uninterrupted run's bytes.
- A rank killed at each stage boundary (the store committed, a piece half moved into the store, the
  store freed once the instances are made, a chunk of GPT's spread recorded with the store freed
  behind it), then --resume at another N: the uninterrupted run's bytes."""
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


def same_at_every_n(tmp, name, args, keep_work_too=False):
    """The same files at N = 1, 2, 3 (without .work, which is gone); keep_work_too: with --keep-work
    as well, the same files again (.work aside), and the same token store at every N, no piece left."""
    def run_at(np, keep_work=False):
        out = os.path.join(tmp, f"{name}-{np}{'-keep' if keep_work else ''}")
        run(np, [*args, "-o", out, *(["--keep-work"] if keep_work else [])])
        got = output(out)
        if not keep_work:
            if any(k.startswith(".work") for k in got):
                fail(f"{name}: -np {np} left work files: {sorted(k for k in got if k.startswith('.work'))}")
            return got
        if any(k.startswith(os.path.join(".work", "pieces")) for k in got):
            fail(f"{name}: -np {np} --keep-work left a piece of the token store")
        if not all(k in got for k in STORE):
            fail(f"{name}: -np {np} kept no whole token store: {sorted(k for k in got if k.startswith('.work'))}")
        return {k: v for k, v in got.items() if not k.startswith(".work") or k in STORE}

    enough = lambda files: any(k.endswith((".hdf5", ".bin")) for k in files)  # noqa: E731
    plain = h.same_at(name, (1, 2, 3), run_at, enough)
    if keep_work_too:
        kept = h.same_at(name + " --keep-work", (1, 2, 3), lambda np: run_at(np, True), enough)
        if {k: v for k, v in kept.items() if not k.startswith(".work")} != plain:
            fail(f"{name}: --keep-work changes the output: {differences(plain, kept)}")
    return plain


def killed_and_resumed(tmp, name, args, ref, fault, first, then, check_log=None):
    """Rank 1 of `first` fails at `fault` (PRETRAIN_FAULT), then --resume at `then` ranks: the
    uninterrupted output `ref`. check_log(log) adds checks on the resumed run's log."""
    out = os.path.join(tmp, f"{name}-{fault}-{first}-{then}")
    r = run(first, [*args, "-o", out], rc=1, env={"PRETRAIN_FAULT": f"1:{fault}"})
    if f"rank 1 of {first}" not in r.stderr or "fault injected" not in r.stderr:
        fail(f"{name}: rank 1 failing at {fault}: the error does not name rank 1 and the reason:\n{r.stderr[-1500:]}")
    gone(out)
    r = run(then, [*args, "-o", out, "--resume"], quiet=False)
    if check_log:
        check_log(r.stdout + r.stderr)
    got = output(out)
    if got != ref:
        fail(f"{name}: rank 1 failed at {fault} at -np {first}, resumed at -np {then}: differs in {differences(ref, got)}")


def main():
    data = h.require_mpirun(shared_data="the enwiki excerpt")
    text = os.path.join(data, ENWIKI)
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    bert = ["-i", text, "--tokenizer", vocab, "--dupe-factor", 2, "--seq-len", 128]
    gpt = ["--model", "gpt", "-i", text, "--tokenizer", os.path.join(data, "vocab", "gpt2-encoder.json")]
    with cu.tempdir() as tmp:
        plain = same_at_every_n(tmp, "bert", [*bert, "--num-shards", 5, "--valid-fraction", 0.1], keep_work_too=True)
        same_at_every_n(tmp, "bert-pack", [*bert, "--num-shards", 3, "--pack"])
        # Document shards of a few documents each, their manifest counting them: ~20 pieces of the
        # input, shared by the ranks, each reading only its pieces' files.
        docs = os.path.join(tmp, "docs")
        subprocess.run([cu.tool("shard-tool"), "--quiet", "import-docs", text, "-o", docs, "--shard-bytes", "20000"],
                       check=True, capture_output=True)
        bert_docs = ["-i", docs, *bert[2:], "--num-shards", 4, "--valid-fraction", 0.1, "--piece-bytes", 60000]
        docs_ref = same_at_every_n(tmp, "bert-docs", bert_docs, keep_work_too=True)
        same_at_every_n(tmp, "bert-bins", [*bert, "--num-shards", 2, "--bin-size", 32])
        same_at_every_n(tmp, "bert-python", ["-i", text, "--tokenizer", vocab, "--dupe-factor", 1, "--rng", "python",
                                             "--num-shards", 2], keep_work_too=True)
        same_at_every_n(tmp, "gpt-megatron", [*gpt, "--num-shards", 3, "--valid-fraction", 0.05], keep_work_too=True)
        same_at_every_n(tmp, "gpt-llmc", [*gpt, "--num-shards", 2, "--format", "llmc"], keep_work_too=True)
        gpt_docs = ["--model", "gpt", "-i", docs, *gpt[4:], "--num-shards", 3, "--valid-fraction", 0.05,
                    "--piece-bytes", 60000, "--move-chunk-bytes", 65536]
        gpt_docs_ref = same_at_every_n(tmp, "gpt-docs", gpt_docs)

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

        # Killed while tokenizing, with checkpoints on disk; resumed at the same N, then at another:
        # the pieces do not depend on N, so either way rank 1's piece goes on from its checkpoint.
        def continued(first, then):
            def check(log):
                m = re.search(r"pieces: (\d+) done before, (\d+) continued from a checkpoint, (\d+) tokenized", log)
                if not m or int(m.group(2)) < 1:
                    fail(f"resumed at N = {then} after N = {first}: no piece continued from its checkpoint:\n{log[-3000:]}")
            return check
        for first, then in ((3, 3), (3, 2), (2, 1)):
            killed_and_resumed(tmp, "bert-docs", [*bert_docs, "--checkpoint-bytes", 20000], docs_ref,
                               "tokenize-checkpoint", first, then, continued(first, then))
        print("killed while tokenizing: resumed from the pieces' checkpoints, at the same N and at another")

        # Killed at each stage boundary, resumed at another N.
        for fault in ("tokenized", "store-move-chunk", "store-freed"):
            killed_and_resumed(tmp, "bert-docs", bert_docs, docs_ref, fault, 2, 3)
        for fault in ("gpt-spread-chunk", "store-freed"):
            killed_and_resumed(tmp, "gpt-docs", gpt_docs, gpt_docs_ref, fault, 3, 2)
        print("killed at each stage boundary (store made, piece half moved, store freed, GPT spread chunk): "
              "resumed at another N, the uninterrupted bytes")
    print("OK")


if __name__ == "__main__":
    main()
