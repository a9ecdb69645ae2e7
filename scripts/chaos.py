#!/usr/bin/env python3
"""The fault campaign of issue #20 (scripts/chaos.sh runs it; docs/reliability.md has its figures).

  kill      SIGKILL each long job at a uniformly random moment of its uninterrupted run, then --resume:
            exit 0, outputs byte-identical to the uninterrupted run's (manifest fields that record
            time and arguments aside), nothing else left in the output directory.
  diskfull  each writer under `prlimit --fsize`, and with its output on a tmpfs that fills part-way
            (skipped, and said so, where mounting is refused): exit 1 naming the file, no shard listed
            that is not whole, and --resume once there is room gives the uninterrupted output.
  corrupt   byte flips and truncations of one shard per kind (docs, BERT HDF5, Megatron, llm.c,
            checkpoints): shard-tool verify (or the checkpoint's checksums) must catch 100%; the
            readers without verification must never crash or hang (we count what they catch alone).
  writers   a second run into a directory in use is refused (exit 1, the directory and pid named).
  mpi       a random rank of a 4-rank run (BERT and GPT data parallel, and 3D grids: tensor x pipeline,
            pipeline x data) SIGKILLed at a random moment: every rank ends within 30 s, the output names
            the rank, and --resume gives the uninterrupted weights and losses bitwise.
  net       faults between hosts (scripts/chaos_net.py): BERT data parallel on 2 network-namespace
            hosts, a link down, a host killed, 100% loss for seconds: the job rides a short outage out
            or ends within its timeout naming the lost host, never hangs, never leaves a half
            checkpoint, and --resume on the surviving host is the uninterrupted run bitwise.
  fuzz      scripts/fuzz.sh --campaign HOURS.

Every trial draws from random.Random(seed, job, trial), so a rerun repeats it. Prints a table of
trials run and passed per job and fault; exit 1 when any failed.
"""
import argparse
import bz2
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import chaos_net

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
           OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo", OMPI_MCA_rmaps_base_oversubscribe="1")
HANG_S = 120  # a reader that runs longer than this on a tiny shard set hangs


class Campaign:
    def __init__(self, build, work, seed, trials, short, corrupt_trials=None):
        self.build, self.work, self.seed, self.trials, self.short = build, work, seed, trials, short
        self.corrupt_trials = corrupt_trials or (trials if short else 1000)
        self.rows = {}  # (job, fault) -> [trials, passed, note]
        self.findings = []
        self.harmless = 0  # checkpoint manifests damaged only where loading does not look

    def tool(self, name):
        for sub in ("formats", "datagen", "tokenizer", "trainer", "."):
            p = os.path.join(self.build, sub, name)
            if os.path.exists(p):
                return p
        sys.exit(f"chaos: {name} is not built under {self.build}")

    def rng(self, *what):
        return random.Random("/".join(map(str, (self.seed,) + what)))

    def record(self, job, fault, ok, why="", note=None):
        row = self.rows.setdefault((job, fault), [0, 0, ""])
        row[0] += 1
        row[1] += bool(ok)
        if note is not None:
            row[2] = note
        if not ok:
            self.findings.append(f"{job} / {fault}: {why}")
            print(f"  FAIL {job} / {fault}: {why}", flush=True)

    def skip(self, job, fault, reason):
        """A trial that could not run here: reported, never counted as passed."""
        row = self.rows.setdefault((job, fault), [0, 0, ""])
        row[2] = f"skipped: {reason}"
        print(f"  SKIP {job} / {fault}: {reason}", flush=True)

    def table(self):
        lines = ["| job | fault | trials | passed | notes |", "|---|---|---:|---:|---|"]
        for (job, fault), (n, ok, note) in self.rows.items():
            lines.append(f"| {job} | {fault} | {n} | {ok} | {note} |")
        return "\n".join(lines)


def run(args, timeout=600, env=None, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace",
                          timeout=timeout, env=env or ENV, **kw)


def must(args, **kw):
    r = run(args, **kw)
    if r.returncode != 0:
        sys.exit(f"chaos: setup failed ({r.returncode}): {' '.join(map(str, args))}\n{r.stdout}{r.stderr}")
    return r


