"""The chaos campaign's `net` kind (scripts/chaos.py; docs/reliability.md): faults on the network
between the hosts of a job, on real hosts made as network namespaces (tests/e2e/hosts.py).

The job: bert_pretrain data parallel across 2 hosts, one rank each, launched as users launch it
(`scripts/run_multi_node.sh --hostfile`), checkpointing as it goes. Each trial waits for a random
number of its steps, then:

  link down         one host's own interface goes down (node0's, where mpirun runs, or node1's) and
                    comes back after U[1, 15] s: a short cut is ridden out, a long one ends the job
  host killed       every process on node1 is SIGKILLed (`ip netns pids`), as a machine that dies
  100% loss         nothing passes between node1 and the switch for U[1, 3.5] s, every interface up
                    (tc netem loss 100%, or the switch's port disabled where the kernel lacks netem)
  watchdog first    node1's link down with mpirun's keepalive left at run_multi_node.sh's 30+5x6 s
                    and --comm-timeout 5: rank 0's watchdog ends it, and run_multi_node.sh ends the
                    mpirun that then waits on the lost host (--abort-grace)

Settings (what bounds a trial): mpirun's keepalive on its channel to each host's daemon 5 s of
quiet then 3 probes 2 s apart (--mca oob_tcp_keepalive_*: a host that went silent is named within
5 + 2x3 = 11 s; an outage shorter than 2x3 = 6 s is ridden out), and --comm-timeout 20 (above the
11 s, so that mpirun, which names the lost host, ends the job before a watchdog, which names only
its own; and above a ridden-out outage's stall, TCP's retransmission backing off to ~2x the outage).

Every trial passes only when: the job never hangs (past NET_HARD_S after the fault everything on
every host is killed and the trial fails); a job that ends does so within NET_ENDS_WITHIN of the
fault, exit non-zero, its log naming the lost host (OpenMPI's "lost communication with a remote
daemon … on node node1", or a watchdog's "rank R of 2 (host node1)") — the watchdog-first trial
instead needs the watchdog's line (rank, host, operation, step) and the end within its timeout and
run_multi_node.sh's grace; no process is left on any host once the network is back (NET_LEFT_S);
the checkpoint directory holds only complete step directories (each file at its manifest's size),
`latest` naming one, and no temp file (latest.tmp-PID) — a save cut short (rank 0 ended by mpirun
mid-write when the other host died) may leave its step-N.tmp-PID directory, which `latest` never
names; then --resume on the surviving host (node0, the same 2 ranks) removes such directories
(the trainer does, holding the directory's lock) and ends with the uninterrupted run's checkpoints
and, for the steps it trains, its losses, bitwise. A job that rode the fault out must
have exactly the uninterrupted run's checkpoints and losses. A host killed must end the job; a
short loss must be ridden out; a link down may do either.
"""
import os
import re
import signal
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_MULTI_NODE = os.path.join(SRC, "scripts", "run_multi_node.sh")
KEEPALIVE = (5, 2, 3)  # mpirun's oob_tcp_keepalive_time, _intvl, _probes
COMM_TIMEOUT = 20
WATCHDOG_FIRST_TIMEOUT = 5  # the watchdog-first trials' --comm-timeout, with run_multi_node.sh's keepalive
ABORT_GRACE = 5             # their run_multi_node.sh --abort-grace
NET_ENDS_WITHIN = COMM_TIMEOUT + 15  # from the fault to the job's end, when it ends
NET_HARD_S = 150            # a faulted run still going this long after its fault hangs
NET_LEFT_S = 30             # processes left on a host this long after the job and the network are back
FAULTS = {  # name in the table -> the trial's function
    "link down U[1, 15] s": "link_down",
    "host killed (all its processes)": "host_killed",
    "100% loss U[1, 3.5] s": "loss",
    "link down, watchdog first": "watchdog_first",
}
JOB = "bert_pretrain 2 hosts x 1 rank"
SHARDS_JOB = "make-pretraining-shards 2 hosts x 1 rank"


