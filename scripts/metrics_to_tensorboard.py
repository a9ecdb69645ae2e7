#!/usr/bin/env python3
"""TensorBoard event files from the trainers' metrics.jsonl, one run directory per input, so
`tensorboard --logdir LOGDIR` shows their curves side by side:

    .venv/bin/python scripts/metrics_to_tensorboard.py RUN [RUN ...] -o LOGDIR [--names a b]
    tensorboard --logdir LOGDIR

RUN is a metrics.jsonl file or a log directory holding one (as for scripts/plot_metrics.py, whose
reader this uses); its events go to LOGDIR/<name>, the name being the run's directory name or
--names. Scalars against the step, grouped by TensorBoard's tag prefix:
  train/       loss (mlm_loss, nsp_loss for BERT), lr, grad_norm, loss_scale, skipped
  eval/        loss, mlm_loss, nsp_loss, mlm_accuracy, perplexity (where the run evaluated)
  throughput/  samples_per_s, tokens_per_s, tflops, mfu
  time/        step_ms, data_ms, pipeline_wait_ms, eval_ms
  memory/      device_mb, host_mb
Other numeric fields a newer trainer writes go under train/ (or eval/) by their own name; null
values (a NaN the trainer could not write as JSON) are left out. Wall times are the run's own: the
steps' ms added up and ending at the file's modification time, so TensorBoard's "relative" axis
reads training time. Converting again replaces the run's earlier event files.

Events are written with tensorboard's own writer (tensorboard.summary.Writer: no torch or
TensorFlow needed); `tensorboard` is in .venv (scripts/setup_deps.sh, scripts/requirements-venv.txt).
Exit 1 naming the file when a run has no step records or a line is not JSON; 2 on bad usage.
"""
import argparse
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_metrics import MetricsError, load, run_name  # noqa: E402

# The trainer's fields (trainer/metrics.cpp) and their tags; "step" and "eval" are the keys.
STEP_TAGS = {
    "loss": "train/loss", "mlm_loss": "train/mlm_loss", "nsp_loss": "train/nsp_loss", "lr": "train/lr",
    "grad_norm": "train/grad_norm", "loss_scale": "train/loss_scale", "skipped": "train/skipped",
    "samples_per_s": "throughput/samples_per_s", "tokens_per_s": "throughput/tokens_per_s",
    "tflops": "throughput/tflops", "mfu": "throughput/mfu",
    "ms": "time/step_ms", "data_ms": "time/data_ms", "pipeline_wait_ms": "time/pipeline_wait_ms",
    "device_mb": "memory/device_mb", "host_mb": "memory/host_mb",
}
EVAL_TAGS = {
    "eval_loss": "eval/loss", "eval_mlm_loss": "eval/mlm_loss", "eval_nsp_loss": "eval/nsp_loss",
    "eval_mlm_accuracy": "eval/mlm_accuracy", "eval_perplexity": "eval/perplexity", "eval_ms": "time/eval_ms",
}
# Per-step counts that are the same every step (the batch size): nothing to plot.
NOT_PLOTTED = {"step", "eval", "samples", "tokens", "eval_iterations", "eval_samples", "eval_predictions"}


def import_writer():
    try:
        from tensorboard.summary import Writer
    except ImportError as e:
        raise MetricsError(f"the tensorboard package is not installed for {sys.executable} ({e}): run this with "
                           ".venv/bin/python (scripts/setup_deps.sh installs it there) or pip install tensorboard")
    return Writer


def scalars(record, tags, prefix):
    """(tag, value) for every number (or flag) in a record: the known fields by their tag, others by
    their own name under prefix."""
    for key, value in record.items():
        if key in NOT_PLOTTED or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue  # bool is an int: skipped (an fp16 overflow step) plots as 0/1
        tag = tags.get(key) or prefix + (key[len("eval_"):] if key.startswith("eval_") else key)
        yield tag, value


def wall_times(steps, end):
    """step → wall time: the steps' own durations added up, the last step ending at `end`."""
    total = sum(r.get("ms") or 0 for r in steps) / 1e3
    t, out = end - total, {}
    for r in steps:
        t += (r.get("ms") or 0) / 1e3
        out.setdefault(r["step"], t)
    return out


def metrics_path(run):
    return os.path.join(run, "metrics.jsonl") if os.path.isdir(run) else run


def convert(Writer, run, steps, evals, out_dir):
    """Writes the run's events into out_dir (made whole in a temporary directory first, then moved in
    place of out_dir's earlier event files). Returns the number of scalars written."""
    when = wall_times(steps, os.path.getmtime(metrics_path(run)))
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = f"{os.path.abspath(out_dir)}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    count = 0
    try:
        writer = Writer(tmp)
        first = min(when.values())
        for records, tags, prefix in ((steps, STEP_TAGS, "train/"), (evals, EVAL_TAGS, "eval/")):
            for r in records:
                step = r["step"]
                for tag, value in scalars(r, tags, prefix):
                    writer.add_scalar(tag, value, step, wall_time=when.get(step, first))
                    count += 1
        writer.close()
        os.makedirs(out_dir, exist_ok=True)
        for name in os.listdir(out_dir):
            if name.startswith("events.out.tfevents."):
                os.remove(os.path.join(out_dir, name))
        for name in os.listdir(tmp):
            os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="metrics.jsonl files or log directories")
    ap.add_argument("-o", "--logdir", required=True, help="TensorBoard's --logdir: one directory per run goes here")
    ap.add_argument("--names", nargs="*", help="one run directory name per run (default: the run's directory name)")
    a = ap.parse_args()
    if a.names and len(a.names) != len(a.runs):
        ap.error(f"{len(a.names)} names for {len(a.runs)} runs")
    names = a.names or [run_name(r) for r in a.runs]
    if len(set(names)) != len(names):
        ap.error(f"two runs would share a run directory ({', '.join(names)}): give --names")
    try:
        runs = [load(r) for r in a.runs]
        Writer = import_writer()
        for run, name, (steps, evals) in zip(a.runs, names, runs):
            out = os.path.join(a.logdir, name)
            count = convert(Writer, run, steps, evals, out)
            print(f"{metrics_path(run)}: {len(steps)} steps, {len(evals)} evals, {count} scalars -> {out}")
    except MetricsError as e:
        print(f"metrics_to_tensorboard.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
