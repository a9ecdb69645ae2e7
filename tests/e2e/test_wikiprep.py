"""wikiprep end to end: exit codes, the bundled sample dump, stdin, bad input (exit 1 naming the
offset, shards before the damage kept), and a real kill -9 in the middle of a run followed by
--resume, whose shards must equal an uninterrupted run's byte for byte.

The kill is deterministic: the killed run reads the dump from a pipe that we stop filling after its
first part, and it is killed once its manifest lists committed shards (it is then waiting for
input, between two shards)."""
import bz2
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

WIKIPREP = cu.tool("wikiprep")
SAMPLE = cu.test_data("sample-dump.xml")
MAIN = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


fail, manifest = cu.fail, cu.read_manifest


def run(*args, rc=0, stdin=None):
    return cu.run_expecting(WIKIPREP, *args, rc=rc, stdin=stdin).stderr


def shard_bytes(out):
    files = {}
    for s in manifest(out)["shards"]:
        with open(os.path.join(out, s["file"]), "rb") as f:
            files[s["file"]] = f.read()
    return files


def check_cli(tmp):
    run("--help")
    if "pretrain suite" not in subprocess.run([WIKIPREP, "--version"], capture_output=True, text=True).stdout:
        fail("--version does not name the suite")
    run(rc=2)
    run(SAMPLE, rc=2)  # no -o
    run(SAMPLE, "-o", tmp, "--format", "xml", rc=2)
    err = run(os.path.join(tmp, "missing.xml"), "-o", os.path.join(tmp, "m"), rc=1)
    if "error:" not in err or "missing.xml" not in err:
        fail(f"a missing input is not named: {err}")


def check_sample(tmp):
    out = os.path.join(tmp, "sample")
    err = run(SAMPLE, "-o", out)
    if "6 articles written" not in err or "1 redirects" not in err:
        fail(f"the summary does not say what was written: {err}")
    m = manifest(out)
    if not m["complete"] or m["stats"]["articles_written"] != 6 or m["shards"][0]["file"] != "docs-00000.jsonl.zst":
        fail(f"unexpected manifest {m}")
    # stdin gives the same shards.
    with open(SAMPLE, "rb") as f:
        run("-", "-o", os.path.join(tmp, "stdin"), "-q", stdin=f)
    if shard_bytes(out) != shard_bytes(os.path.join(tmp, "stdin")):
        fail("stdin and file input give different shards")
    # Sentences: plain text, a blank line after each document.
    run(SAMPLE, "-o", os.path.join(tmp, "sent"), "--format", "sentences", "-q")
    with open(os.path.join(tmp, "sent", "sentences-00000.txt"), encoding="utf-8") as f:
        text = f.read()
    if text.count("\n\n") != 6 or manifest(os.path.join(tmp, "sent"))["format"] != "sentences-txt":
        fail("sentences output is not six documents")


def big_dump(tmp, data):
    """The main enwiki sample's pages repeated 8 times (~49 MB of XML) as one dump."""
    xml = bz2.decompress(open(os.path.join(data, MAIN), "rb").read())
    first, last = xml.index(b"  <page>"), xml.rindex(b"</page>") + len(b"</page>\n")
    path = os.path.join(tmp, "big.xml")
    with open(path, "wb") as f:
        f.write(xml[:first] + xml[first:last] * 8 + xml[last:])
    return path


def check_kill_and_resume(tmp, data):
    dump = big_dump(tmp, data)
    options = ["--shard-bytes", "1000000", "-q"]
    whole = os.path.join(tmp, "whole")
    run(dump, "-o", whole, *options)
    n_whole = len(manifest(whole)["shards"])

    parts = os.path.join(tmp, "parts")
    content = open(dump, "rb").read()
    p = subprocess.Popen([WIKIPREP, "-", "-o", parts, *options], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(content[: len(content) * 2 // 5])
    p.stdin.flush()
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            m = manifest(parts)
            if len(m["shards"]) >= 3:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    else:
        p.kill()
        fail("the run wrote no shards from the first part of its input")
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    try:
        p.stdin.close()
    except BrokenPipeError:
        pass
    m = manifest(parts)
    kept = len(m["shards"])
    if m["complete"] or not 0 < kept < n_whole or m["extra"]["resume"]["shards"] != kept:
        fail(f"the killed run's manifest is not a checkpoint: complete {m['complete']}, {kept} shards")
    leftovers = [n for n in os.listdir(parts) if n.startswith("docs-") and n not in shard_bytes(parts)]
    print(f"killed after {kept} of {n_whole} shards; files beyond the manifest: {leftovers}")

    with open(dump, "rb") as f:
        err = run("-", "-o", parts, "--resume", *options[:2], stdin=f)
    if "resuming after" not in err:
        fail(f"--resume did not say where it went on: {err}")
    a, b = shard_bytes(whole), shard_bytes(parts)
    if a != b:
        fail(f"resumed shards differ from an uninterrupted run's: {sorted(set(a) ^ set(b))} "
             f"{[k for k in a if k in b and a[k] != b[k]]}")
    mw, mp = manifest(whole), manifest(parts)
    for key in ("pages_seen", "articles_written", "redirects_skipped", "namespaces_skipped", "jsonl_bytes"):
        if mw["stats"][key] != mp["stats"][key]:
            fail(f"stats.{key}: {mw['stats'][key]} uninterrupted, {mp['stats'][key]} resumed")
    if not mp["complete"] or [n for n in os.listdir(parts) if ".tmp-" in n]:
        fail("the resumed run is not complete or left temp files")
    # Resuming with other options is refused (usage error).
    run(dump, "-o", parts, "--resume", "--shard-bytes", "2000000", "-q", rc=2)
    print(f"kill -9 + --resume: {n_whole} shards byte-identical")


def check_bad_input(tmp, data):
    raw = open(os.path.join(data, MAIN), "rb").read()
    cut = os.path.join(tmp, "cut.xml.bz2")
    with open(cut, "wb") as f:
        f.write(raw[: len(raw) // 2])
    out = os.path.join(tmp, "cut")
    err = run(cut, "-o", out, rc=1)
    if "error:" not in err or "byte" not in err:
        fail(f"a truncated bz2 does not name the offset: {err}")
    m = manifest(out)
    if m["complete"] or not m["shards"] or m["stats"]["articles_written"] < 10:
        fail("the pages before the damage were not committed")
    bad = os.path.join(tmp, "bad.xml")
    xml = open(SAMPLE, "rb").read()
    at = xml.index(b"<page>", xml.index(b"<page>") + 1)
    with open(bad, "wb") as f:
        f.write(xml[:at] + b"<page><title>x</title></oops>" + xml[at:])
    err = run(bad, "-o", os.path.join(tmp, "bad"), rc=1)
    if "error:" not in err or str(at) not in err:
        fail(f"malformed XML: the error does not name the page's offset {at}: {err}")


def main():
    if not os.path.exists(WIKIPREP):
        cu.skip(f"{WIKIPREP} not built")
    with cu.tempdir() as tmp:
        check_cli(tmp)
        check_sample(tmp)
        data = cu.shared_data()
        if data and os.path.exists(os.path.join(data, MAIN)):
            check_bad_input(tmp, data)
            check_kill_and_resume(tmp, data)
        else:
            print("SKIP part: no shared data for the kill/resume and bz2 checks")
    print("OK")


if __name__ == "__main__":
    main()