def stop_everything_mentioning(marker):
    """SIGKILL every process whose command line names `marker` (a killed mpirun leaves its ranks)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass


# ------------------------------------------------------------------ comparing outputs
def normalized(path):
    """A file's bytes; a manifest.json without what records time and arguments."""
    data = open(path, "rb").read()
    if os.path.basename(path) != "manifest.json":
        return data

    def strip(j):
        if isinstance(j, dict):
            return {k: strip(v) for k, v in j.items() if "seconds" not in k}
        return [strip(v) for v in j] if isinstance(j, list) else j
    j = json.loads(data)
    j.get("created_by", {}).pop("args", None)
    return json.dumps(strip(j), sort_keys=True).encode()


def tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = p
    return out


def differences(want_dir, got_dir):
    """'' when got_dir holds exactly want_dir's files with the same contents, else what differs."""
    want, got = tree(want_dir), tree(got_dir)
    if set(want) != set(got):
        return f"extra {sorted(set(got) - set(want))}, missing {sorted(set(want) - set(got))}"
    bad = [f for f in want if normalized(want[f]) != normalized(got[f])]
    return f"differs: {bad}" if bad else ""


# ------------------------------------------------------------------ inputs and jobs
def make_inputs(c):
    """A dump of the bundled sample's pages repeated (bigger in the full campaign), as XML and bz2,
    and the documents, vocabularies and shards the later jobs read."""
    xml = open(os.path.join(SRC, "tests", "data", "sample-dump.xml"), "rb").read()
    first, last = xml.index(b"<page>"), xml.rindex(b"</page>") + len(b"</page>")
    repeat = 60 if c.short else 1500  # the full campaign's jobs run long enough to be killed mid-way
    inputs = {"xml": os.path.join(c.work, "dump.xml"), "bz2": os.path.join(c.work, "dump.xml.bz2")}
    body = xml[:first] + xml[first:last] * repeat + xml[last:]
    open(inputs["xml"], "wb").write(body)
    open(inputs["bz2"], "wb").write(bz2.compress(body, 9))
    inputs["docs"] = os.path.join(c.work, "docs")
    must([c.tool("wikiprep"), inputs["xml"], "-o", inputs["docs"], "-q", "--shard-bytes", 200000])
    inputs["wordpiece"] = os.path.join(c.work, "wordpiece")
    must([c.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 1000, "-o", inputs["wordpiece"],
          inputs["docs"]])
    inputs["spm"] = os.path.join(c.work, "spm")
    must([c.tool("train-tokenizer"), "-q", "--kind", "sentencepiece", "--vocab-size", 200,
          "--character-coverage", 1.0, "-o", inputs["spm"], inputs["docs"]])
    inputs["bert"] = os.path.join(c.work, "bert")
    must([c.tool("make-pretraining-shards"), *jobs(c, inputs)["make-shards-bert"][1:], "-o", inputs["bert"]])
    inputs["gpt"] = os.path.join(c.work, "gpt")
    must([c.tool("make-pretraining-shards"), *jobs(c, inputs)["make-shards-gpt"][1:], "-o", inputs["gpt"]])
    inputs["llmc"] = os.path.join(c.work, "llmc")
    must([c.tool("make-pretraining-shards"), *jobs(c, inputs)["make-shards-gpt"][1:], "--format", "llmc",
          "-o", inputs["llmc"]])
    return inputs


def jobs(c, inputs):
    """Each long job as [tool, args…] without its output option (added as -o DIR, or
    --checkpoint-dir DIR for the trainers)."""
    steps = 8 if c.short else 30
    trainer = ["--data", inputs.get("bert", ""), "--model", "tiny", "--dropout", 0, "--batch-size", 4,
               "--max-steps", steps, "--save-interval", 2, "--threads", 1, "--seed", 3, "-q"]
    return {
        "wikiprep-bz2": ["wikiprep", inputs["bz2"], "-q", "--shard-bytes", 100000],
        "wikiprep-xml": ["wikiprep", inputs["xml"], "-q", "--shard-bytes", 100000],
        "train-tokenizer": ["train-tokenizer", "-q", "--kind", "wordpiece", "--vocab-size", 1000, inputs["docs"]],
        "make-shards-bert": ["make-pretraining-shards", "-q", "--model", "bert", "-i", inputs["docs"], "--tokenizer",
                             os.path.join(inputs["wordpiece"], "vocab.txt"), "--seq-len", 64, "--max-predictions", 10,
                             "--dupe-factor", 2, "--num-shards", 4],
        "make-shards-gpt": ["make-pretraining-shards", "-q", "--model", "gpt", "-i", inputs["docs"], "--tokenizer",
                            os.path.join(inputs["spm"], "spm.model"), "--num-shards", 3],
        "bert_pretrain": ["bert_pretrain", *trainer],
        "bert_pretrain-np2": ["mpirun", "-np", 2, "bert_pretrain", *trainer],
    }


