"""scripts/metrics_to_tensorboard.py on metrics.jsonl as the trainers write them (trainer/metrics.cpp's
fields: a BERT run with MLM/NSP losses and evaluations, a GPT run with perplexity), read back with
tensorboard's EventAccumulator: one run directory per input, every value at its step under its tag,
null values left out, the skipped flag as 0/1, wall times spaced by the steps' ms; converting again replaces the events
instead of doubling them; a broken line exits 1 naming file and line, two runs with one name exit 2.
Runs under .venv/bin/python (tensorboard from scripts/requirements-venv.txt); skips without it.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

cu.require_venv_modules("tensorboard")
from tensorboard.backend.event_processing import event_accumulator  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

SCRIPT = os.path.join(os.environ["PRETRAIN_SOURCE_DIR"], "scripts", "metrics_to_tensorboard.py")
failures = []


def fail(message):
    print(f"FAIL: {message}")
    failures.append(message)


def step_record(s, bert):
    r = {"step": s, "loss": 10.0 / s, "lr": 1e-4 * min(1, s / 3), "grad_norm": 1.5 + s, "ms": 100.0 + s,
         "data_ms": 0.5, "pipeline_wait_ms": 0.0, "samples": 8, "tokens": 1024, "samples_per_s": 80.0 + s,
         "tokens_per_s": 8000.0 + s, "tflops": 0.25, "mfu": None if s == 2 else 0.01 * s, "device_mb": 0.0,
         "host_mb": 300.0 + s, "loss_scale": 1.0, "skipped": s == 3}
    if bert:
        r["mlm_loss"], r["nsp_loss"] = 9.0 / s, 1.0 / s
    return r


def eval_record(s, bert):
    r = {"step": s, "eval": True, "eval_loss": 9.5 / s, "eval_iterations": 4, "eval_samples": 32, "eval_ms": 40.0}
    if bert:
        r.update(eval_mlm_loss=9.0 / s, eval_nsp_loss=0.5 / s, eval_mlm_accuracy=0.1 * s, eval_predictions=100)
    else:
        r["eval_perplexity"] = 2.0 * s
    return r


def write_run(path, steps, evals, bert):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    records = []
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            records.append(step_record(s, bert))
            f.write(json.dumps(records[-1]) + "\n")
            if s in evals:
                records.append(eval_record(s, bert))
                f.write(json.dumps(records[-1]) + "\n")
    return records


def expected_scalars(records):
    """tag → [(step, value)] as the script's --help promises them."""
    names = {"ms": "time/step_ms", "data_ms": "time/data_ms", "pipeline_wait_ms": "time/pipeline_wait_ms",
             "samples_per_s": "throughput/samples_per_s", "tokens_per_s": "throughput/tokens_per_s",
             "tflops": "throughput/tflops", "mfu": "throughput/mfu", "device_mb": "memory/device_mb",
             "host_mb": "memory/host_mb", "eval_ms": "time/eval_ms"}
    out = {}
    for r in records:
        for key, value in r.items():
            if key in ("step", "eval", "samples", "tokens", "eval_iterations", "eval_samples", "eval_predictions") \
                    or value is None:
                continue
            tag = names.get(key) or (f"eval/{key[5:]}" if key.startswith("eval_") else f"train/{key}")
            out.setdefault(tag, []).append((r["step"], float(value)))
    return out


def read_events(run_dir):
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    out, times = {}, {}
    for tag in acc.Tags()["tensors"]:
        events = acc.Tensors(tag)
        out[tag] = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events]
        times[tag] = [e.wall_time for e in events]
    return out, times


def convert(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120)


def check_run(name, run_dir, records):
    events = [f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")]
    if len(events) != 1:
        fail(f"{name}: {len(events)} event files in {run_dir}, expected 1")
    got, times = read_events(run_dir)
    want = expected_scalars(records)
    if sorted(got) != sorted(want):
        fail(f"{name}: tags {sorted(got)}, expected {sorted(want)}")
    for tag, points in want.items():
        have = got.get(tag, [])
        # float32 in the events
        if [s for s, _ in have] != [s for s, _ in points] or \
                any(abs(a - b) > 1e-6 * max(1.0, abs(b)) for (_, a), (_, b) in zip(have, points)):
            fail(f"{name}: {tag} = {have[:4]}..., expected {points[:4]}...")
    # Step s ends (100 + s) ms after step s-1.
    t = times.get("train/loss", [])
    gaps = [round((b - a) * 1e3, 3) for a, b in zip(t, t[1:])]
    if gaps != [100.0 + s for s in range(2, len(t) + 1)]:
        fail(f"{name}: wall-time gaps {gaps[:4]}..., expected the steps' ms")
    return sum(len(p) for p in got.values())


def main():
    with cu.tempdir() as tmp:
        bert = write_run(os.path.join(tmp, "bert-run", "metrics.jsonl"), 20, evals=(10, 20), bert=True)
        gpt = write_run(os.path.join(tmp, "gpt", "metrics.jsonl"), 12, evals=(6, 12), bert=False)
        logdir = os.path.join(tmp, "tb")
        r = convert(os.path.join(tmp, "bert-run"), os.path.join(tmp, "gpt", "metrics.jsonl"), "-o", logdir)
        if r.returncode != 0:
            fail(f"two runs: exit {r.returncode}: {r.stdout}{r.stderr}")
        else:
            if sorted(os.listdir(logdir)) != ["bert-run", "gpt"]:
                fail(f"run directories {sorted(os.listdir(logdir))}, expected bert-run and gpt")
            n = check_run("bert", os.path.join(logdir, "bert-run"), bert)
            m = check_run("gpt", os.path.join(logdir, "gpt"), gpt)
            print(f"two runs: {n} + {m} scalars read back\n{r.stdout.strip()}")

        # Again, under other names: replaced, not doubled.
        r = convert(os.path.join(tmp, "bert-run"), os.path.join(tmp, "bert-run"), "-o", logdir, "--names", "gpt", "b")
        if r.returncode != 0:
            fail(f"again with --names: exit {r.returncode}: {r.stderr}")
        else:
            check_run("bert as gpt", os.path.join(logdir, "gpt"), bert)
            check_run("bert as b", os.path.join(logdir, "b"), bert)
        if any(".tmp-" in f for f in os.listdir(logdir)):
            fail(f"a temporary directory is left in {logdir}")

        broken = os.path.join(tmp, "broken.jsonl")
        with open(broken, "w") as f:
            f.write('{"step": 1, "loss": 2}\n{"step": 2, "loss"\n')
        nostep = os.path.join(tmp, "nostep.jsonl")
        with open(nostep, "w") as f:
            f.write('{"loss": 2}\n')
        for path, needle in ((broken, "broken.jsonl:2"), (nostep, "nostep.jsonl:1"),
                             (os.path.join(tmp, "missing"), "missing")):
            r = convert(path, "-o", logdir)
            if r.returncode != 1 or needle not in r.stderr:
                fail(f"{os.path.basename(path)}: exit {r.returncode}, expected 1 naming {needle}: {r.stderr}")
        r = convert(os.path.join(tmp, "bert-run"), os.path.join(tmp, "bert-run", "metrics.jsonl"), "-o", logdir)
        if r.returncode != 2 or "--names" not in r.stderr:
            fail(f"two runs with one name: exit {r.returncode}, expected 2: {r.stderr}")
        r = convert("--help")
        if r.returncode != 0 or "tensorboard --logdir" not in r.stdout:
            fail(f"--help: exit {r.returncode}: {r.stdout}{r.stderr}")
    cu.finish(failures)


if __name__ == "__main__":
    main()
