"""dedup end to end, on documents made here with planted duplicates (no shared data needed):
source 1 is document shards (shard-tool import-docs, several shards), source 2 a JSON lines file.

- The planted duplicates are removed and reported against the first document of their cluster in
  input order (exact: whitespace-changed and verbatim copies; near: copies with 1% of the words
  changed); the output holds every other document once, in input order; shard-tool verifies it.
- The same bytes (shards, report, manifest but its command line) at --threads 1 and 2 and under
  `mpirun --oversubscribe -np 2`.
- Killed (SIGKILL) after its second checkpoint, then --resume: the uninterrupted run's bytes, with
  the finished signatures kept.
- Bad input: a damaged shard (exit 1 naming it), a malformed line (exit 1 naming file and line),
  flag values out of range or unknown (exit 2)."""
import glob
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

EXE, SHARD_TOOL = cu.tool("dedup"), cu.tool("shard-tool")
fail = cu.fail
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,vader",
           "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}


def words(rng, n):
    # Letters only: digits would all read as "0" in the shingle text.
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(n))


def edit(text, every, tag):
    w = text.split(" ")
    return " ".join(f"{tag}{'x' * (i // every % 7)}" if i % every == every - 1 else x for i, x in enumerate(w))


def make_corpus(tmp):
    rng = random.Random(49)
    first = [{"id": f"s{i}", "url": "", "title": f"S{i}", "text": words(rng, 400)} for i in range(40)]
    first[7]["text"] = "  " + first[2]["text"].replace(" ", "\n", 3) + "  "  # exact after whitespace folding
    second = [{"id": "t0", "text": first[11]["text"]},                 # exact copy of s11
              {"id": "t1", "text": edit(first[20]["text"], 100, "q")},  # near copy of s20
              {"id": "t2", "text": words(rng, 300)},
              {"id": "t3", "text": "too short"},
              {"id": "t4", "text": "too short"}]                        # exact copy of t3
    second.append({"id": "t5", "text": edit(second[2]["text"], 120, "z")})  # near copy of t2
    with open(os.path.join(tmp, "first.jsonl"), "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in first)
    with open(os.path.join(tmp, "second.jsonl"), "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in second)
    shards = os.path.join(tmp, "first")
    cu.run(SHARD_TOOL, "--quiet", "import-docs", os.path.join(tmp, "first.jsonl"), "-o", shards, "--shard-bytes", 20000)
    if len(glob.glob(os.path.join(shards, "docs-*.jsonl.zst"))) < 3:
        fail("expected several input shards")
    return [shards, os.path.join(tmp, "second.jsonl")], {"s7": ("s2", "exact"), "t0": ("s11", "exact"),
                                                         "t1": ("s20", "near"), "t4": ("t3", "exact"),
                                                         "t5": ("t2", "near")}


def output(out):
    files = {}
    for p in sorted(glob.glob(os.path.join(out, "*"))):
        with open(p, "rb") as f:
            data = f.read()
        if os.path.basename(p) == "manifest.json":
            m = json.loads(data)
            m["created_by"].pop("args")
            data = json.dumps(m, sort_keys=True).encode()
        files[os.path.basename(p)] = data
    return files


def dedup(inputs, out, *flags, rc=0, mpi=0):
    args = [EXE, "-i", *inputs, "-o", out, "--quiet", *map(str, flags)]
    if mpi:
        args = ["mpirun", "--oversubscribe", "-np", str(mpi), *args]
    r = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **MPI_ENV}, timeout=120)
    if r.returncode != rc:
        fail(f"exit {r.returncode}, expected {rc}: {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r


def main():
    with cu.tempdir() as tmp:
        inputs, planted = make_corpus(tmp)
        out1 = os.path.join(tmp, "out1")
        stats = json.loads(dedup(inputs, out1, "--threads", 1).stdout)
        with open(os.path.join(out1, "dedup-report.jsonl")) as f:
            report = [json.loads(line) for line in f]
        got = {r["id"]: (r["kept"]["id"], r["kind"]) for r in report}
        if got != planted:
            fail(f"removed {got}, planted {planted}")
        if [r["index"] for r in report] != sorted(r["index"] for r in report):
            fail("the report is not in input order")
        if stats["documents"] != 46 or stats["kept"] != 41:
            fail(f"statistics {stats}")
        kept = []
        for p in sorted(glob.glob(os.path.join(out1, "docs-*.jsonl.zst"))):
            kept += [json.loads(line)["id"] for line in subprocess.run(["zstd", "-dc", p], capture_output=True,
                                                                       text=True, check=True).stdout.splitlines()]
        expected = [f"s{i}" for i in range(40) if f"s{i}" not in planted] + [t for t in ("t0", "t1", "t2", "t3", "t4", "t5")
                                                                            if t not in planted]
        if kept != expected:
            fail(f"kept {kept}, expected {expected}")
        cu.run(SHARD_TOOL, "verify", out1)

        reference = output(out1)
        for label, flags, mpi in (("--threads 2", ["--threads", 2], 0), ("mpirun -np 2", ["--threads", 1], 2)):
            if mpi and not shutil.which("mpirun"):
                print("no mpirun: skipping the mpirun run")
                continue
            out = os.path.join(tmp, f"out-{label.replace(' ', '')}")
            dedup(inputs, out, *flags, mpi=mpi)
            diff = cu.differences(output(out), reference)
            if diff:
                fail(f"{label}: {diff} differ from --threads 1")

        # Killed after two checkpoints (two signature files), then resumed.
        killed = os.path.join(tmp, "killed")
        dedup(inputs, killed, "--threads", 1, "--kill-after-checkpoints", 2, rc=-9)
        if os.path.exists(os.path.join(killed, "manifest.json")):
            fail("a killed run left a manifest")
        resumed = json.loads(dedup(inputs, killed, "--threads", 2, "--resume").stdout)
        if resumed["resumed_signatures"] != 2:
            fail(f"--resume kept {resumed['resumed_signatures']} signature files, expected 2")
        diff = cu.differences(output(killed), reference)
        if diff:
            fail(f"after --resume: {diff} differ from an uninterrupted run")

        # Bad input.
        bad = os.path.join(tmp, "bad")
        shutil.copytree(inputs[0], bad)
        shard = os.path.join(bad, "docs-00001.jsonl.zst")
        with open(shard, "r+b") as f:
            f.seek(40)
            byte = f.read(1)
            f.seek(40)
            f.write(bytes([byte[0] ^ 0x20]))
        r = dedup([bad], os.path.join(tmp, "o-bad"), rc=1)
        if "docs-00001.jsonl.zst" not in r.stderr or "xxh3" not in r.stderr:
            fail(f"damaged shard: {r.stderr}")
        malformed = os.path.join(tmp, "malformed.jsonl")
        with open(inputs[1]) as f, open(malformed, "w") as g:
            g.write(f.read() + '{"id": "x", "text": \n')
        r = dedup([malformed], os.path.join(tmp, "o-malformed"), rc=1)
        if "malformed.jsonl:7" not in r.stderr:
            fail(f"malformed line: {r.stderr}")
        for flags in (["--bands", 0], ["--jaccard-threshold", 2], ["--rows", "many"], ["--zstd-level", 30], ["--frobnicate"]):
            dedup(inputs, os.path.join(tmp, "o-usage"), *flags, rc=2)
        dedup([os.path.join(tmp, "nothing-*.jsonl")], os.path.join(tmp, "o-none"), rc=2)
    print("OK")


if __name__ == "__main__":
    main()
