#!/usr/bin/env python3
"""Plot `shard-tool stats` JSON on one PNG page: each length histogram (documents: bytes, words,
paragraphs, sentences; BERT: tokens per instance, and per row and instances per row when packed;
GPT: tokens per document and per sequence), BERT's padding cases (tokens computed per real token
as stored, unbinned, with each --bin-size and with --pack) and padding share per sequence length,
and the counts beside them.

    shard-tool stats bert128/ --json stats.json
    scripts/plot_stats.py stats.json [-o stats.png] [--title TEXT]

Exit 1 naming the file when it is missing or not shard-tool stats JSON.
"""
import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SUPPORTED_VERSION = 1


class StatsError(Exception):
    pass


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            stats = json.load(f)
    except OSError as e:
        raise StatsError(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise StatsError(f"{path}: not JSON ({e})")
    if not isinstance(stats, dict) or stats.get("stats_json_version") != SUPPORTED_VERSION:
        raise StatsError(f"{path}: not shard-tool stats JSON (stats_json_version {SUPPORTED_VERSION} expected)")
    return stats


def grouped(n):
    return f"{n:,}" if isinstance(n, int) else "—"


def bucket_label(lo, hi, exact):
    if exact or hi - lo == 1:
        return str(lo)
    return f"{lo}–{hi - 1}"


def plot_histogram(ax, name, h):
    counts, lower, upper = h["counts"], h["lower"], h["upper"]
    exact = h["scale"] == "exact"
    title = name.replace("_", " ")
    if exact:
        ax.bar(lower, counts, width=1.0, color="tab:blue")
        ax.set_xlabel("tokens")
    else:
        # Powers of two as categories: the first buckets (0, 1) are as wide as the last.
        first = next((i for i, c in enumerate(counts) if c), len(counts))
        shown = range(first, len(counts))
        ax.bar(range(len(shown)), [counts[i] for i in shown], color="tab:blue")
        ticks = list(range(len(shown)))
        step = max(1, math.ceil(len(ticks) / 8))
        ax.set_xticks(ticks[::step])
        ax.set_xticklabels([bucket_label(lower[i], upper[i], False) for i in list(shown)[::step]], rotation=30,
                           ha="right", fontsize=7)
        ax.set_xlabel(title.split(" ", 1)[1] + " (powers of two)")
    mean = h.get("mean")
    ax.set_title(f"{title}: {grouped(h['count'])} records" + (f", mean {mean:,.1f}" if mean is not None else ""),
                 fontsize=9)
    ax.set_ylabel("records")


def plot_padding(ax, padding):
    cases = padding["cases"]
    values = [c["tokens_per_real_token"] or 0 for c in cases]
    bars = ax.barh(range(len(cases)), values, color=["tab:gray"] + ["tab:orange"] * (len(cases) - 1))
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels([c["label"] for c in cases], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    for bar, c in zip(bars, cases):
        share = c["padding_share"]
        if share is not None:
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {share:.1%} padding", va="center", fontsize=7)
    ax.set_xlim(min(values + [1.0]) * 0.98, max(values + [1.0]) * 1.15)
    ax.set_xlabel("tokens computed per real token")
    ax.set_title(f"padding (seq_len {padding['seq_len']})", fontsize=9)


def plot_per_length(ax, padding):
    rows = padding["per_seq_len"]
    ax.bar([str(r["seq_len"]) for r in rows], [r["padding_share"] or 0 for r in rows], color="tab:orange")
    ax.set_xlabel("sequence length as stored")
    ax.set_ylabel("padding share")
    ax.set_title("padding share per sequence length", fontsize=9)


def summary_lines(stats):
    lines = [f"{stats['format']}" + (f" ({stats['layout']})" if stats.get("layout") else ""),
             f"{stats['files']} files, {stats['disk_bytes'] / 1e6:,.1f} MB"]
    sources = stats.get("sources", {})
    for name, value in stats["counts"].items():
        marker = " (manifest)" if str(sources.get(name, "")).startswith("manifest") else ""
        lines.append(f"{name.replace('_', ' ')}{marker}: {grouped(value)}")
    tok = stats.get("tokenizer") or {}
    if tok.get("unk_share") is not None:
        lines.append(f"[UNK] share: {tok['unk_share']:.4%}")
    if tok.get("bytes_per_token") is not None:
        lines.append(f"bytes per token: {tok['bytes_per_token']:.3f}")
    bert = stats.get("bert") or {}
    if bert.get("nsp_random_share") is not None:
        lines.append(f"NSP random next: {bert['nsp_random_share']:.1%}")
    dedup = stats.get("dedup")
    if dedup:
        lines.append(f"duplicated share: {dedup['duplicated_share']:.2%} ({dedup['basis']})")
    rate = stats.get("rate", {})
    lines.append(f"read in {stats['seconds']:.2f} s ({rate.get('bytes_per_s', 0) / 1e6:,.0f} MB/s)")
    return lines


def plot(stats, out, title):
    panels = [("hist", name, h) for name, h in stats["histograms"].items() if h["count"]]
    if stats.get("padding"):
        panels.append(("padding", None, stats["padding"]))
        if len(stats["padding"]["per_seq_len"]) > 1:
            panels.append(("per_length", None, stats["padding"]))
    panels.append(("summary", None, None))
    cols = 3
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (kind, name, data) in zip(axes.flat, panels):
        if kind == "hist":
            plot_histogram(ax, name, data)
        elif kind == "padding":
            plot_padding(ax, data)
        elif kind == "per_length":
            plot_per_length(ax, data)
        else:
            ax.axis("off")
            ax.text(0.02, 0.98, "\n".join(summary_lines(stats)), va="top", ha="left", family="monospace", fontsize=8,
                    transform=ax.transAxes)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(title or f"shard-tool stats: {stats['input']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stats", help="JSON that shard-tool stats wrote (--json FILE or --format json)")
    ap.add_argument("-o", "--output", default="stats.png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        plot(load(a.stats), a.output, a.title)
    except StatsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
