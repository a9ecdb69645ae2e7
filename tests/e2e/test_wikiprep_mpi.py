"""wikiprep under mpirun (ranks oversubscribed on this machine's cores, loopback only): each rank
reads a byte range of the dump and the ranks write the shards one process would.

- N = 1 (no mpirun), 2 and 3 ranks give the same shards, byte for byte, and the same manifest but
  for the arguments and timings: a single-stream bz2 (the enwiki excerpt, jsonl) and a multistream
  one (elwikivoyage, --format sentences), with shards small enough that many of them cross the
  ranks' ranges; plain XML at N = 4, where some ranges hold no page start at all.
- A rank that fails (PRETRAIN_FAULT=RANK:STAGE) ends the job: a non-zero exit naming the rank and
  the reason, every rank gone within the timeout; a damaged dump fails naming the file.
- Interrupted before the shards are written (rank 1 fails as phase 2 begins), then --resume: at the
  same N the finished parts are kept; at another N, and without mpirun, the run starts over; every
  time the uninterrupted bytes, and nothing is left behind (.work is removed)."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

EXE = cu.tool("wikiprep")
ENWIKI = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
VOYAGE = "wikipedia/elwikivoyage-sample-pages-articles.xml.bz2"
SMALL = "wikipedia/wikidump-enwiki-10k.xml.bz2"
fail = cu.fail
differences = cu.differences


def command(np, args, quiet=True):
    args = [EXE, *map(str, args), "--threads", "1", *(["--quiet"] if quiet else [])]
    if np == 1:
        return args
    return [*cu.mpirun_args(np), *args]


def run(np, args, rc=0, env=None, quiet=True):
    try:
        r = subprocess.run(command(np, args, quiet), capture_output=True, text=True, errors="replace", timeout=120,
                           env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        fail(f"-np {np}: hung (120 s): {' '.join(map(str, args))}")
    if (rc == 0) != (r.returncode == 0):
        fail(f"-np {np}: exit {r.returncode}: {' '.join(map(str, args))}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def output(out):
    """Every file in out (hidden ones too): shard bytes; the manifest without arguments and time."""
    files = {}
    for root, dirs, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, out)
            if name == "manifest.json":
                with open(path) as f:
                    m = json.load(f)
                m.pop("created_by", None)
                m.get("stats", {}).pop("seconds", None)
                m.get("extra", {}).pop("warnings", None)  # under mpirun they name the rank's share
                files[rel] = m
            else:
                with open(path, "rb") as f:
                    files[rel] = f.read()
    return files


def same_at(tmp, name, dump, args, counts=(1, 2, 3)):
    ref = None
    for np in counts:
        out = os.path.join(tmp, f"{name}-{np}")
        run(np, [dump, "-o", out, *args])
        got = output(out)
        if ref is None:
            ref = got
            shards = [k for k in ref if k != "manifest.json"]
            if len(shards) < 4:
                fail(f"{name}: expected several shards, got {shards}")
        elif got != ref:
            fail(f"{name}: -np {np} differs from one process in {differences(ref, got)}")
    print(f"{name}: the same {len(ref)} files at N = {', '.join(map(str, counts))}")
    return ref


def main():
    data = cu.shared_data()
    if not data:
        cu.skip("shared data not found (the dump excerpts)")
    if subprocess.run(["which", "mpirun"], capture_output=True).returncode != 0:
        cu.skip("mpirun not installed (openmpi-bin)")
    enwiki = os.path.join(data, ENWIKI)
    with cu.tempdir() as tmp:
        plain = same_at(tmp, "enwiki-jsonl", enwiki, ["--shard-bytes", 200000])
        same_at(tmp, "voyage-sentences", os.path.join(data, VOYAGE), ["--format", "sentences", "--shard-bytes", 150000])
        xml = os.path.join(tmp, "small.xml")
        with open(xml, "wb") as f:
            f.write(subprocess.run(["bzip2", "-dc", os.path.join(data, SMALL)], capture_output=True, check=True).stdout)
        same_at(tmp, "plain-xml", xml, ["--shard-bytes", 60000], counts=(1, 4))

        # One failing rank ends the job, naming itself and why.
        for stage in ("part", "shards"):
            r = run(3, [enwiki, "-o", os.path.join(tmp, "fault"), "--shard-bytes", 200000], rc=1,
                    env={"PRETRAIN_FAULT": f"1:{stage}"})
            if "rank 1 of 3" not in r.stderr or "fault injected" not in r.stderr:
                fail(f"a failing rank ({stage}): the error does not name rank 1 and the reason:\n{r.stderr[-1500:]}")
        # Damage in the middle of the dump: some rank fails, naming the dump.
        bad = os.path.join(tmp, "damaged.xml.bz2")
        blob = bytearray(open(enwiki, "rb").read())
        for i in range(len(blob) // 2, len(blob) // 2 + 64):
            blob[i] ^= 0x5A
        open(bad, "wb").write(bytes(blob))
        r = run(3, [bad, "-o", os.path.join(tmp, "damaged"), "--shard-bytes", 200000], rc=1)
        if "damaged.xml.bz2" not in r.stderr or "rank" not in r.stderr:
            fail(f"a damaged dump: the error does not name the rank and the file:\n{r.stderr[-1500:]}")
        print("a failing rank ends the job, naming itself; a damaged dump fails naming the file")

        # Interrupted as phase 2 begins, resumed at the same N (parts kept), another N, one process.
        for first, then in ((3, 3), (3, 2), (2, 1)):
            out = os.path.join(tmp, f"resume-{first}-{then}")
            run(first, [enwiki, "-o", out, "--shard-bytes", 200000], rc=1, env={"PRETRAIN_FAULT": "1:shards"})
            if cu.read_manifest(out)["complete"]:
                fail(f"an interrupted {first}-rank run's manifest says complete")
            r = run(then, [enwiki, "-o", out, "--shard-bytes", 200000, "--resume"], quiet=False)
            kept = "part is done" in r.stderr
            if kept != (first == then):
                fail(f"resumed {first} → {then}: expected the parts {'kept' if first == then else 'redone'}:\n{r.stderr[-1500:]}")
            got = output(out)
            if got != plain:
                fail(f"interrupted at -np {first}, resumed at -np {then}: differs in {differences(plain, got)}")
            shutil.rmtree(out)
        print("interrupted at N = 3 and 2, resumed at N = 3, 2 and 1: the uninterrupted bytes")
    print("OK")


if __name__ == "__main__":
    main()
