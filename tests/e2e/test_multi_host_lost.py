"""A host lost in the middle of a job launched as users do (`scripts/run_multi_node.sh --hostfile`,
2 hosts of tests/e2e/hosts.py, one BERT data-parallel rank each): the second host's link goes down
after the first steps. mpirun hears of it through TCP keepalive on its channel to that host's
daemon, which run_multi_node.sh sets so that the job ends within a minute (OpenMPI's defaults
wait 8 minutes; measured here: still running 120 s after the loss). The test asserts that the
job ends within 90 s of the loss, fails (exit non-zero, its log kept as run1.log.failed), names
the lost host, and leaves no process on either host."""
import glob
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import hosts as hh  # noqa: E402
import mpi_harness as h  # noqa: E402

RUN_MULTI_NODE = os.path.join(os.environ["PRETRAIN_SOURCE_DIR"], "scripts", "run_multi_node.sh")
WITHIN = 90  # seconds from the loss: run_multi_node.sh's keepalive gives up 30 to 60 s after it, and a busy machine


def steps_logged(log_dir):
    try:
        with open(os.path.join(log_dir, "metrics.jsonl")) as f:
            return f.read().count("\n")
    except FileNotFoundError:
        return 0


def left(hosts):
    return {ns: out for ns in hosts.namespaces
            if (out := subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split())}


def main():
    h.require_mpirun()
    with cu.tempdir() as tmp, hh.hosts_or_skip(2, slots=1, shared=[tmp]) as hosts:
        shards = cu.sample_shards(tmp, bert_dupe=2)["bert"]
        metrics = os.path.join(tmp, "metrics")
        logs = os.path.join(tmp, "logs")
        command = hosts.on("node0", RUN_MULTI_NODE, "--hostfile", hosts.hostfile, "--data", shards, "--model", "bert",
                           "--model-size", "tiny", "--batch-size", 4, "--steps", 100000, "--runs", 1, "--device", "cpu",
                           "--cases", "2n1g", "--log-root", logs, "--build-dir", cu.build_dir(),
                           "--mpi-args", " ".join(hosts.mca()), "--", "--log-dir", metrics)
        p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                             env=hosts.mpi_env(), start_new_session=True)
        try:
            # Training across both hosts first: two steps in metrics.jsonl.
            deadline = time.monotonic() + 120
            while steps_logged(metrics) < 2:
                if p.poll() is not None:
                    cu.fail(f"the 2-host run ended before training (exit {p.returncode}):\n{p.communicate()[0][-2000:]}")
                if time.monotonic() > deadline:
                    cu.fail("the 2-host run did not train 2 steps in 120 s")
                time.sleep(0.2)
            subprocess.run(["ip", "-n", hosts.namespaces[1], "link", "set", "eth0", "down"], check=True)
            lost = time.monotonic()
            try:
                out, _ = p.communicate(timeout=WITHIN)
            except subprocess.TimeoutExpired:
                cu.fail(f"run_multi_node.sh still running {WITHIN} s after node1's link went down")
            took = time.monotonic() - lost
        finally:
            if p.poll() is None:
                hosts.kill_all()
                p.kill()
        failed = glob.glob(os.path.join(logs, "bert", "*", "2n1g", "run1.log.failed"))
        log = open(failed[0]).read() if failed else ""
        if p.returncode == 0 or not failed or "node1" not in log or "lost communication" not in log:
            h.fail(f"exit {p.returncode}, run1.log.failed {'kept' if failed else 'missing'}, expected the lost node1 "
                   f"named:\n{out[-1500:]}\n{log[-1500:]}")
        else:
            print(f"node1 lost after {steps_logged(metrics)} steps: run_multi_node.sh ended {took:.0f} s later "
                  f"(exit {p.returncode}), its log naming the host:\n  "
                  + "\n  ".join(line for line in log.splitlines() if "daemon" in line))
        end = time.monotonic() + 15
        while left(hosts) and time.monotonic() < end:
            time.sleep(0.2)
        if left(hosts):
            h.fail(f"processes left after the job ended: {left(hosts)}")
    h.finish()


if __name__ == "__main__":
    main()
