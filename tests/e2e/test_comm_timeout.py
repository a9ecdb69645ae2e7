"""The watchdog for stalled collectives (common/comm_watchdog.h) with the real tools under mpirun
(ranks oversubscribed on this machine's cores, loopback only):

- bert_pretrain on 2 ranks, --comm-timeout 5, checkpoints every 10 steps: rank 0 stopped (SIGSTOP)
  mid-run. Rank 1's watchdog ends the job within the timeout + 10 s, exit non-zero, its message
  naming itself, its host, the collective, the group and the step. The last checkpoint is whole
  (`latest` names a complete step directory) and --resume from it gives the uninterrupted run's
  losses bitwise, leaving no temp directory.
- make-pretraining-shards and wikiprep on 2 ranks, --comm-timeout 3, rank 1 stopping itself as a
  stage begins (PRETRAIN_FAULT=1:STAGE:stop): rank 0's watchdog ends the job, naming the stage.
- Every tool run under mpirun lists --comm-timeout in its --help, with its default."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402
from mpi_harness import fail  # noqa: E402

HOST = socket.gethostname()
MARGIN = 10  # seconds past the timeout: the watchdog wakes every second, then mpirun ends the ranks


def rank_pid(launch, rank):
    """The pid of this launch's world rank `rank` (ctest may run other tests' ranks beside it)."""
    for pid in h.descendants(launch.pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if env.get(b"OMPI_COMM_WORLD_RANK") == str(rank).encode():
            return pid
    return None


def wait_gone(pid, seconds=20):
    """mpirun may return while the rank it killed is still going away."""
    end = time.monotonic() + seconds
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
        time.sleep(0.05)


def timed_out(what, out, rank, returncode, waited, timeout, where):
    """Checks a job the watchdog ended: exit non-zero, within the timeout + MARGIN, `rank`'s message
    naming its host, an operation over a group, and `where` (a regex: the step or stage)."""
    pattern = (rf"error: rank {rank} of 2 \(host {re.escape(HOST)}\): (.+?) over (the .+?) has waited (\d+\.\d) s "
               rf"{where}, past --comm-timeout {timeout}: a peer is stopped, hung or unreachable")
    m = re.search(pattern, out)
    if returncode == 0 or not m or waited > timeout + MARGIN:
        fail(f"{what}: exit {returncode} after {waited:.1f} s (timeout {timeout} s), the watchdog's message "
             f"(/{pattern}/) {'found' if m else 'missing'}:\n{out[-3000:]}")
        return None
    print(f"{what}: the job ended {waited:.1f} s after the stall (exit {returncode}): {m.group(0)}")
    return m


def trainer_args(shards, log_dir, *extra):
    return [cu.tool("bert_pretrain"), "--data", shards, "--model", "tiny", "--dropout", 0, "--batch-size", 4,
            "--max-steps", 30, "--lr", "1e-3", "--warmup", 2, "--seed", 7, "--threads", 1, "--log-interval", 1,
            "--save-interval", 10, "--log-dir", log_dir, *extra]


def trainer_stalls(tmp, shards):
    reference = h.run(h.mpirun(2, *trainer_args(shards, os.path.join(tmp, "ref-log"), "--checkpoint-dir",
                                                os.path.join(tmp, "ref-ckpt"))))
    ref = [m["loss"] for m in h.metrics(os.path.join(tmp, "ref-log"))]
    if len(ref) != 30:
        return fail(f"the uninterrupted run logged {len(ref)} steps, not 30:\n{reference.stdout[-1500:]}")

    ckpt = os.path.join(tmp, "ckpt")
    args = [str(a) for a in h.mpirun(2, *trainer_args(shards, os.path.join(tmp, "stalled-log"), "--checkpoint-dir",
                                                      ckpt, "--comm-timeout", 5))]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=h.ENV)
    seen = []
    for line in p.stdout:  # rank 0 logs; stop it once it is past the step-10 checkpoint
        seen.append(line)
        if re.match(r"step +12/", line):
            break
    victim = rank_pid(p, 0)
    if victim is None:
        h.kill(p)
        return fail(f"could not find rank 0's process; the run said:\n{''.join(seen)[-1500:]}")
    os.kill(victim, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        rest, _ = p.communicate(timeout=5 + 60)
    except subprocess.TimeoutExpired:
        os.kill(victim, signal.SIGKILL)
        h.kill(p)
        return fail("bert_pretrain with rank 0 stopped still ran 65 s later (--comm-timeout 5)")
    waited = time.monotonic() - stopped
    wait_gone(victim)
    m = timed_out("bert_pretrain, rank 0 stopped", rest, 1, p.returncode, waited, 5,
                  r"at step (\d+) \((train|checkpoint)\)")
    if m and int(m.group(4)) < 13:
        fail(f"the watchdog names step {m.group(4)}; rank 0 was stopped after step 12")

    # The last checkpoint is whole, and --resume from it is the uninterrupted run, bitwise.
    with open(os.path.join(ckpt, "latest")) as f:
        latest = f.read().strip()
    if not os.path.exists(os.path.join(ckpt, latest, "manifest.json")):
        return fail(f"`latest` names {latest}, which has no manifest.json: {sorted(os.listdir(ckpt))}")
    done = int(latest.split("-")[1])
    resumed = h.run(h.mpirun(2, *trainer_args(shards, os.path.join(tmp, "resumed-log"), "--checkpoint-dir", ckpt,
                                              "--resume", "--comm-timeout", 5)))
    got = [m["loss"] for m in h.metrics(os.path.join(tmp, "resumed-log"))]
    if got != ref[done:]:
        fail(f"resumed from {latest}: losses {got} are not the uninterrupted run's {ref[done:]}")
    else:
        print(f"resumed from {latest} (the last checkpoint): steps {done + 1}..30 bitwise the uninterrupted run's")
    left = [n for n in os.listdir(ckpt) if ".tmp-" in n]
    if left:
        fail(f"temp files left in the checkpoint directory after the resumed run: {left}")
    if "removed" in resumed.stdout + resumed.stderr and not left:
        print("the resumed run removed what the stopped run left half-written")


def datagen_stalls(tmp, shards):
    vocab = os.path.join(tmp, "wordpiece", "vocab.txt")
    for tool, args, stage in (
            ("make-pretraining-shards", ["-i", cu.test_data("sample-docs.jsonl"), "--tokenizer", vocab, "--seq-len", 64,
                                         "--max-predictions", 10, "-o", os.path.join(tmp, "shards-stalled")],
             "tokenize"),
            ("wikiprep", [cu.test_data("sample-dump.xml"), "-o", os.path.join(tmp, "docs-stalled")], "part")):
        start = time.monotonic()
        r = h.run(h.mpirun(2, "-x", "PRETRAIN_FAULT", cu.tool(tool), *args, "--threads", 1, "--comm-timeout", 3),
                  rc=None, env={"PRETRAIN_FAULT": f"1:{stage}:stop"}, timeout=60)
        timed_out(f"{tool}, rank 1 stopped as stage {stage} begins", r.stdout + r.stderr, 0, r.returncode,
                  time.monotonic() - start, 3, rf"in stage {stage}")


def help_lists_the_option():
    for tool, default in (("bert_pretrain", 300), ("gpt_pretrain", 300), ("make-pretraining-shards", 1800),
                          ("wikiprep", 1800)):
        text = subprocess.run([cu.tool(tool), "--help"], capture_output=True, text=True).stdout
        m = re.search(r"--comm-timeout[^\n]*(?:\n {10,}[^\n]*)*", text)
        if not m or str(default) not in m.group(0):
            fail(f"{tool} --help: no --comm-timeout with its default {default}:\n{m.group(0) if m else text[-1500:]}")
    print("--comm-timeout in the help of the trainers (300 s) and the data tools (1800 s)")


def main():
    h.require_mpirun()
    help_lists_the_option()
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp, bert_dupe=2)["bert"]
        datagen_stalls(tmp, shards)
        trainer_stalls(tmp, shards)
    h.finish()


if __name__ == "__main__":
    main()
