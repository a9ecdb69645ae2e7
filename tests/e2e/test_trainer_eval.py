"""Evaluation during training (--eval-data, --eval-interval, --eval-iters) on shards made from the
bundled sample with a held-out valid/ split (--valid-fraction), BERT and GPT tiny on the CPU:
  * records: with the valid/ split found beside --data, eval records at every N-th step and the
    last, with their fields (BERT: eval_loss = eval_mlm_loss + eval_nsp_loss, eval_mlm_accuracy;
    GPT: eval_perplexity = exp(eval_loss)), one "eval at step" line each; the step records stay one
    per step without eval fields;
  * forward only, dropout off: training on the held-out shards themselves at --lr 0 (weights never
    change), the eval of K iterations is the mean of the first K steps' training losses (the same
    batches, forward passes) at --dropout 0, and the same bits again at --dropout 0.1 (whose
    training losses do differ: dropout is on in training only); every evaluation alike;
  * layouts: 2 data-parallel ranks, tensor parallel 2 and pipeline parallel 2 (mpirun -np 2) give
    the eval losses of one process (relative 1e-5) and its MLM accuracy (within one prediction);
  * resume: a run that fails after its step-4 checkpoint and is resumed evaluates at step 6
    exactly what the uninterrupted run did;
  * timing: a step after an evaluation does not carry its time (the step's ms stays below half the
    eval's), --eval-iters is capped at what the held-out data holds, and scripts/extract_logs.py
    gives the same table with or without the eval lines;
  * bad input: a missing --eval-data (exit 2, as a missing --data), GPT shards as BERT's eval data
    (exit 1, as for --data), --eval-interval with no held-out data (exit 2): each named.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402
import test_trainer_mpi as mpi  # noqa: E402
from mpi_harness import fail  # noqa: E402  (h.finish() reports what it collects)


def train(kind, data, tmp, name, *extra, np=1, env=None, check=True):
    """One run; returns (step records, eval records, the process). Options in `extra` come after the
    common ones, which they must not repeat."""
    log_dir = os.path.join(tmp, name)
    args = [cu.tool(f"{kind}_pretrain"), "--data", data, "--model", "tiny", "--threads", 1, "--seed", 3,
            "--warmup", 2, "--log-dir", log_dir, *extra]
    if kind == "gpt":
        args += ["--seq-len", 32]
    r = h.run(h.mpirun(np, *args), rc=0 if check else None, env=env)
    records = []
    if os.path.exists(os.path.join(log_dir, "metrics.jsonl")):
        with open(os.path.join(log_dir, "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
    return [m for m in records if not m.get("eval")], [m for m in records if m.get("eval")], r


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def untimed(records):
    """Eval records without their time (the one field two runs never share)."""
    return [{k: v for k, v in m.items() if k != "eval_ms"} for m in records]


def eval_keys(kind):
    return ("eval_loss", "eval_mlm_loss", "eval_nsp_loss", "eval_mlm_accuracy") if kind == "bert" else \
        ("eval_loss", "eval_perplexity")


def check_records(kind, shards, tmp):
    """Evals every 3 steps and at the last (7), from the valid/ split beside --data."""
    steps, evals, r = train(kind, shards, tmp, f"{kind}-records", "--batch-size", 4, "--max-steps", 7,
                            "--eval-interval", 3, "--eval-iters", 2, "--log-interval", 1)
    if [m["step"] for m in steps] != list(range(1, 8)) or any("eval_loss" in m for m in steps):
        fail(f"{kind}: step records {[m['step'] for m in steps]}, expected 1..7 without eval fields")
    if [m["step"] for m in evals] != [3, 6, 7]:
        return fail(f"{kind}: eval records at steps {[m['step'] for m in evals]}, expected [3, 6, 7]")
    for m in evals:
        missing = [k for k in (*eval_keys(kind), "eval_iterations", "eval_samples", "eval_ms") if k not in m]
        if missing or "ms" in m or "samples_per_s" in m:
            fail(f"{kind}: eval record {m}: missing {missing} or has step timing")
        elif m["eval_iterations"] != 2 or m["eval_samples"] != 8:
            fail(f"{kind}: eval of {m['eval_iterations']} iterations, {m['eval_samples']} samples; expected 2, 8")
        elif kind == "bert" and (rel(m["eval_loss"], m["eval_mlm_loss"] + m["eval_nsp_loss"]) > 1e-12
                                 or not 0 <= m["eval_mlm_accuracy"] <= 1):
            fail(f"bert: eval loss {m['eval_loss']} is not mlm + nsp, or accuracy {m['eval_mlm_accuracy']}")
        elif kind == "gpt" and rel(m["eval_perplexity"], math.exp(m["eval_loss"])) > 1e-12:
            fail(f"gpt: perplexity {m['eval_perplexity']} is not exp(eval loss {m['eval_loss']})")
    lines = [l for l in r.stdout.splitlines() if l.startswith("eval at step ")]
    want = "(mlm" if kind == "bert" else "perplexity"
    if len(lines) != 3 or not all(f"eval loss {m['eval_loss']:.4f}" in l and want in l for l, m in zip(lines, evals)):
        fail(f"{kind}: eval log lines {lines}")
    print(f"{kind}: eval at steps 3, 6, 7: loss {evals[0]['eval_loss']:.4f} -> {evals[-1]['eval_loss']:.4f}")
    return evals


def check_forward_only(kind, shards, tmp):
    """At --lr 0 on the held-out shards: each eval = the mean of the first 2 steps' training losses."""
    valid = os.path.join(shards, "valid")
    common = ["--eval-data", valid, "--lr", 0, "--batch-size", 4, "--max-steps", 3, "--eval-interval", 1,
              "--eval-iters", 2]
    runs = {dropout: train(kind, valid, tmp, f"{kind}-lr0-{dropout}", *common, "--dropout", dropout)
            for dropout in (0, 0.1)}
    steps, evals, _ = runs[0]
    keys = [("loss", "eval_loss")] + ([("mlm_loss", "eval_mlm_loss"), ("nsp_loss", "eval_nsp_loss")]
                                      if kind == "bert" else [])
    for train_key, eval_key in keys:
        want = (steps[0][train_key] + steps[1][train_key]) / 2
        got = [m[eval_key] for m in evals]
        if len(got) != 3 or any(rel(g, want) > 1e-12 for g in got):
            fail(f"{kind}: {eval_key} {got} at --lr 0, expected the first 2 steps' mean {train_key} {want}")
    dropped_steps, dropped_evals, _ = runs[0.1]
    if kind == "bert" and [m["loss"] for m in dropped_steps] == [m["loss"] for m in steps]:
        fail("bert: --dropout 0.1 did not change the training losses (the check below would prove nothing)")
    if untimed(dropped_evals) != untimed(evals):
        fail(f"{kind}: evals at --dropout 0.1 {untimed(dropped_evals)} differ from --dropout 0 {untimed(evals)}")
    else:
        print(f"{kind}: eval = the forward-only mean of the same batches ({evals[0]['eval_loss']:.6f}), dropout off")


