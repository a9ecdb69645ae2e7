#!/usr/bin/env python3
"""The data × tensor × pipeline grid on this machine's CPU: samples/s of BERT tiny and GPT tiny
(4 layers) at (data, tensor, pipeline) = (1,1,1), (2,1,1), (1,2,1), (1,1,2) on 2 cores — one
process with 2 threads, or 2 ranks with 1 thread each — and the pipeline's measured bubble
against (p − 1)/(v·m + p − 1) for m = 2, 4, 8 micro-batches, plain and interleaved.

    scripts/bench/grid_cpu.py [--build build] [--steps 30] [--batch 8]

The peer of a layout is the one-process run of the same global batch in the same invocation;
the peer of the measured bubble is the formula. The measured bubble is stage 0's time waiting in
its receives over its step time (metrics.jsonl's pipeline_wait_ms / ms, median over the steps after
the first 5): what the schedule leaves idle plus any imbalance between the stages.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "compat"))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
           OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")


def run(args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def measure(tool, shards, tmp, name, layout, micro, accum, steps, extra=()):
    data, tensor, pipeline = layout
    ranks = data * tensor * pipeline
    log = os.path.join(tmp, name)
    args = [tool, "--data", shards, "--model", "tiny", "--layers", 4, "--batch-size", micro, "--grad-accum", accum,
            "--max-steps", steps, "--threads", 2 // ranks, "--tensor-parallel", tensor, "--pipeline-parallel",
            pipeline, "--log-dir", log, "--log-interval", 1000, "--dropout", 0, *extra]
    if "gpt" in tool:
        args += ["--seq-len", 64]
    run(["mpirun", "--oversubscribe", "-np", ranks, *args] if ranks > 1 else args)
    rows = [json.loads(line) for line in open(os.path.join(log, "metrics.jsonl"))][5:]
    return (statistics.median(r["samples_per_s"] for r in rows),
            statistics.median(r.get("pipeline_wait_ms", 0) / r["ms"] for r in rows))


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("PRETRAIN_BUILD_DIR", os.path.join(SRC, "build")))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8, help="samples per micro-batch of the one-process run")
    a = ap.parse_args()
    os.environ["PRETRAIN_BUILD_DIR"], os.environ["PRETRAIN_SOURCE_DIR"] = os.path.abspath(a.build), SRC
    import compat_util as cu  # noqa: E402 (after the environment it reads)
    import test_trainer_mpi as mpi  # noqa: E402
    with tempfile.TemporaryDirectory(prefix="pretrain-bench-grid.") as tmp:
        shards = cu.sample_shards(tmp, mpi.repeated_docs(tmp, 16), bert_dupe=2)
        print(f"load average {open('/proc/loadavg').read().split()[:3]}; {os.cpu_count()} cores; {a.steps} steps, "
              f"the first 5 left out; global batch {a.batch} × 4 micro-batches\n")
        rows = []
        for kind in ("gpt", "bert"):
            tool = cu.tool(f"{kind}_pretrain")
            base = None
            for layout in ((1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2)):
                micro = a.batch // layout[0]  # the same global batch on every layout
                sps, wait = measure(tool, shards[kind], tmp, f"{kind}{layout}", layout, micro, 4, a.steps)
                base = base or sps
                rows.append([f"{kind} tiny", str(layout), f"{sps:.1f}", f"{base:.1f}", f"{sps / base:.2f}",
                             f"{wait:.1%}" if layout[2] > 1 else ""])
        table(["model", "(data, tensor, pipeline)", "samples/s", "(1,1,1) samples/s", "ratio", "stage 0 waiting"], rows)

        print("\npipeline bubble, GPT tiny at (1,1,2): stage 0's time waiting for stage 1, against the formula")
        rows = []
        for v in (1, 2):
            for m in (2, 4, 8):
                extra = ("--virtual-stages", v) if v > 1 else ()
                _, wait = measure(cu.tool("gpt_pretrain"), shards["gpt"], tmp, f"bubble{v}{m}", (1, 1, 2), 2, m,
                                  a.steps, extra)
                formula = (2 - 1) / (v * m + 2 - 1)
                rows.append([str(m), str(v), f"{wait:.1%}", f"{formula:.1%}", f"{wait / formula:.2f}"])
        table(["micro-batches", "virtual stages", "measured", "(p−1)/(v·m+p−1)", "ratio"], rows)


if __name__ == "__main__":
    main()
