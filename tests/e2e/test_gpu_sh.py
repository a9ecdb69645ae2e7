"""scripts/bench/gpu.sh --dry-run, so the device check never rots between lent GPUs: the same script on
this machine's CPU with tiny models, our trainers from the build under test.
  * exit 0; what it leaves in --out is what the device tool brings back: at most 8 plain files,
    names of letters, digits, '.', '_' and '-';
  * gpu.json: every case (BERT tiny at 128 and 512, GPT tiny at 256) with our run ok (positive
    samples/s equal to batch / median step time, TFLOPs equal to FLOPs / time, peak memory), the
    PyTorch eager peer ok where the .venv has transformers (GPT's FLOPs per step, counted in Python,
    equal to our trainer's), torch.compile ok or skipped with a reason; the gpu tests each ran and
    none failed (here they skip: no GPU);
  * the table is the last thing printed, with its columns and one row per case, and gpu.md holds it;
  * --budget 1 --only gpt --runs ours,eager: the GPT case alone, no tests, our run and PyTorch
    eager skipped for the budget and said so (not failed), torch.compile not run, and still a table.
Skips (77) without the shared data (the shards are made from its enwiki excerpt and vocabularies)."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

COLUMNS = ["model", "seq × batch", "ours samples/s", "ours TFLOPs", "ours MFU", "eager samples/s", "compile samples/s",
           "ours ÷ eager (≥ 1.3)", "ours ÷ compile (≥ 1.0)", "peak GB ours / eager / compile", "memory ÷ eager (≤ 1)"]


def gpu_sh(out, *flags):
    env = dict(os.environ, PRETRAIN_SHARED_DATA=cu.shared_data())
    script = os.path.join(os.environ["PRETRAIN_SOURCE_DIR"], "scripts", "bench", "gpu.sh")
    r = subprocess.run(["bash", script, "--dry-run", "--build", cu.build_dir(), "--out", out, *flags],
                       capture_output=True, text=True, env=env, timeout=500)
    if r.returncode != 0:
        cu.fail(f"gpu.sh --dry-run {' '.join(flags)}: exit {r.returncode}\n{r.stdout[-4000:]}{r.stderr[-2000:]}")
    return r.stdout


def table(stdout, failures, rows):
    """The markdown table at the end of the output: its header's columns and `rows` rows."""
    lines = stdout.rstrip("\n").split("\n")
    body = [l for l in lines if l.startswith("| ")]
    if not body or lines[-1] != body[-1]:
        failures.append("the table is not the last thing printed")
        return
    header = [c.strip() for c in body[0].strip("|").split("|")]
    if header != COLUMNS:
        failures.append(f"table columns {header}")
    if len(body) - 1 != rows:
        failures.append(f"{len(body) - 1} table rows, expected {rows}")


def main():
    data = cu.shared_data()
    if not data or not os.path.exists(os.path.join(data, "vocab", "gpt2-encoder.json")):
        cu.skip("no shared data (PRETRAIN_SHARED_DATA): gpu.sh makes its shards from the enwiki excerpt")
    failures = []
    venv = os.path.join(os.environ["PRETRAIN_SOURCE_DIR"], ".venv", "bin", "python")
    has_transformers = os.path.exists(venv) and subprocess.run(
        [venv, "-c", "import torch, transformers"], capture_output=True).returncode == 0
    with cu.tempdir() as tmp:
        out = os.path.join(tmp, "out")
        stdout = gpu_sh(out)
        files = os.listdir(out)
        if len(files) > 8 or any(not re.fullmatch(r"[A-Za-z0-9._-]+", f) or not os.path.isfile(os.path.join(out, f))
                                 for f in files):
            failures.append(f"--out holds {files}: the device tool brings back at most 8 plain files, plainly named")
        result = json.load(open(os.path.join(out, "gpu.json")))
        cases = [(c["kind"], c["model"], c["seq"], c["batch"]) for c in result["cases"]]
        if cases != [("bert", "tiny", 128, 4), ("bert", "tiny", 512, 2), ("gpt", "tiny", 256, 2)]:
            failures.append(f"cases {cases}")
        for c in result["cases"]:
            name, o = f"{c['kind']} {c['model']} {c['seq']}", c["ours"]
            if o["status"] != "ok":
                failures.append(f"{name}: ours {o['status']}: {o.get('note')}")
                continue
            if not (o["samples_per_s"] > 0 and abs(o["samples_per_s"] - c["batch"] * 1e3 / o["median_ms"]) < 1e-6 * o["samples_per_s"]):
                failures.append(f"{name}: ours samples/s {o['samples_per_s']} against {o['median_ms']} ms per step")
            if not (o["tflops"] > 0 and abs(o["tflops"] - o["flops_per_step"] / o["median_ms"] / 1e9) < 1e-6 * o["tflops"]):
                failures.append(f"{name}: ours TFLOPs {o['tflops']} against {o['flops_per_step']} FLOPs per step")
            if not o["peak_mb"] > 0 or len(o["steps"]) != 3:
                failures.append(f"{name}: ours peak {o['peak_mb']} MB, {len(o['steps'])} steps logged (expected 3)")
            e, k = c["pytorch eager"], c["pytorch compile"]
            if has_transformers:
                if e.get("status") != "ok" or not e["samples_per_s"] > 0:
                    failures.append(f"{name}: PyTorch eager {e.get('status')}: {e.get('note')}")
                elif abs(c["ours_over_eager"] - o["samples_per_s"] / e["samples_per_s"]) > 1e-9:
                    failures.append(f"{name}: ours ÷ eager {c['ours_over_eager']}")
                elif c["kind"] == "gpt" and abs(e["flops_per_step"] - o["flops_per_step"]) > 1e-6 * o["flops_per_step"]:
                    failures.append(f"{name}: the peer counts {e['flops_per_step']} FLOPs per step, our trainer {o['flops_per_step']}")
            if k.get("status") not in ("ok", "skipped") or (k["status"] == "skipped" and not k.get("note")):
                failures.append(f"{name}: torch.compile {k.get('status')}: {k.get('note')}")
        tests = result["tests"]
        if not tests or any(t["exit"] != 0 or t["failed"] or t["passed"] + t["skipped"] < 1 for t in tests):
            failures.append(f"gpu tests: {tests}")
        table(stdout, failures, 3)
        md = open(os.path.join(out, "gpu.md")).read()
        if not stdout.endswith(md):
            failures.append("gpu.md is not the report that was printed")

        out2 = os.path.join(tmp, "out2")
        stdout = gpu_sh(out2, "--budget", "1", "--only", "gpt", "--runs", "ours,eager")
        result = json.load(open(os.path.join(out2, "gpu.json")))
        if [(c["kind"], c["seq"]) for c in result["cases"]] != [("gpt", 256)] or result["tests"]:
            failures.append(f"--only gpt --runs ours,eager: cases {[c['kind'] for c in result['cases']]}, tests {result['tests']}")
        for c in result["cases"]:
            for impl in ("ours", "pytorch eager") if has_transformers else ("ours",):
                if c[impl].get("status") != "skipped" or not c[impl].get("note"):
                    failures.append(f"--budget 1: {impl} is {c[impl].get('status')} ({c[impl].get('note')}), not skipped")
            if c["pytorch compile"].get("status") != "not run":
                failures.append(f"--runs ours,eager: torch.compile is {c['pytorch compile'].get('status')}, not 'not run'")
        table(stdout, failures, 1)
    cu.finish(failures)


if __name__ == "__main__":
    main()
