#!/usr/bin/env python3
"""Training curves from the trainers' metrics.jsonl, as one PNG of four panels against steps:
loss (and the held-out eval_loss where the run evaluated), learning rate, throughput (samples/s)
and memory (device and host MB). Several runs go on the same axes, one colour each, labelled by
their directory (or --labels), so a baseline and a change can be compared at a glance.

    scripts/plot_metrics.py RUN [RUN ...] [-o curves.png] [--labels a b] [--skip 2]

RUN is a metrics.jsonl file or a log directory holding one. --skip leaves the first steps out of
the throughput panel (start-up and first-step allocation). Exit 1 naming the file when a run has
no step records or a line is not JSON.
"""
import argparse
import json
import os
import sys


class MetricsError(Exception):
    pass


def load(run):
    """A run's (step records, eval records) from its metrics.jsonl (or the directory holding one).
    scripts/metrics_to_tensorboard.py reads runs with this too."""
    path = os.path.join(run, "metrics.jsonl") if os.path.isdir(run) else run
    if not os.path.exists(path):
        raise MetricsError(f"{path}: no such metrics file")
    steps, evals = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise MetricsError(f"{path}:{number}: not a JSON object ({e.msg})")
            if not isinstance(record, dict) or isinstance(record.get("step"), bool) or \
                    not isinstance(record.get("step"), int):
                raise MetricsError(f"{path}:{number}: expected a JSON object with an integer \"step\"")
            (evals if record.get("eval") else steps).append(record)
    if not steps:
        raise MetricsError(f"{path}: no step records")
    return steps, evals


def run_name(run):
    """A run's default label: the name of the directory its metrics.jsonl is in."""
    return os.path.basename(os.path.abspath(run if os.path.isdir(run) else os.path.dirname(run) or "."))


def plot(runs, labels, out, skip):
    # Here, not at the top: load() is imported by scripts that do not plot.
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    (loss, lr), (speed, memory) = axes
    for i, ((steps, evals), label) in enumerate(zip(runs, labels)):
        colour = f"C{i}"
        x = [r["step"] for r in steps]
        loss.plot(x, [r["loss"] for r in steps], color=colour, label=f"{label} train")
        if evals:
            loss.plot([e["step"] for e in evals], [e["eval_loss"] for e in evals], "o--", color=colour,
                      label=f"{label} eval")
        lr.plot(x, [r["lr"] for r in steps], color=colour, label=label)
        timed = [r for r in steps if r["step"] > skip] or steps
        speed.plot([r["step"] for r in timed], [r["samples_per_s"] for r in timed], color=colour, label=label)
        memory.plot(x, [r.get("device_mb", 0) for r in steps], color=colour, label=f"{label} device")
        memory.plot(x, [r.get("host_mb", 0) for r in steps], ":", color=colour, label=f"{label} host")
    for ax, title, unit in ((loss, "loss", "loss"), (lr, "learning rate", "lr"),
                            (speed, "throughput", "samples/s"), (memory, "memory", "MB")):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="metrics.jsonl files or log directories")
    ap.add_argument("-o", "--output", default="curves.png")
    ap.add_argument("--labels", nargs="*", help="one per run (default: the run's directory name)")
    ap.add_argument("--skip", type=int, default=2, help="steps left out of the throughput panel")
    a = ap.parse_args()
    if a.labels and len(a.labels) != len(a.runs):
        ap.error(f"{len(a.labels)} labels for {len(a.runs)} runs")
    labels = a.labels or [run_name(r) for r in a.runs]
    try:
        runs = [load(r) for r in a.runs]
    except MetricsError as e:
        print(f"plot_metrics.py: {e}", file=sys.stderr)
        return 1
    plot(runs, labels, a.output, a.skip)
    print(f"curves: {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