def check_layouts(kind, shards, tmp):
    """1 process against 2 data ranks, tensor 2 and pipeline 2: the same eval numbers."""
    common = ["--dropout", 0, "--max-steps", 4, "--eval-interval", 2, "--eval-iters", 3, "--lr", "2e-3"]
    _, ref, _ = train(kind, shards, tmp, f"{kind}-1rank", "--batch-size", 4, *common)
    layouts = [("2 data ranks", ["--batch-size", 2])]
    if kind == "bert":
        layouts += [("tensor 2", ["--batch-size", 4, "--tensor-parallel", 2]),
                    ("pipeline 2", ["--batch-size", 4, "--pipeline-parallel", 2])]
    for what, extra in layouts:
        _, got, _ = train(kind, shards, tmp, f"{kind}-{what.replace(' ', '')}", *extra, *common, np=2)
        if [m["step"] for m in got] != [m["step"] for m in ref]:
            fail(f"{kind} {what}: evals at {[m['step'] for m in got]}, 1 process at {[m['step'] for m in ref]}")
            continue
        worst = max(rel(a[k], b[k]) for a, b in zip(got, ref) for k in eval_keys(kind) if k != "eval_mlm_accuracy")
        acc = [abs(a["eval_mlm_accuracy"] - b["eval_mlm_accuracy"]) * b["eval_predictions"]
               for a, b in zip(got, ref)] if kind == "bert" else [0]
        if worst > 1e-5 or max(acc) > 1 or any(a["eval_samples"] != b["eval_samples"] for a, b in zip(got, ref)):
            fail(f"{kind} {what}: evals {got} against 1 process {ref}")
        else:
            print(f"{kind} {what}: eval losses within {worst:.1e} of 1 process")


