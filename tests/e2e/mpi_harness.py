"""Shared by the e2e tests that run our tools under mpirun (ranks oversubscribed on this machine's
cores, loopback only): the launch and its environment, a run that fails the test on a wrong exit
or a hang, a rank that fails alone, the files a run wrote and the same files at several rank
counts, trainer runs and their metrics.jsonl, and a test's list of failures."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

# Every run's environment: mpirun as root, its ranks talking over loopback only. In the
# environment rather than in mpirun's flags, so that a launch with flags of its own (-x) has them.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
failures = []


def fail(message):
    """Records a failed check; the test goes on and finish() reports them all."""
    print(f"FAIL: {message}")
    failures.append(message)


def finish():
    """Ends the test: exit 1 naming the checks that failed, or OK."""
    cu.finish(failures)


def require_mpirun(shared_data=None):
    """Skips the test (exit 77) where Open MPI is not installed or, when the test reads the shared
    data (shared_data says what of it), where that is not found. Returns the shared data's path."""
    if not shutil.which("mpirun"):
        cu.skip("mpirun not installed (openmpi-bin)")
    data = cu.shared_data()
    if shared_data and not data:
        cu.skip(f"shared data not found ({shared_data})")
    return data


def mpirun(np, *args):
    """The command line that runs args on np ranks; for np 1, args alone, without mpirun."""
    return ["mpirun", "--oversubscribe", "-np", np, *args] if np > 1 else list(args)


def descendants(root):
    """The pids below root in the process tree (mpirun's ranks sit under its orted or itself)."""
    parent = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found


def kill(p):
    """Kills a launch (a Popen) and every process under it: mpirun's ranks outlive a killed mpirun."""
    for pid in [*descendants(p.pid), p.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.communicate()


def run(args, rc=0, env=None, timeout=600):
    """Runs a command line (mpirun(...) or a tool alone) in ENV plus env; its output is text. The
    test fails when it runs past timeout (a rank hung) or, unless rc is None, when it succeeds
    where rc says it fails or the other way round (rc 0: it succeeds)."""
    args = [str(a) for a in args]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                         env=dict(ENV, **(env or {})))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(p)
        cu.fail(f"hung ({timeout} s): {' '.join(args)}")
    if rc is not None and (rc == 0) != (p.returncode == 0):
        cu.fail(f"exit {p.returncode}, expected {'success' if rc == 0 else 'a failure'}: {' '.join(args)}\n"
                f"{out[-2000:]}{err[-2000:]}")
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def rank_fails_alone(what, args, seconds=30):
    """Runs a trainer's command line on 2 ranks with rank 1 failing at step 3 (PRETRAIN_FAULT=1:3,
    an error only it sees): the job must end within `seconds`, naming the rank and the step,
    instead of leaving the other rank waiting in its next collective forever."""
    args = [str(a) for a in mpirun(2, "-x", "PRETRAIN_FAULT", *args)]
    start = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                         env=dict(ENV, PRETRAIN_FAULT="1:3"))
    try:
        out, _ = p.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        kill(p)
        return fail(f"{what}: the job still ran {seconds} s after rank 1 failed")
    if p.returncode == 0 or "error: rank 1: step 3" not in out:
        fail(f"{what}: exit {p.returncode}, no 'error: rank 1: step 3' in:\n{out[-1500:]}")
    else:
        print(f"{what} at step 3: the job ended in {time.monotonic() - start:.1f} s (exit {p.returncode})")


def files(out, volatile=()):
    """Every file under out (hidden ones too) as {path relative to out: bytes}, a manifest.json as
    its JSON without created_by and the `volatile` fields, given as key paths such as
    ("stats", "seconds"): what a run wrote, not when or how it ran."""
    found = {}
    for root, _, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, out)
            if name == "manifest.json":
                with open(path) as f:
                    m = json.load(f)
                for *parents, key in [("created_by",), *volatile]:
                    node = m
                    for p in parents:
                        node = node.get(p, {})
                    node.pop(key, None)
                found[rel] = m
            else:
                with open(path, "rb") as f:
                    found[rel] = f.read()
    return found


def same_at(name, counts, run_at, enough):
    """run_at(np) runs the job on np ranks and returns files() of what it wrote: the same at every
    count of counts, or the test fails naming the files that differ. enough(files) says whether
    the first run wrote enough to compare (shards: equal outputs without any prove nothing).
    Returns the first run's files."""
    ref = None
    for np in counts:
        got = run_at(np)
        if ref is None:
            ref = got
            if not enough(ref):
                cu.fail(f"{name}: -np {np} wrote too little to compare: {sorted(ref)}")
        elif got != ref:
            cu.fail(f"{name}: -np {np} differs from -np {counts[0]} in {cu.differences(ref, got)}")
    print(f"{name}: the same {len(ref)} files at N = {', '.join(map(str, counts))}")
    return ref


def metrics(log_dir):
    """A trainer run's metrics.jsonl records."""
    with open(os.path.join(log_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def train_bert_tiny(shards, log_dir, *extra, steps, ranks=1, batch=4, rc=0, env=None):
    """bert_pretrain's tiny model on shards for `steps` steps of 2 micro-batches of `batch` per
    rank, lr 1e-3 after 2 warmup steps, seed 7, dropout off (its masks depend on the data rank,
    and the tests compare the ranks' losses with one process's); one thread per rank under
    mpirun, two in one process. Returns its metrics.jsonl records."""
    args = [cu.tool("bert_pretrain"), "--data", shards, "--model", "tiny", "--dropout", 0, "--batch-size", batch,
            "--grad-accum", 2, "--max-steps", steps, "--lr", "1e-3", "--warmup", 2, "--seed", 7,
            "--log-dir", log_dir, *extra, "--threads", 1 if ranks > 1 else 2]
    run(mpirun(ranks, *args), rc=rc, env=env)
    return metrics(log_dir)