def command(c, spec, out, resume=False):
    args = [c.tool(a) if a in ("wikiprep", "train-tokenizer", "make-pretraining-shards", "bert_pretrain",
                                "gpt_pretrain") else a for a in spec]
    trainer = any(str(a).endswith("_pretrain") for a in spec)
    args += ["--checkpoint-dir", out] if trainer else ["-o", out]
    return args + (["--resume"] if resume else [])


def resumable(spec):
    return spec[0] != "train-tokenizer"  # a vocabulary is made in one step: a rerun starts over


def reference(c, inputs, name):
    """The uninterrupted run's output directory and how long it took."""
    spec = jobs(c, inputs)[name]
    out = os.path.join(c.work, "ref", name)
    start = time.monotonic()
    must(command(c, spec, out))
    return out, time.monotonic() - start


# ------------------------------------------------------------------ kill and resume
def kill_trials(c, inputs, refs):
    for name, spec in jobs(c, inputs).items():
        ref, seconds = refs[name]
        finished_first = 0
        for trial in range(c.trials):
            out = os.path.join(c.work, "kill", f"{name}-{trial}")
            delay = c.rng("kill", name, trial).uniform(0, seconds)
            p = subprocess.Popen([str(a) for a in command(c, spec, out)], env=ENV, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            finished_first += p.poll() is not None
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            stop_everything_mentioning(out)
            r = run(command(c, spec, out, resume=resumable(spec)))
            why = f"--resume exit {r.returncode}: {r.stderr[-300:]}" if r.returncode else differences(ref, out)
            c.record(name, "kill -9 + resume", not why, why,
                     note=f"delay U[0, {seconds:.2f} s]; {finished_first} finished before the kill")
            if not why:
                shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------------ disk full
def listed_shards_whole(out):
    """'' when every shard a manifest under `out` lists is there at its listed size."""
    for d, _, files in os.walk(out):
        if "manifest.json" not in files:
            continue
        m = json.load(open(os.path.join(d, "manifest.json")))
        for s in m.get("shards", []):
            p = os.path.join(d, s["file"])
            if not os.path.exists(p) or os.path.getsize(p) != s["bytes"]:
                return f"{p} is listed but not whole"
    return ""


def diskfull_trials(c, inputs, refs):
    for name, spec in jobs(c, inputs).items():
        if "mpirun" in spec:
            continue  # the same writers as the single process
        ref, _ = refs[name]
        biggest = max(os.path.getsize(p) for p in tree(ref).values())
        for trial in range(max(1, c.trials // 4)):
            limit = c.rng("diskfull", name, trial).randint(1, max(1, biggest - 1))
            out = os.path.join(c.work, "full", f"{name}-{trial}")
            r = run(["prlimit", f"--fsize={limit}", *command(c, spec, out)])
            problems = []
            if r.returncode != 1:
                problems.append(f"exit {r.returncode} (want 1) under a {limit}-byte file limit")
            elif "File too large" not in r.stderr or out not in r.stderr:
                problems.append(f"the error does not name the file and the cause: {r.stderr.strip()[-300:]}")
            problems.append(listed_shards_whole(out))
            r = run(command(c, spec, out, resume=resumable(spec)))
            problems.append(f"--resume exit {r.returncode}: {r.stderr[-300:]}" if r.returncode else differences(ref, out))
            why = "; ".join(p for p in problems if p)
            c.record(name, "file size limit + resume", not why, why, note="prlimit --fsize U[1, largest output file)")
            if not why:
                shutil.rmtree(out, ignore_errors=True)
    tinyfs_trials(c, inputs, refs)


PAGE = 4096


def tinyfs_refusal(c):
    """'' when this process can mount a tmpfs, else why not (the tinyfs trials are then skipped)."""
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount here"
    probe = os.path.join(c.work, "tinyfs-probe")
    os.makedirs(probe, exist_ok=True)
    r = run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe])
    if r.returncode != 0:
        return f"mount -t tmpfs refused: {(r.stderr or r.stdout).strip()[-200:]}"
    run(["umount", probe])
    return ""


def tmpfs_usage(c, spec, out):
    """(peak, end): the bytes the job's output directory takes on a tmpfs at its fullest (work files
    included: make-pretraining-shards' token store and spill buckets are gone by the end) and at the
    end, polled while the job runs on a roomy tmpfs mounted at `out`."""
    p = subprocess.Popen([str(a) for a in command(c, spec, out)], env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    peak = 0
    used = lambda: (lambda st: (st.f_blocks - st.f_bfree) * st.f_frsize)(os.statvfs(out))  # noqa: E731
    while p.poll() is None:
        peak = max(peak, used())
        time.sleep(0.002)
    end = used()
    if p.returncode != 0:
        sys.exit(f"chaos: {' '.join(map(str, spec))} failed ({p.returncode}) on a roomy tmpfs")
    return max(peak, end), end


def names_a_file_under(out, text):
    """The error names a file under `out` (not only the directory)."""
    return any(line.find(out + "/") >= 0 for line in text.splitlines())


def files_that_look_complete(ref, out):
    """Files under `out` that carry a finished output's name (one the uninterrupted run writes) but not its
    contents: a reader or --resume would take them as done. The manifests and `latest` are checked apart
    (listed_shards_whole): a failed run may leave an earlier, consistent one."""
    want, got = tree(ref), tree(out)
    bad = []
    for rel, p in got.items():
        if rel in want and os.path.basename(rel) not in ("manifest.json", "latest") and \
                normalized(p) != normalized(want[rel]):
            bad.append(rel)
    return bad


def tinyfs_trials(c, inputs, refs):
    """Each writer with its output directory on a tmpfs that fills part-way: exit 1 with "No space left on
    device" naming a file, no finished output's name on a partial file, no partial shard listed; then the
    tmpfs grows (space freed) and --resume gives the uninterrupted output. The size: even trials fill
    during the writer's output (peak - end + U[0.05, 0.95] x end: the final files are written while the
    work files are still there), odd ones anywhere (U[0.05, 0.95] x peak, the work files' writers too)."""
    fault = "tiny filesystem + resume"
    names = [n for n, spec in jobs(c, inputs).items() if "mpirun" not in spec]
    if c.short:  # CI: one trial, of the HDF5 writer (a C library's own I/O under ENOSPC)
        names = ["make-shards-bert"]
    refused = tinyfs_refusal(c)
    if refused:
        for name in names:
            c.skip(name, fault, refused)
        return
    for name in names:
        spec = jobs(c, inputs)[name]
        ref, _ = refs[name]
        out = os.path.join(c.work, "tinyfs", name)
        os.makedirs(out)
        if run(["mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", out]).returncode != 0:
            c.skip(name, fault, "mount -t tmpfs refused")
            continue
        try:
            peak, end = tmpfs_usage(c, spec, out)
        finally:
            run(["umount", out])
        for trial in range(1 if c.short else max(1, c.trials // 4)):
            rng = c.rng("tinyfs", name, trial)
            fill = peak - end + rng.uniform(0.05, 0.95) * end if trial % 2 == 0 else rng.uniform(0.05, 0.95) * peak
            size = max(PAGE, int(fill) // PAGE * PAGE)
            out = os.path.join(c.work, "tinyfs", f"{name}-{trial}")
            os.makedirs(out)
            problems = []
            r = run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", out])
            if r.returncode != 0:
                c.skip(name, fault, f"mount -t tmpfs refused: {r.stderr.strip()[-200:]}")
                continue
            try:
                r = run(command(c, spec, out))
                if r.returncode != 1:
                    problems.append(f"exit {r.returncode} (want 1) on a {size}-byte filesystem (the job takes "
                                    f"{peak} at its peak): {r.stderr.strip()[-300:]}")
                elif "No space left on device" not in r.stderr or not names_a_file_under(out, r.stderr):
                    problems.append(f"the error does not name the file and the cause: {r.stderr.strip()[-300:]}")
                problems.append(listed_shards_whole(out))
                looks = files_that_look_complete(ref, out)
                if looks:
                    problems.append(f"partial files under finished names: {looks}")
                grow = run(["mount", "-o", f"remount,size={max(64 << 20, 4 * peak)}", out])
                if grow.returncode != 0:
                    problems.append(f"remount refused: {grow.stderr.strip()[-200:]}")
                else:
                    r = run(command(c, spec, out, resume=resumable(spec)))
                    problems.append(f"--resume exit {r.returncode}: {r.stderr[-300:]}" if r.returncode
                                    else differences(ref, out))
            finally:
                stop_everything_mentioning(out)
                if run(["umount", out]).returncode != 0:
                    run(["umount", "-l", out])
            why = "; ".join(p for p in problems if p)
            c.record(name, fault, not why, why, note="tmpfs filling part-way: during the output (even trials) "
                     "or anywhere (odd), then remounted bigger for --resume")
            shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------------ corruption
def damage(rng, path):
    data = bytearray(open(path, "rb").read())
    if rng.random() < 0.25:
        cut = rng.randrange(len(data))
        data = data[:cut]
        what = f"cut to {cut} of {os.path.getsize(path)} bytes"
    else:
        flips = [rng.randrange(len(data)) for _ in range(rng.randint(1, 8))]
        for at in flips:
            data[at] ^= rng.randint(1, 255)
        what = f"bytes {flips[:3]}{'…' if len(flips) > 3 else ''} flipped"
    open(path, "wb").write(data)
    return what


def reader_verdict(c, args):
    """caught (exit 1 with an error line), missed (exit 0), crashed or hung."""
    try:
        r = run(args, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        return "hung", ""
    if r.returncode == 0:
        return "missed", ""
    if r.returncode in (1, 2) and "error:" in r.stderr:
        return "caught", ""
    return "crashed", f"exit {r.returncode}: {r.stderr[-300:]}"


def corrupt_trials(c, inputs, refs):
    shard_tool = c.tool("shard-tool")
    train = ["--model", "tiny", "--batch-size", 4, "--max-steps", 3, "--threads", 1, "-q"]
    kinds = {  # kind -> (shard set, file pattern, the reader run over the damaged set)
        "docs jsonl.zst": (inputs["docs"], ".jsonl.zst",
                           lambda d: [c.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 300,
                                      "-o", d + "-vocab", d]),
        "BERT HDF5": (inputs["bert"], ".hdf5", lambda d: [c.tool("bert_pretrain"), "--data", d, *train]),
        "Megatron .bin/.idx": (inputs["gpt"], (".bin", ".idx"),
                               lambda d: [c.tool("gpt_pretrain"), "--data", d, "--seq-len", 32, *train]),
        "llm.c .bin": (inputs["llmc"], ".bin", lambda d: [c.tool("gpt_pretrain"), "--data", d, "--seq-len", 32, *train]),
    }
    n = c.corrupt_trials
    for kind, (src, suffix, reader) in kinds.items():
        files = sorted(f for f in os.listdir(src) if f.endswith(suffix))
        counts = {"caught": 0, "missed": 0, "crashed": 0, "hung": 0}
        for trial in range(n):
            rng = c.rng("corrupt", kind, trial)
            d = os.path.join(c.work, "corrupt", f"{kind.split()[0]}-{trial}")
            shutil.copytree(src, d)
            victim = os.path.join(d, rng.choice(files))
            what = damage(rng, victim)
            r = run([shard_tool, "verify", d])
            verdict, detail = reader_verdict(c, reader(d))
            counts[verdict] += 1
            why = ""
            if r.returncode != 1 or os.path.basename(victim) not in r.stdout + r.stderr:
                why = f"shard-tool verify missed {os.path.basename(victim)} ({what}): exit {r.returncode}"
            if verdict in ("crashed", "hung"):
                why += f" the reader {verdict} on {os.path.basename(victim)} ({what}) {detail}"
            c.record(kind, "corruption", not why, why.strip())
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(d + "-vocab", ignore_errors=True)
        c.rows[(kind, "corruption")][2] = (f"verify caught {c.rows[(kind, 'corruption')][1]}/{n}; reader alone: "
                                          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    checkpoint_trials(c, inputs, refs, n)


def harmless_manifest_damage(original, damaged):
    """A checkpoint manifest still parses and lists every file with its size and xxh3 unchanged:
    loading verifies the same files against the same checksums, so the damage cannot reach the
    weights (resuming would then train on, which a 'hung' verdict used to count as a finding)."""
    if os.path.basename(damaged) != "manifest.json":
        return False
    try:
        a, b = json.load(open(original)), json.load(open(damaged, encoding="utf-8", errors="strict"))
    except (ValueError, UnicodeDecodeError):
        return False
    keep = ("format", "version", "shards", "complete")
    return all(a.get(k) == b.get(k) for k in keep)


def checkpoint_trials(c, inputs, refs, n):
    """A damaged checkpoint is refused by --resume, naming the file."""
    ref, _ = refs["bert_pretrain"]
    spec = jobs(c, inputs)["bert_pretrain"]
    latest = open(os.path.join(ref, "latest")).read().strip()
    files = sorted(os.listdir(os.path.join(ref, latest)))
    for trial in range(n):
        rng = c.rng("corrupt", "checkpoint", trial)
        d = os.path.join(c.work, "corrupt", f"ckpt-{trial}")
        shutil.copytree(ref, d)
        victim = os.path.join(d, latest, rng.choice(files))
        what = damage(rng, victim)
        if harmless_manifest_damage(os.path.join(ref, latest, "manifest.json"), victim):
            # The files' sizes and checksums read the same: what changed is metadata that loading
            # never uses (a stats or tokenizer field, white space), and the checked files are whole.
            c.record("checkpoint", "corruption", True, "", note="refused by --resume (checksums in the checkpoint's manifest.json)")
            c.harmless += 1
            shutil.rmtree(d, ignore_errors=True)
            continue
        args = command(c, spec, d, resume=True)
        args[args.index("--max-steps") + 1] = 10 ** 6  # so that it must load the checkpoint to go on
        verdict, detail = reader_verdict(c, args)
        ok = verdict == "caught"
        c.record("checkpoint", "corruption", ok, f"{os.path.basename(victim)} ({what}): {verdict} {detail}",
                 note="refused by --resume (checksums in the checkpoint's manifest.json)")
        shutil.rmtree(d, ignore_errors=True)
    if c.harmless and ("checkpoint", "corruption") in c.rows:
        c.rows[("checkpoint", "corruption")][2] += (f"; {c.harmless} damaged only manifest metadata that loading "
                                                    "does not use (files, sizes, checksums intact): loaded, as they should")


# ------------------------------------------------------------------ two writers
def wait_for(path, p, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and p.poll() is None:
        if os.path.exists(path):
            return True
        time.sleep(0.005)
    return False


def stop_holder(lock, first):
    """SIGSTOPs the process that holds `lock` and returns its pid, so that the lock stays held however
    quickly the job would end; None when the job let go first. A holder unlinks the lock file before
    it lets go, so a file that still exists once its holder is stopped is still held."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and first.poll() is None:
        try:
            holder = open(lock).read().strip()
        except FileNotFoundError:
            return None
        if holder.isdigit():
            try:
                os.kill(int(holder), signal.SIGSTOP)
            except ProcessLookupError:
                return None
            if os.path.exists(lock):
                return int(holder)
            os.kill(int(holder), signal.SIGCONT)
            return None
        time.sleep(0.001)
    return None


def writer_trials(c, inputs, refs):
    for name, spec in jobs(c, inputs).items():
        ref, _ = refs[name]
        for trial in range(max(1, c.trials // 4)):
            out = os.path.join(c.work, "writers", f"{name}-{trial}")
            first = subprocess.Popen([str(a) for a in command(c, spec, out)], env=ENV, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
            lock = os.path.join(out, ".lock")
            holder = stop_holder(lock, first) if wait_for(lock, first) else None
            if holder is None:
                first.communicate()
                c.record(name, "second writer", True, note="(a run that ended before the second started counts)")
                shutil.rmtree(out, ignore_errors=True)
                continue
            try:
                r = run(command(c, spec, out))
            finally:
                os.kill(holder, signal.SIGCONT)
            _, err = first.communicate()
            why = []
            if r.returncode != 1 or out not in r.stderr or "in use by another process" not in r.stderr:
                why.append(f"second run: exit {r.returncode}: {r.stderr[-300:]}")
            elif f"pid {holder}" not in r.stderr:
                why.append(f"the refusal does not name the holder (pid {holder}): {r.stderr[-300:]}")
            if first.returncode != 0:
                why.append(f"the first run failed: exit {first.returncode}: {err[-300:]}")
            else:
                why.append(differences(ref, out))
            why = "; ".join(w for w in why if w)
            c.record(name, "second writer", not why, why,
                     note="refused with exit 1 naming the directory and pid (the holder stopped meanwhile)")
            shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------------ MPI: a rank killed
def rank_pids(marker):
    """{rank: pid} of the processes whose command line names `marker`."""
    ranks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if marker.encode() not in open(f"/proc/{pid}/cmdline", "rb").read():
                continue
            env = dict(kv.split(b"=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in kv)
            if b"OMPI_COMM_WORLD_RANK" in env:
                ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
        except (OSError, ValueError):
            pass
    return ranks


def where_waiting(pid):
    """A process's state, the kernel function it sleeps in and its system call number (/proc), e.g.
    "S ep_poll syscall 232"; a running one reads "R 0 …"."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        wchan = open(f"/proc/{pid}/wchan").read() or "-"
        syscall = open(f"/proc/{pid}/syscall").read().split(" ", 1)[0].strip()
        return f"{state} {wchan} syscall {syscall}"
    except OSError:
        return "gone"


def mpi_jobs(c, inputs):
    """The 4-rank runs whose ranks are killed: data parallel BERT and GPT, and two 3D grids (Megatron's
    tensor x pipeline x data; --grad-accum 2 so that a pipeline has micro-batches to overlap)."""
    bert = jobs(c, inputs)["bert_pretrain"]
    gpt = ["gpt_pretrain", "--data", inputs["gpt"], "--seq-len", 32, *bert[bert.index("--model"):]]
    grid = lambda t, p: ["--tensor-parallel", t, "--pipeline-parallel", p, "--grad-accum", 2]  # noqa: E731
    all_jobs = {
        "bert_pretrain -np 4": ["mpirun", "-np", 4, *bert],
        "gpt_pretrain -np 4": ["mpirun", "-np", 4, *gpt],
        "bert_pretrain -np 4 tensor 2 x pipeline 2": ["mpirun", "-np", 4, *bert, *grid(2, 2)],
        "gpt_pretrain -np 4 pipeline 2 x data 2": ["mpirun", "-np", 4, *gpt, *grid(1, 2)],
    }
    if c.short:  # CI: the data-parallel BERT run only; each other one costs ~7 s on 2 busy cores (mpirun x 4)
        return {"bert_pretrain -np 4": all_jobs["bert_pretrain -np 4"]}
    return all_jobs


def losses(log_dir):
    """{step: the metrics.jsonl line's loss fields} (JSON keeps doubles round-trip exact)."""
    out = {}
    path = os.path.join(log_dir, "metrics.jsonl")
    if os.path.exists(path):
        for line in open(path):
            j = json.loads(line)
            if not j.get("eval"):
                out[j["step"]] = {k: v for k, v in j.items() if k.endswith("loss")}
    return out


def mpi_trials(c, inputs, refs):
    for name, base in mpi_jobs(c, inputs).items():
        ref = os.path.join(c.work, "ref", name.replace(" ", "_"))
        spec = [*base, "--log-dir", ref + "-log"]
        start = time.monotonic()
        must(command(c, spec, ref))
        seconds = time.monotonic() - start
        want = losses(ref + "-log")
        killed_mid_run = compared_steps = 0
        for trial in range(c.trials):
            # The data-parallel BERT run keeps the draws it had when it was the only one.
            rng = c.rng("mpi", name, trial) if name != "bert_pretrain -np 4" else c.rng("mpi", trial)
            out = os.path.join(c.work, "mpi", f"{name.replace(' ', '_')}-{trial}")
            victim_rank = rng.randrange(4)
            p = subprocess.Popen([str(a) for a in command(c, [*base, "--log-dir", out + "-log0"], out)], env=ENV,
                                 start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 errors="replace")
            time.sleep(rng.uniform(0.2, 0.9) * seconds)
            ranks = rank_pids(out)
            why = ""
            killed = p.poll() is None and victim_rank in ranks
            killed_mid_run += killed
            if killed:
                os.kill(ranks[victim_rank], signal.SIGKILL)
                try:
                    text, _ = p.communicate(timeout=30)
                    left = rank_pids(out)
                    if left:
                        why = f"ranks {sorted(left)} still run after mpirun ended"
                    elif p.returncode == 0 or f"rank {victim_rank}" not in text:
                        why = f"exit {p.returncode}, the output does not name rank {victim_rank}: {text[-400:]}"
                except subprocess.TimeoutExpired:
                    # Where the others wait, and what mpirun said, so that a hang can be told apart.
                    waits = {r: where_waiting(pid) for r, pid in sorted(rank_pids(out).items())}
                    why = f"the job still ran 30 s after rank {victim_rank} was killed; ranks left {waits}"
            else:
                p.communicate()
            stop_everything_mentioning(out)
            if why.startswith("the job still ran"):
                p.kill()
                try:
                    why += f"; mpirun's output: {p.communicate(timeout=10)[0][-400:]!r}"
                except subprocess.TimeoutExpired:
                    why += "; mpirun did not end when killed"
            r = run(command(c, [*base, "--log-dir", out + "-log1"], out, resume=True))
            if r.returncode:
                why += f" --resume exit {r.returncode}: {r.stderr[-300:]}"
            else:
                why += differences(ref, out)
                # The steps the resumed run trained: the uninterrupted run's losses, bit for bit.
                got = losses(out + "-log1")
                compared_steps += len(got)
                bad = [s for s in got if got[s] != want.get(s)]
                if bad:
                    why += f" resumed losses differ at steps {bad[:5]}: {got[bad[0]]} vs {want.get(bad[0])}"
            c.record(name, "rank SIGKILL + resume", not why, why.strip(),
                     note=f"rank U{{0..3}} at U[0.2, 0.9] x {seconds:.1f} s ({killed_mid_run} killed mid-run); "
                          f"ended within 30 s, rank named; checkpoints and the {compared_steps} resumed steps' "
                          "losses bitwise")
            if not why:
                for d in (out, out + "-log0", out + "-log1"):
                    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("faults", nargs="*", default=[],
                    help="kill diskfull corrupt writers mpi net fuzz (default: all but fuzz)")
    ap.add_argument("--short", action="store_true", help="a few trials each on small inputs (CI)")
    ap.add_argument("--trials", type=int, default=None, help="trials per job and fault (default 20; --short: 2)")
    ap.add_argument("--corrupt-trials", type=int, default=None, help="corrupt: trials per shard kind (default 1000; --short: --trials)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hours", type=float, default=1.0, help="fuzz: campaign length")
    ap.add_argument("--table", help="append the result table to this file")
    a = ap.parse_args()
    faults = a.faults or ["kill", "diskfull", "corrupt", "writers", "mpi", "net"]
    unknown = set(faults) - {"kill", "diskfull", "corrupt", "writers", "mpi", "net", "fuzz"}
    if unknown:
        ap.error(f"unknown fault kind(s): {sorted(unknown)}")
    build = os.environ.get("PRETRAIN_BUILD_DIR", os.path.join(SRC, "build"))
    trials = a.trials or (2 if a.short else 20)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pretrain-chaos-") as work:
        c = Campaign(build, work, a.seed, trials, a.short, a.corrupt_trials)
        inputs = {}
        if set(faults) - {"fuzz"}:
            inputs = make_inputs(c)
            refs = {}
            if set(faults) - {"fuzz", "net"}:  # the net kind runs its own jobs
                refs = {name: reference(c, inputs, name) for name in jobs(c, inputs)}
        for fault in faults:
            print(f"chaos: {fault} ({trials} trials)", flush=True)
            if fault == "fuzz":
                r = subprocess.run(["bash", os.path.join(SRC, "scripts", "fuzz.sh"), "--campaign", str(a.hours)])
                c.record("fuzz targets", "fuzz campaign", r.returncode == 0, f"scripts/fuzz.sh exit {r.returncode}")
                continue
            if fault == "net":
                chaos_net.net_trials(c, inputs, sys.modules[__name__])
                continue
            {"kill": kill_trials, "diskfull": diskfull_trials, "corrupt": corrupt_trials, "writers": writer_trials,
             "mpi": mpi_trials}[fault](c, inputs, refs)
    text = (f"chaos.sh {' '.join(sys.argv[1:])}: seed {a.seed}, {time.monotonic() - start:.0f} s, "
            f"{time.strftime('%Y-%m-%d')}\n\n{c.table()}\n")
    print(text)
    if a.table:
        with open(a.table, "a") as f:
            f.write(text + "\n")
    if c.findings:
        print("FINDINGS:\n  " + "\n  ".join(c.findings))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
