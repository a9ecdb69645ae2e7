"""scripts/plot_metrics.py on metrics.jsonl as the trainers write them (step records, eval records):
two runs, one with evaluation, give one non-empty PNG; a run given as a directory or as a file;
a file without step records, a line that is not JSON and a missing file exit 1 naming the file;
labels that do not match the runs exit 2.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SCRIPT = os.path.join(os.environ["PRETRAIN_SOURCE_DIR"], "scripts", "plot_metrics.py")
failures = []


def fail(message):
    print(f"FAIL: {message}")
    failures.append(message)


def write_run(path, steps, evals=()):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            f.write(json.dumps({"step": s, "loss": 10.0 / s, "lr": 1e-4 * min(1, s / 3), "samples_per_s": 100.0 + s,
                                "device_mb": 0.0, "host_mb": 300.0 + s, "samples": 8, "tokens": 1024}) + "\n")
            if s in evals:
                f.write(json.dumps({"step": s, "eval": True, "eval_loss": 9.0 / s}) + "\n")


def plot(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120)


def main():
    with cu.tempdir() as tmp:
        a, b = os.path.join(tmp, "a", "metrics.jsonl"), os.path.join(tmp, "b", "metrics.jsonl")
        write_run(a, 20, evals=(10, 20))
        write_run(b, 12)
        out = os.path.join(tmp, "curves.png")
        r = plot(os.path.dirname(a), b, "-o", out, "--labels", "baseline", "change")
        if r.returncode != 0 or not os.path.getsize(out) > 10000:
            fail(f"two runs: exit {r.returncode}, {r.stderr}")
        else:
            with open(out, "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail("the output is not a PNG")
            print(f"two runs (one with eval): {os.path.getsize(out)} bytes of PNG")

        empty = os.path.join(tmp, "empty.jsonl")
        with open(empty, "w") as f:
            f.write(json.dumps({"step": 5, "eval": True, "eval_loss": 1.0}) + "\n")
        broken = os.path.join(tmp, "broken.jsonl")
        with open(broken, "w") as f:
            f.write('{"step": 1, "loss": 2}\n{"step": 2, "loss"\n')
        for path, needle in ((empty, "no step records"), (broken, "broken.jsonl:2"),
                             (os.path.join(tmp, "missing"), "missing")):
            r = plot(path, "-o", os.path.join(tmp, "x.png"))
            if r.returncode != 1 or needle not in r.stderr:
                fail(f"{path}: exit {r.returncode}, stderr {r.stderr!r}; expected 1 naming {needle!r}")
        r = plot(a, b, "--labels", "only-one", "-o", os.path.join(tmp, "y.png"))
        if r.returncode != 2:
            fail(f"one label for two runs: exit {r.returncode}")
        print("bad input: exit 1 naming the file; mismatched labels: exit 2")
    if failures:
        sys.exit(f"{len(failures)} failure(s)")


if __name__ == "__main__":
    main()