def check_resume(shards, tmp):
    """A run failing at step 5 after its step-4 checkpoint, resumed: the evals of the uninterrupted run."""
    common = ["--batch-size", 4, "--max-steps", 6, "--eval-interval", 2, "--eval-iters", 2, "--save-interval", 2]
    _, full, _ = train("bert", shards, tmp, "full", *common, "--checkpoint-dir", os.path.join(tmp, "ckpt-full"))
    ckpt = os.path.join(tmp, "ckpt")
    _, before, r = train("bert", shards, tmp, "broken", *common, "--checkpoint-dir", ckpt,
                         env={"PRETRAIN_FAULT": "0:5"}, check=False)
    if r.returncode != 1 or "fault injected" not in r.stderr:
        return fail(f"the run with PRETRAIN_FAULT=0:5 ended with exit {r.returncode}:\n{r.stderr[-500:]}")
    _, after, _ = train("bert", shards, tmp, "resumed", *common, "--checkpoint-dir", ckpt, "--resume")
    if untimed(before + after) != untimed(full):
        fail(f"resumed evals {untimed(before + after)} differ from the uninterrupted run's {untimed(full)}")
    else:
        print(f"resume: evals at steps 2, 4 (before) and 6 (resumed) are bitwise the uninterrupted run's")


def check_timing(shards, tmp):
    """An evaluation much longer than a step leaves the next step's time alone; extract_logs.py
    reads the same steps whether or not the log holds eval lines."""
    steps, evals, r = train("gpt", shards, tmp, "timing", "--batch-size", 1, "--max-steps", 6, "--eval-interval", 3,
                            "--eval-iters", 1000, "--log-interval", 1)
    if not evals or not 1 < evals[0]["eval_iterations"] == evals[0]["eval_samples"] < 1000:
        fail(f"--eval-iters 1000 is not capped at the held-out data's iterations: {evals}")
    after = {m["step"]: m["ms"] for m in steps}
    slow = [(m["step"], after[m["step"] + 1], m["eval_ms"]) for m in evals if m["step"] + 1 in after
            and not after[m["step"] + 1] < 0.5 * m["eval_ms"]]
    if not evals or slow:
        fail(f"a step after an evaluation took its time (step, ms, eval ms): {slow or evals}")
    out = {}
    for variant, keep in (("with", True), ("without", False)):
        case = os.path.join(tmp, f"extract-{variant}", "1n1g")
        os.makedirs(case)
        with open(os.path.join(case, "run1.log"), "w") as f:
            f.writelines(l + "\n" for l in r.stdout.splitlines() if keep or not l.startswith("eval "))
        cu.run(sys.executable, os.path.join(mpi.SRC, "scripts", "extract_logs.py"), os.path.dirname(case),
               "--skip", 0, "-q")
        with open(os.path.join(os.path.dirname(case), "result.json")) as f:
            run = json.load(f)["groups"][0]["cases"][0]["run_details"][0]
        out[variant] = {k: v for k, v in run.items() if k != "log"}
    if out["with"] != out["without"] or out["with"]["steps_logged"] != 6:
        fail(f"extract_logs.py with eval lines {out['with']}, without {out['without']}")
    else:
        print(f"timing: eval {evals[0]['eval_ms']:.0f} ms, next step {after[4]:.0f} ms; "
              "extract_logs.py ignores the eval lines")


def check_bad_input(shards, tmp):
    def expect(args, code, words):
        _, _, r = train("bert", *args, check=False)
        if r.returncode != code or not all(w in r.stderr for w in words):
            fail(f"{args[2:]}: expected exit {code} and {words}, got {r.returncode}:\n{r.stderr[-600:]}")
    missing = os.path.join(tmp, "no-such-shards")
    expect((shards["bert"], tmp, "bad", "--max-steps", 1, "--eval-data", missing), 2, [missing])
    expect((shards["bert"], tmp, "bad", "--max-steps", 1, "--eval-data", shards["gpt"]), 1,
           ["--eval-data", shards["gpt"]])
    valid = os.path.join(shards["bert"], "valid")
    expect((valid, tmp, "bad", "--max-steps", 1, "--eval-interval", 2), 2, ["--eval-interval", "--eval-data"])


def main():
    h.require_mpirun()
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp, mpi.repeated_docs(tmp, 8), bert_dupe=2, valid_fraction=0.25)
        for kind in ("bert", "gpt"):
            check_records(kind, shards[kind], tmp)
            check_forward_only(kind, shards[kind], tmp)
            check_layouts(kind, shards[kind], tmp)
        check_resume(shards["bert"], tmp)
        check_timing(shards["gpt"], tmp)
        check_bad_input(shards, tmp)
    h.finish()


if __name__ == "__main__":
    main()
