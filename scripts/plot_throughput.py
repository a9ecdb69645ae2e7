#!/usr/bin/env python3
"""Plot the DLPerf matrix: samples/s against devices (each run a dot, the median a line, the ideal
linear scaling from the 1n1g median dashed) and speedup against devices (the ideal is y = x).
When a table has layout cases (1n8g:tp2pp4 ..., several cases on one device count), the x axis has
one tick per case instead, labelled with the case name and its layout, and the ideal
(1n1g x devices) is a dash per case.

    scripts/plot_throughput.py LOGDIR [-o plot.png] [--skip 20 --average 100]

Reads LOGDIR/result.json as scripts/extract_logs.py wrote it, so the plot shows what the table
shows; without one it extracts the logs itself (--skip, --average as extract_logs.py). One line per
table (model / batch / precision) found under LOGDIR. Exit 1 naming the problem when there is
nothing to plot.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extract_logs  # noqa: E402


def load(logdir, skip, average):
    path = os.path.join(logdir, "result.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    if not os.path.isdir(logdir):
        raise extract_logs.LogError(f"{logdir}: no such log directory")
    groups = extract_logs.find_cases(logdir)
    if not groups:
        raise extract_logs.LogError(f"{logdir}: no result.json and no <N>n<G>g/run<k>.log files under it")
    return {"groups": [extract_logs.summarize_group(n, c, skip, average) for n, c in sorted(groups.items())]}


def label(group):
    cfg = group.get("config") or {}
    if not cfg:
        return group["name"]
    per = "data-parallel rank" if any(c.get("layout") for c in group["cases"]) else "device"
    return f"{cfg.get('kind')} {cfg.get('model')}, bs {cfg.get('batch_size')}/{per}, {cfg.get('precision')}"


def has_layouts(result):
    return any(c.get("layout") for g in result["groups"] for c in g["cases"])


def plot(result, out):
    if has_layouts(result):
        return plot_cases(result, out)
    fig, (ax_rate, ax_speed) = plt.subplots(1, 2, figsize=(12, 4.8))
    devices_seen = set()
    for i, group in enumerate(result["groups"]):
        color = f"C{i}"
        cases = sorted(group["cases"], key=lambda c: (c["devices"], c["nodes"]))
        if not cases:
            continue
        x = [c["devices"] for c in cases]
        devices_seen.update(x)
        median = [c["samples_per_s_median"] for c in cases]
        ax_rate.plot(x, median, "o-", color=color, label=f"{label(group)} (median)")
        for c in cases:
            ax_rate.scatter([c["devices"]] * len(c["samples_per_s_runs"]), c["samples_per_s_runs"],
                            s=12, color=color, alpha=0.4)
            ax_rate.annotate(c["case"], (c["devices"], c["samples_per_s_median"]), textcoords="offset points",
                             xytext=(4, -12), fontsize=8, color=color)
        base = next((c for c in cases if c["case"] == "1n1g"), None)
        if base:
            ideal_x = [1] + x
            ax_rate.plot(ideal_x, [base["samples_per_s_median"] * d for d in ideal_x], "--", color=color,
                         alpha=0.6, label="ideal (1n1g × devices)")
            ax_speed.plot(x, [c["speedup"] for c in cases], "o-", color=color, label=label(group))
            for c in cases:
                ax_speed.annotate(f"{c['speedup']:.2f}", (c["devices"], c["speedup"]), textcoords="offset points",
                                  xytext=(4, -12), fontsize=8, color=color)
    if not devices_seen:
        raise extract_logs.LogError("no cases to plot")
    ticks = sorted(devices_seen | {1})
    ax_speed.plot(ticks, ticks, "k--", alpha=0.5, label="ideal (speedup = devices)")
    for ax, ylabel, title in ((ax_rate, "samples/s (all devices)", "Throughput"),
                              (ax_speed, "speedup against 1n1g (median)", "Speedup")):
        if ticks[-1] >= 8:  # 1..32 devices: evenly spaced doublings, linear scaling a straight line
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.margins(x=0.1)
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel("devices (nodes × devices per node)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    if ax_speed.get_yscale() == "log":
        ax_speed.set_yticks(ticks)
        ax_speed.set_yticklabels([str(t) for t in ticks])
    else:
        ax_speed.set_ylim(bottom=0)
        ax_rate.set_ylim(bottom=0)
    save(fig, out)


def save(fig, out):
    fig.tight_layout()
    tmp = f"{out}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, out)


def plot_cases(result, out):
    """One x tick per case (its name with the layout), in device order; every table on the same ticks."""
    names, devices = [], {}
    for group in result["groups"]:
        for c in group["cases"]:
            if c["case"] not in devices:
                names.append(c["case"])
                devices[c["case"]] = c["devices"]
    if not names:
        raise extract_logs.LogError("no cases to plot")
    names.sort(key=lambda n: devices[n])  # stable: each table's own order within a device count
    pos = {n: i for i, n in enumerate(names)}
    fig, (ax_rate, ax_speed) = plt.subplots(1, 2, figsize=(max(12, 1.2 * len(names) + 4), 5.4))
    any_speedup = False
    for i, group in enumerate(result["groups"]):
        color = f"C{i}"
        cases = sorted(group["cases"], key=lambda c: pos[c["case"]])
        if not cases:
            continue
        x = [pos[c["case"]] for c in cases]
        ax_rate.plot(x, [c["samples_per_s_median"] for c in cases], "o-", color=color, label=f"{label(group)} (median)")
        for c in cases:
            ax_rate.scatter([pos[c["case"]]] * len(c["samples_per_s_runs"]), c["samples_per_s_runs"], s=12,
                            color=color, alpha=0.4)
        base = next((c for c in cases if c.get("speedup")), None)
        if base:
            rate0 = base["samples_per_s_median"] / base["speedup"]  # the 1n1g median
            ax_rate.scatter(x, [rate0 * c["devices"] for c in cases], marker="_", s=300, color=color, alpha=0.6,
                            label="ideal (1n1g × devices)")
            ax_speed.plot(x, [c["speedup"] for c in cases], "o-", color=color, label=label(group))
            for c in cases:
                ax_speed.annotate(f"{c['speedup']:.2f}", (pos[c["case"]], c["speedup"]), textcoords="offset points",
                                  xytext=(4, -12), fontsize=8, color=color)
            any_speedup = True
    ticks = list(range(len(names)))
    ax_speed.scatter(ticks, [devices[n] for n in names], marker="_", s=300, color="k", alpha=0.5,
                     label="ideal (speedup = devices)")
    for ax, ylabel, title in ((ax_rate, "samples/s (all devices)", "Throughput"),
                              (ax_speed, "speedup against 1n1g (median)",
                               "Speedup" if any_speedup else "Speedup (no 1n1g case)")):
        ax.set_xticks(ticks)
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.set_xlabel("case: nodes × devices per node [: tensor / pipeline / data parallel layout]")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    save(fig, out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logdir", help="a log directory (with result.json, or <N>n<G>g/run<k>.log files)")
    ap.add_argument("-o", "--output", help="PNG to write (default LOGDIR/throughput.png)")
    ap.add_argument("--skip", type=int, default=20, help="without result.json: warm-up iterations (default 20)")
    ap.add_argument("--average", type=int, default=100, help="without result.json: iterations averaged (default 100)")
    args = ap.parse_args(argv)
    out = args.output or os.path.join(args.logdir, "throughput.png")
    try:
        plot(load(args.logdir, args.skip, args.average), out)
    except (extract_logs.LogError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"plot_throughput.py: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