def keepalive_flags(keepalive):
    """mpirun's flags for (time, interval, probes) of TCP keepalive on its daemons' channels; () for none."""
    return [x for k, v in zip(("time", "intvl", "probes"), keepalive or ())
            for x in ("--mca", f"oob_tcp_keepalive_{k}", v)]


def names_lost_host(text, host="node1"):
    """OpenMPI's "lost communication with a remote daemon … Remote daemon: … on node HOST", or a
    watchdog's "error: rank R of N (host HOST)" (which only a rank on that host can print)."""
    return re.search(rf"lost communication with a remote daemon.*?Remote daemon: \S+ on node {host}\b", text, re.S) \
        or re.search(rf"error: rank \d+ of \d+ \(host {host}\)", text)


def steps_logged(path):
    try:
        with open(path) as f:
            return f.read().count("\n")
    except FileNotFoundError:
        return 0


def run_log(log_root):
    """run_multi_node.sh's log of the run (rank 0's output and mpirun's): run1.log or run1.log.failed."""
    for d, _, files in os.walk(log_root):
        for name in ("run1.log.failed", "run1.log", "run1.log.partial"):
            if name in files:
                return open(os.path.join(d, name), errors="replace").read()
    return ""


def not_training(log):
    """The log's lines but the trainer's step and checkpoint lines: what mpirun and errors said."""
    return "\n".join(line for line in log.splitlines()
                     if not line.startswith("step ") and "info: checkpoint" not in line)


def checkpoint_problems(ckpt, temps=None):
    """'' when ckpt holds only complete step directories (each file its manifest lists at its size),
    `latest` naming one of them, and no temp directory or file; else what is wrong. With `temps` (a
    list), the temp directories a killed writer left (step-N.tmp-PID: rank 0 ended mid-save, which
    `latest` never names and the next run removes) are appended to it instead of being problems."""
    import json
    if not os.path.isdir(ckpt):
        return ""
    problems, steps = [], set()
    for name in sorted(os.listdir(ckpt)):
        path = os.path.join(ckpt, name)
        if name == ".lock":  # flock(2)'s file: the kernel let go with the process; the next run takes it
            continue
        if ".tmp-" in name:
            if temps is not None and re.fullmatch(r"step-\d{8}\.tmp-\d+", name):
                temps.append(name)
            else:
                problems.append(f"temp {name} left")
        elif re.fullmatch(r"step-\d{8}", name):
            try:
                manifest = json.load(open(os.path.join(path, "manifest.json")))
                for shard in manifest["shards"]:
                    size = os.path.getsize(os.path.join(path, shard["file"]))
                    if size != shard["bytes"]:
                        problems.append(f"{name}/{shard['file']} is {size} bytes, its manifest says {shard['bytes']}")
                steps.add(name)
            except (OSError, ValueError, KeyError) as e:
                problems.append(f"{name} is not whole: {e}")
        elif name != "latest":
            problems.append(f"unexpected {name}")
    if steps:
        latest_file = os.path.join(ckpt, "latest")
        latest = open(latest_file).read().strip() if os.path.exists(latest_file) else ""
        if latest not in steps:
            problems.append(f"`latest` names {latest!r}, not one of the complete {sorted(steps)}")
    return "; ".join(problems)


