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
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402

EXE = cu.tool("wikiprep")
ENWIKI = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
VOYAGE = "wikipedia/elwikivoyage-sample-pages-articles.xml.bz2"
SMALL = "wikipedia/wikidump-enwiki-10k.xml.bz2"
fail = cu.fail
differences = cu.differences


def run(np, args, rc=0, env=None, quiet=True):
    return h.run(h.mpirun(np, EXE, *args, "--threads", 1, *(["--quiet"] if quiet else [])), rc, env, timeout=120)


def output(out):
    """Every file in out (hidden ones too): shard bytes; the manifest without arguments and time."""
    # Under mpirun the warnings name the rank's share.
    return h.files(out, [("stats", "seconds"), ("extra", "warnings")])


def same_at(tmp, name, dump, args, counts=(1, 2, 3)):
    def run_at(np):
        out = os.path.join(tmp, f"{name}-{np}")
        run(np, [dump, "-o", out, *args])
        return output(out)

    return h.same_at(name, counts, run_at, lambda files: len(files) > 4)  # several shards and the manifest


def main():
    data = h.require_mpirun(shared_data="the dump excerpts")
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