class NetCampaign:
    def __init__(self, c, inputs, hosts, chaos):
        self.c, self.inputs, self.hosts, self.chaos = c, inputs, hosts, chaos
        self.differences = chaos.differences
        self.losses_of = lambda metrics: chaos.losses(os.path.dirname(metrics))
        self.steps = 40 if c.short else 100
        self.save_interval = 4 if c.short else 5
        self.outcomes = {}  # fault -> {"rode": n, "ended": [seconds…], "temp": n}

    # ------------------------------------------------------------ running the job
    def launch(self, name, hostfile, case, *extra, ckpt=None, keepalive=KEEPALIVE, comm_timeout=COMM_TIMEOUT):
        """run_multi_node.sh on node0 for one run of the job (checkpoints in ckpt, default <name>-ckpt);
        (Popen, checkpoint dir, metrics file, log root)."""
        out = os.path.join(self.c.work, "net", name)
        ckpt, metrics, logs = ckpt or out + "-ckpt", out + "-metrics", out + "-logs"
        os.makedirs(metrics, exist_ok=True)
        mpi = [*self.hosts.mca(), *keepalive_flags(keepalive)]
        command = self.hosts.on(
            "node0", RUN_MULTI_NODE, "--hostfile", hostfile, "--data", self.inputs["bert"], "--model", "bert",
            "--model-size", "tiny", "--batch-size", 4, "--steps", self.steps, "--runs", 1, "--device", "cpu",
            "--cases", case, "--log-root", logs, "--build-dir", os.path.abspath(self.c.build),
            "--abort-grace", ABORT_GRACE, "--mpi-args", " ".join(map(str, mpi)), "--",
            "--dropout", 0, "--seed", 3, "--save-interval", self.save_interval, "--checkpoint-dir", ckpt,
            "--log-dir", metrics, "--comm-timeout", comm_timeout, *extra)
        p = subprocess.Popen([str(a) for a in command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", env=self.hosts.mpi_env(), start_new_session=True)
        return p, ckpt, os.path.join(metrics, "metrics.jsonl"), logs

    def whole_run(self, name, hostfile, case, *extra, ckpt=None, limit=300):
        """A run to its end (the reference, a resume): '' or why it failed; its checkpoint dir and metrics."""
        p, ckpt, metrics, logs = self.launch(name, hostfile, case, *extra, ckpt=ckpt)
        try:
            out, _ = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            self.kill_everything(p)
            return f"{name}: still running after {limit} s", ckpt, metrics
        if p.returncode != 0:
            return f"{name}: exit {p.returncode}: {not_training(run_log(logs))[-600:]}", ckpt, metrics
        return "", ckpt, metrics

    def kill_everything(self, p):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.hosts.kill_all()
        p.communicate()

    def processes_left(self):
        """None once no process of the job is left on any host (waiting up to NET_LEFT_S), else
        what was left, which is then killed."""
        deadline = time.monotonic() + NET_LEFT_S
        while self.left_on_hosts() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.left_on_hosts()
        if not left:
            return None
        self.hosts.kill_all()
        return f"processes left {NET_LEFT_S} s after the job ended and the network came back: {left}"

    def left_on_hosts(self):
        """{host: [command lines]} of the processes still on the hosts."""
        left = {}
        for host in self.hosts.names:
            pids = subprocess.run(["ip", "netns", "pids", self.hosts.namespace(host)], capture_output=True,
                                  text=True).stdout.split()
            lines = []
            for pid in pids:
                try:
                    lines.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:80])
                except OSError:
                    pass
            if lines:
                left[host] = lines
        return left

    def reference(self):
        self.hostfile2 = self.hosts.hostfile_of(2, 1)
        self.hostfile1 = self.hosts.hostfile_of(1, 2)  # the surviving host, with the job's 2 ranks
        why, self.ref_ckpt, metrics = self.whole_run("reference", self.hostfile2, "2n1g")
        if why:
            sys.exit(f"chaos: net: the uninterrupted 2-host run failed: {why}")
        self.ref_losses = self.losses_of(metrics)

    # ------------------------------------------------------------ one trial
    def trial(self, fault, trial):
        c, hosts = self.c, self.hosts
        rng = c.rng("net", fault, trial)
        kind = FAULTS[fault]
        name = f"{kind}-{trial}"
        after = rng.randint(3, self.steps // 2)  # steps trained before the fault
        if kind == "watchdog_first":
            p, ckpt, metrics, logs = self.launch(name, self.hostfile2, "2n1g", keepalive=None,
                                                 comm_timeout=WATCHDOG_FIRST_TIMEOUT)
        else:
            p, ckpt, metrics, logs = self.launch(name, self.hostfile2, "2n1g")
        deadline = time.monotonic() + 120
        while steps_logged(metrics) < after:
            if p.poll() is not None or time.monotonic() > deadline:
                if p.poll() is None:
                    self.kill_everything(p)
                return f"the run did not train {after} steps before the fault (exit {p.returncode}): " \
                       f"{not_training(run_log(logs))[-400:]}"
            time.sleep(0.02)

        # The fault, and when the network comes back (None: when the job has ended).
        victim, back_after = "node1", None
        if kind == "link_down":
            victim, back_after = rng.choice(["node0", "node1"]), rng.uniform(1, 15)
            hosts.set_link(victim, False)
            restore = lambda: hosts.set_link(victim, True)  # noqa: E731
        elif kind == "host_killed":
            hosts.kill_host(victim)
            restore = lambda: None  # noqa: E731
        elif kind == "loss":
            back_after = rng.uniform(1, 3.5)
            self.loss_method = hosts.set_loss(victim, True)
            restore = lambda: hosts.set_loss(victim, False)  # noqa: E731
        else:
            hosts.set_link(victim, False)
            restore = lambda: hosts.set_link(victim, True)  # noqa: E731
        fault_at = time.monotonic()
        restored = False
        while p.poll() is None:
            now = time.monotonic() - fault_at
            if not restored and back_after is not None and now >= back_after:
                restore()
                restored = True
            if now > NET_HARD_S:
                if not restored:
                    restore()
                self.kill_everything(p)
                return f"hung: still running {NET_HARD_S} s after the fault (everything killed)"
            time.sleep(0.02)
        ended = time.monotonic() - fault_at
        if not restored:
            restore()
        p.communicate()
        log = run_log(logs)
        what = f"{victim} {'link down' if 'link' in kind else kind} for {back_after:.1f} s" if back_after else victim
        why = []

        why.append(self.processes_left())  # nothing left on any host once the network is back

        outcome = self.outcomes.setdefault(fault, {"rode": 0, "ended": [], "resumed_steps": 0})
        if p.returncode == 0:
            outcome["rode"] += 1
            if kind in ("host_killed", "watchdog_first"):
                why.append(f"exit 0 after {what}: the job should have ended")
            why.append(self.same_as_reference(ckpt, self.losses_of(metrics), "the run that rode it out"))
            return "; ".join(w for w in why if w)

        outcome["ended"].append(ended)
        errors = not_training(log)
        if kind == "loss":
            why.append(f"a {back_after:.1f} s loss ended the job (exit {p.returncode}, {ended:.1f} s after it began), "
                       f"shorter than keepalive's {KEEPALIVE[1] * KEEPALIVE[2]} s of probes: {errors[-400:]}")
        if kind == "watchdog_first":
            bound = WATCHDOG_FIRST_TIMEOUT + ABORT_GRACE + 15
            if not re.search(r"error: rank \d of 2 \(host node\d\): .+ over .+ has waited [\d.]+ s at step \d+", log):
                why.append(f"no watchdog line naming the rank, host and step: {errors[-400:]}")
        else:
            bound = NET_ENDS_WITHIN
            if not names_lost_host(errors):
                why.append(f"the lost host node1 is not named (exit {p.returncode}): {errors[-500:]}")
        if ended > bound:
            why.append(f"ended {ended:.1f} s after the fault, past {bound} s")
        temps = []
        broken = checkpoint_problems(ckpt, temps)
        if broken:
            why.append(f"checkpoints after the fault: {broken}")
        outcome["temp"] = outcome.get("temp", 0) + len(temps)

        # --resume on the surviving host (node0) with the job's 2 ranks: the uninterrupted run's end.
        failed, _, metrics2 = self.whole_run(f"{name}-resumed", self.hostfile1, "1n2g", "--resume", ckpt=ckpt)
        if failed:
            why.append(f"--resume on node0: {failed}")
        else:
            got = self.losses_of(metrics2)
            outcome["resumed_steps"] += len(got)
            why.append(self.same_as_reference(ckpt, got, "--resume on node0"))
            left = checkpoint_problems(ckpt)  # the killed writer's temp directories are gone now
            if left:
                why.append(f"checkpoints after --resume: {left}")
        return "; ".join(w for w in why if w)

    def same_as_reference(self, ckpt, got, what):
        problems = []
        diff = self.differences(self.ref_ckpt, ckpt)
        if diff:
            problems.append(f"{what}: checkpoints {diff}")
        bad = [s for s in got if got[s] != self.ref_losses.get(s)]
        if bad:
            problems.append(f"{what}: losses differ at steps {bad[:5]}: {got[bad[0]]} vs {self.ref_losses.get(bad[0])}")
        if not got:
            problems.append(f"{what}: trained no step")
        return "; ".join(problems)

    # ------------------------------------------------------------ make-pretraining-shards, a link down
    def shards_spec(self):
        spec = self.chaos.jobs(self.c, self.inputs)["make-shards-bert"]
        spec[spec.index("--dupe-factor") + 1] = 10  # a few seconds on 2 hosts: a fault lands mid-run
        return spec + ["--threads", 1, "--comm-timeout", COMM_TIMEOUT]

    def shards_launch(self, out):
        """mpirun of make-pretraining-shards on 2 hosts writing `out`; its output goes to out.log."""
        shards = self.chaos.command(self.c, self.shards_spec(), out)
        command = self.hosts.mpirun(2, *keepalive_flags(KEEPALIVE), *shards)
        with open(out + ".log", "w") as log:
            return subprocess.Popen([str(a) for a in command], stdout=log, stderr=subprocess.STDOUT,
                                    env=self.hosts.mpi_env(), start_new_session=True)

    def shards_reference(self):
        """One process's output (what any rank count must write) and the 2-host run's time, checked equal."""
        self.shards_ref = os.path.join(self.c.work, "net", "shards-ref")
        r = self.chaos.run(self.hosts.on("node0", *self.chaos.command(self.c, self.shards_spec(), self.shards_ref)))
        if r.returncode:
            sys.exit(f"chaos: net: make-pretraining-shards failed: {r.stdout[-600:]}{r.stderr[-600:]}")
        out = os.path.join(self.c.work, "net", "shards-2hosts")
        start = time.monotonic()
        p = self.shards_launch(out)
        p.wait(timeout=600)
        self.shards_seconds = time.monotonic() - start
        text = open(out + ".log", errors="replace").read()
        if p.returncode or self.differences(self.shards_ref, out):
            sys.exit(f"chaos: net: make-pretraining-shards on 2 hosts: exit {p.returncode}, "
                     f"{self.differences(self.shards_ref, out)}: {text[-600:]}")

    def shards_trial(self, trial):
        """The link of node0 or node1 down at U[0.2, 0.8] of the 2-host run's time, back after U[1, 15] s."""
        rng = self.c.rng("net", "make-pretraining-shards", trial)
        out = os.path.join(self.c.work, "net", f"shards-{trial}")
        p = self.shards_launch(out)
        time.sleep(rng.uniform(0.2, 0.8) * self.shards_seconds)
        victim, back_after = rng.choice(["node0", "node1"]), rng.uniform(1, 15)
        if p.poll() is not None:
            text = open(out + ".log", errors="replace").read()
            self.shards_outcomes["before"] += 1
            return "" if not p.returncode and not self.differences(self.shards_ref, out) else \
                f"ended before the fault: exit {p.returncode}: {text[-400:]}"
        self.hosts.set_link(victim, False)
        fault_at, restored = time.monotonic(), False
        while p.poll() is None:
            now = time.monotonic() - fault_at
            if not restored and now >= back_after:
                self.hosts.set_link(victim, True)
                restored = True
            if now > NET_HARD_S:
                self.hosts.set_link(victim, True)
                self.kill_everything(p)
                return f"hung: still running {NET_HARD_S} s after {victim}'s link went down (everything killed)"
            time.sleep(0.02)
        ended = time.monotonic() - fault_at
        if not restored:
            self.hosts.set_link(victim, True)
        text = open(out + ".log", errors="replace").read()
        why = []
        why.append(self.processes_left())
        if p.returncode == 0:
            self.shards_outcomes["rode"] += 1
            why.append(self.differences(self.shards_ref, out))
            return "; ".join(w for w in why if w)
        self.shards_outcomes["ended"].append(ended)
        if "ORTE was unable to reliably start one or more daemons" in text:
            # The link went down while mpirun was still starting node1's daemon: OpenMPI 4.1 ends
            # the job saying so, naming no host (there is no job yet to lose a host of).
            self.shards_outcomes["launch"] += 1
        elif not names_lost_host(text):
            why.append(f"{victim}'s link down {back_after:.1f} s: the lost host node1 is not named "
                       f"(exit {p.returncode}): {text[-500:]}")
        if ended > NET_ENDS_WITHIN:
            why.append(f"ended {ended:.1f} s after the fault, past {NET_ENDS_WITHIN} s")
        why.append(self.chaos.listed_shards_whole(out))
        looks = self.chaos.files_that_look_complete(self.shards_ref, out)
        if looks:
            why.append(f"partial files under finished names: {looks}")
        # --resume in one process on node0 (the output is the same at any rank count).
        r = self.chaos.run(self.hosts.on("node0", *self.chaos.command(self.c, self.shards_spec(), out, resume=True)))
        why.append(f"--resume on node0: exit {r.returncode}: {r.stderr[-300:]}" if r.returncode
                   else self.differences(self.shards_ref, out))
        return "; ".join(w for w in why if w)

    def shards_note(self):
        o = self.shards_outcomes
        ended = sorted(o["ended"])
        parts = [f"{o['rode']} rode it out"] if o["rode"] else []
        if ended:
            parts.append(f"{len(ended)} ended {span(ended)} s after the fault, then --resume in one process on node0")
        if o["before"]:
            parts.append(f"{o['before']} finished before the fault")
        if o["launch"]:
            parts.append(f"{o['launch']} cut while mpirun still started node1's daemon (OpenMPI then names no host)")
        return "; ".join(parts + [f"fault at U[0.2, 0.8] x {self.shards_seconds:.1f} s",
                                  "output bytes the uninterrupted run's"])

    def note(self, fault):
        o = self.outcomes.get(fault, {"rode": 0, "ended": [], "resumed_steps": 0})
        ended = sorted(o["ended"])
        text = f"{o['rode']} rode it out" if o["rode"] or not ended else ""
        if ended:
            text += (", " if text else "") + f"{len(ended)} ended {span(ended)} s after the fault"
        text += f"; {o['resumed_steps']} resumed steps' losses bitwise" if ended else "; losses bitwise"
        if o.get("temp"):
            text += f"; {o['temp']} save(s) cut short left step-N.tmp-PID, removed by --resume"
        if FAULTS[fault] == "loss":
            text += f"; {getattr(self, 'loss_method', '')}"
        return text


def span(seconds):
    """'4.2' or '3.1–9.8 (median 5.0)' of sorted seconds."""
    if len(seconds) == 1:
        return f"{seconds[0]:.1f}"
    return f"{seconds[0]:.1f}–{seconds[-1]:.1f} (median {seconds[len(seconds) // 2]:.1f})"


def net_trials(c, inputs, chaos):
    """chaos: scripts/chaos.py's module, whose comparisons (differences, losses, listed_shards_whole)
    the trials use as its other kinds do."""
    sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
    import hosts as hh
    trials = max(1, c.trials // 2) if c.short else c.trials
    try:
        hosts = hh.Hosts(2, slots=2, shared=[c.work])
    except hh.Unavailable as e:
        for fault in FAULTS:
            c.skip(JOB, fault, f"cannot make 2 hosts as network namespaces: {e}")
        return
    with hosts:
        net = NetCampaign(c, inputs, hosts, chaos)
        net.reference()
        for fault in FAULTS:
            for trial in range(trials):
                started = time.monotonic()
                why = net.trial(fault, trial)
                print(f"  net / {fault} / trial {trial}: {'ok' if not why else 'FAIL'} in "
                      f"{time.monotonic() - started:.0f} s", flush=True)
                c.record(JOB, fault, not why, why, note=net.note(fault))
        if c.short:  # CI: the trainer only (a shard run long enough to be cut mid-way takes ~10 s a trial)
            return
        net.shards_reference()
        net.shards_outcomes = {"rode": 0, "ended": [], "before": 0, "launch": 0}
        for trial in range(trials):
            started = time.monotonic()
            why = net.shards_trial(trial)
            print(f"  net / make-pretraining-shards / trial {trial}: {'ok' if not why else 'FAIL'} in "
                  f"{time.monotonic() - started:.0f} s", flush=True)
            c.record(SHARDS_JOB, "link down U[1, 15] s", not why, why, note=net.shards_note())
