"""The DLPerf scripts end to end with CPU ranks on this machine (loopback only):
  * scripts/run_single_node.sh --device cpu --gpus-per-node 2 runs BERT tiny for the matrix 1n1g, 1n2g,
    2 runs each, 30 steps, into logs/bert/bs4_fp32/<case>/run<k>.log (nothing else but the case dirs;
    each log holds rank 0's config line and 30 step lines);
  * scripts/extract_logs.py --skip 10: result.json has both cases, 2 runs each, steps 11..30 averaged,
    samples/s equal to the logged step times recomputed here, the 1n1g speedup exactly 1.0, the other
    speedup the ratio of medians, the seed formula recomputed from the config line, positive TFLOPs and
    memory; table.md has the DLPerf columns and one row per case;
  * scripts/plot_throughput.py writes a non-empty PNG;
  * run_multi_node.sh with a hostfile on localhost runs its 1n2g case through `--hostfile -npernode`,
    and its --dry-run over a 2-host hostfile plans 1n1g, 1n2g, 2n2g (nothing is sent to those hosts);
    inside a (simulated) 2-node Slurm allocation the same plan runs each case through srun;
  * errors: extract_logs.py on an empty directory, on a log without step lines and with nothing left
    after --skip exits 1 naming the directory or file; a case the hosts do not allow and
    run_multi_node.sh without --hostfile exit 2;
  * layout matrices: GPT tiny (seq 64, micro-batch 4, -- --grad-accum 2) on --cases
    "1n1g 1n2g:dp2 1n2g:tp2 1n2g:pp2" and BERT tiny at 4 layers on "1n1g 1n2g:dp2 1n2g:tp2sp 1n2g:pp2v2",
    2 runs of 12 steps each, logged in 1n1g/, 1n2g_dp2/, 1n2g_tp2/ … with each config line's
    tensor/pipeline/data sizes, virtual stages and sequence parallel; extract_logs.py --skip 4 reports
    them per case (result.json and the table's tp/pp/dp/v/sp/global batch columns), samples/s recomputed
    from the step times, the seed formula with the whole model's parameters (the 1n1g config's, for
    the tensor and pipeline cases whose config line counts rank 0's shard), finite positive TFLOPs;
    plot_throughput.py writes a PNG with the cases as ticks; --dry-run prints the layouts and the
    trainer flags; malformed or non-dividing cases (1n2g:tp3, 1n2g:tp2dp2, 1n2g:pp2x, 1n2g:v2) exit 2
    naming the numbers.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
SCRIPTS = os.path.join(SRC, "scripts")
SAMPLE = os.path.join(SRC, "tests", "data", "sample-docs.jsonl")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
STEPS, SKIP, RUNS = 30, 10, 2
GPT_LAYOUT_CASES = ["1n1g", "1n2g:dp2", "1n2g:tp2", "1n2g:pp2"]
BERT_LAYOUT_CASES = ["1n1g", "1n2g:dp2", "1n2g:tp2sp", "1n2g:pp2v2"]
LAYOUT_STEPS, LAYOUT_SKIP, ACCUM = 12, 4, 2
failures = []


def check(ok, message):
    print(("ok: " if ok else "FAIL: ") + message)
    if not ok:
        failures.append(message)


def run(args, expect=0, timeout=300):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=ENV, timeout=timeout)
    if expect is not None and r.returncode != expect:
        print(r.stdout + r.stderr)
        sys.exit(f"{' '.join(map(str, args))}: exit {r.returncode}, expected {expect}")
    return r


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def check_logs(logs):
    tree = sorted(os.path.relpath(os.path.join(d, f), logs) for d, _, files in os.walk(logs) for f in files)
    want = [f"bert/bs4_fp32/{c}/run{k}.log" for c in ("1n1g", "1n2g") for k in range(1, RUNS + 1)]
    check(tree == want, f"log tree {tree}")
    for path in want:
        with open(os.path.join(logs, path)) as f:
            text = f.read()
        config = [json.loads(line[8:]) for line in text.splitlines() if line.startswith("config: ")]
        steps = [line for line in text.splitlines() if line.startswith("step ")]
        world = 1 if "1n1g" in path else 2
        check(len(config) == 1 and config[0]["world_size"] == world and config[0]["model"] == "tiny"
              and len(steps) == STEPS, f"{path}: config line (world_size {world}) and {len(steps)} step lines")


def step_ms(path):
    """The ms column of each step line, parsed here independently of extract_logs.py."""
    with open(path) as f:
        return [float(re.search(r"\| ([\d.]+) ms \| data", line).group(1)) for line in f if line.startswith("step ")]


def table_rows(table):
    """table.md's rows as dicts keyed by its header's column names."""
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    return header, [dict(zip(header, (v.strip() for v in line.strip("|").split("|")))) for line in lines[1:]]


def check_result(case_dir):
    with open(os.path.join(case_dir, "result.json")) as f:
        result = json.load(f)
    check(len(result["groups"]) == 1 and result["skip"] == SKIP, "result.json: one group, skip recorded")
    group = result["groups"][0]
    cases = {c["case"]: c for c in group["cases"]}
    check(list(cases) == ["1n1g", "1n2g"], f"result.json cases {list(cases)}")
    cfg = group["config"]
    for name, c in cases.items():
        check(c["runs"] == RUNS and c["devices"] == int(name[2]), f"{name}: {c['runs']} runs, {c['devices']} devices")
        rates = []
        for run_ in c["run_details"]:
            check(run_["steps_averaged"] == STEPS - SKIP and run_["first_step"] == SKIP + 1
                  and run_["last_step"] == STEPS, f"{name}: steps {run_['first_step']}..{run_['last_step']} averaged")
            ms = step_ms(run_["log"])[SKIP:]
            global_batch = cfg["batch_size"] * c["devices"]
            rate = global_batch * len(ms) / (sum(ms) / 1e3)
            rates.append(rate)
            check(close(run_["samples_per_s"], rate), f"{name}: samples/s {run_['samples_per_s']:.2f} == {rate:.2f} "
                  "from the logged step times")
            seed = cfg["parameters"] * 3 * 2 * cfg["seq_len"] * global_batch / (statistics.fmean(ms) / 1e3 * c["devices"]) / 1e12
            check(close(run_["tflops_seed"], seed), f"{name}: seed-formula TFLOPs {run_['tflops_seed']:.5f} == {seed:.5f}")
        check(close(c["samples_per_s_median"], statistics.median(rates)) and close(c["samples_per_s_mean"], statistics.fmean(rates)),
              f"{name}: median {c['samples_per_s_median']:.2f} and mean {c['samples_per_s_mean']:.2f} over runs")
        check(all(c[k] > 0 for k in ("samples_per_s_median", "tflops_seed", "tflops_palm", "device_mb", "host_mb")),
              f"{name}: positive samples/s, TFLOPs (seed {c['tflops_seed']:.4f}, PaLM {c['tflops_palm']:.4f}), "
              f"memory ({c['device_mb']:.1f} / {c['host_mb']:.1f} MB)")
    check(cases["1n1g"]["speedup"] == 1.0, "1n1g speedup is 1.0")
    want = cases["1n2g"]["samples_per_s_median"] / cases["1n1g"]["samples_per_s_median"]
    check(close(cases["1n2g"]["speedup"], want), f"1n2g speedup {cases['1n2g']['speedup']:.3f} = ratio of medians")

    with open(os.path.join(case_dir, "table.md")) as f:
        table = f.read()
    print(table)
    header, rows = table_rows(table)
    check(all(h in header for h in ("case", "node num", "gpu num/node", "tp", "pp", "dp", "samples/s (median)",
                                    "samples/s (mean)", "speedup", "TFLOPs/device (seed formula)",
                                    "TFLOPs/device (PaLM)", "memory device / host (MB)", "runs")),
          f"table.md has the DLPerf and layout columns: {header}")
    check([(r["case"], r["node num"], r["gpu num/node"], r["dp"], r["speedup"]) for r in rows]
          == [("1n1g", "1", "1", "1", "1.00"), ("1n2g", "1", "2", "2", rows[-1]["speedup"])],
          f"table.md rows: {[(r['case'], r['dp'], r['speedup']) for r in rows]}")
    check(re.search(r"^\| 1 \| 1 \| 1n1g \|", table, re.M) and re.search(r"^\| 1 \| 2 \| 1n2g \|", table, re.M),
          "rows still start with node num and gpu num/node (tests/e2e/test_demo.sh greps '| 1 | 1 |')")


def check_errors(tmp, case_dir):
    extract = ["/usr/bin/python3", os.path.join(SCRIPTS, "extract_logs.py")]
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    r = run(extract + [empty], expect=1)
    check(empty in r.stderr, f"empty log dir: exit 1, {r.stderr.strip()}")
    r = run(extract + [os.path.join(tmp, "missing")], expect=1)
    check("missing" in r.stderr, f"missing log dir: exit 1, {r.stderr.strip()}")
    broken = os.path.join(tmp, "broken", "1n1g", "run1.log")
    os.makedirs(os.path.dirname(broken))
    with open(broken, "w") as f:
        f.write("mpirun: ORTE was unable to start\n")
    r = run(extract + [os.path.join(tmp, "broken")], expect=1)
    check(broken in r.stderr and "no step lines" in r.stderr, f"log without step lines: exit 1, {r.stderr.strip()}")
    r = run(extract + [case_dir, "--skip", STEPS, "-o", os.path.join(tmp, "unused")], expect=1)
    check("run1.log" in r.stderr and "--skip" in r.stderr, f"nothing after --skip: exit 1, {r.stderr.strip()}")
    r = run(["/usr/bin/python3", os.path.join(SCRIPTS, "plot_throughput.py"), empty], expect=1)
    check(r.returncode == 1, f"plot of an empty dir: exit 1, {r.stderr.strip()}")


def check_layout_refusals(common):
    matrix = os.path.join(SCRIPTS, "dlperf_matrix.sh")
    for case, words in (("1n2g:tp3", ("1n2g:tp3", "tensor 3", "2 devices")),
                        ("1n2g:tp2dp2", ("dp2", "tensor 2", "data parallel 1")),
                        ("1n2g:pp2x", ("1n2g:pp2x", "'x'")),
                        ("1n2g:v2", ("v2", "pp > 1"))):
        r = run([matrix, *common, "--gpus-per-node", 2, "--cases", f"1n1g {case}", "--dry-run"], expect=2)
        check(all(w in r.stderr for w in words) and r.stdout == "",
              f"--cases '1n1g {case}': exit 2 before any plan, {r.stderr.strip()}")
    # The matrix's own trainer flags after --: refused up front (the trainer said "given twice").
    for flag in ("--log-interval", "--max-steps"):
        r = run([matrix, *common, "--cases", "1n1g", "--dry-run", "--", flag, 5], expect=2)
        check(f"{flag} after -- is the matrix's own" in r.stderr and r.stdout == "",
              f"-- {flag} 5: exit 2 before any plan, {r.stderr.strip()}")


def layout_of(case):
    """'1n2g:tp2sp' -> (tp, pp, dp, v, sp), parsed here independently of the scripts."""
    nodes, gpus, spec = re.match(r"^(\d+)n(\d+)g:?(.*)$", case).groups()
    get = lambda k: int(re.search(k + r"(\d+)", spec).group(1)) if re.search(k + r"\d", spec) else 1  # noqa: E731
    tp, pp = get("tp"), get("pp")
    return tp, pp, int(nodes) * int(gpus) // (tp * pp), get("v"), "sp" in spec


def check_layout_matrix(tmp, kind, shards, cases, trainer_args, device_args):
    """One model over data, tensor and pipeline layouts of 2 CPU ranks, run, extracted and plotted."""
    started = time.monotonic()
    common = ["--data", shards, "--model", kind, "--model-size", "tiny", "--batch-size", 4, *device_args]
    trainer = ["--", "--grad-accum", ACCUM, *trainer_args]
    logs = os.path.join(tmp, f"layout-logs-{kind}")
    matrix = os.path.join(SCRIPTS, "dlperf_matrix.sh")
    dirs = {c: c.replace(":", "_") for c in cases}
    want = {c: layout_of(c) for c in cases}

    r = run([matrix, *common, "--gpus-per-node", 2, "--cases", " ".join(cases), "--runs", 1,
             "--log-root", logs, "--dry-run", *trainer])
    plan = dict(re.findall(r"^(1n\dg(?::\w+)?): (.*)$", r.stdout, re.M))
    commands = dict(re.findall(r"/(1n\dg\w*)/run1\.log: (.*)", r.stdout))
    check(list(plan) == cases and all(f"tensor {tp} × pipeline {pp} × data {dp}" in plan[c]
                                      and f"global batch {4 * ACCUM * dp} " in plan[c]
                                      for c, (tp, pp, dp, v, sp) in want.items()), f"{kind} --dry-run plan: {plan}")
    check(list(commands) == list(dirs.values()) and all(
        (f"--tensor-parallel {tp} --pipeline-parallel {pp}" in commands[dirs[c]]) == (":" in c)
        and (f"--virtual-stages {v}" in commands[dirs[c]]) == (v > 1)
        and ("--sequence-parallel" in commands[dirs[c]]) == sp for c, (tp, pp, dp, v, sp) in want.items()),
        f"{kind} --dry-run commands: {commands}")

    t0 = time.monotonic()
    r = run([matrix, *common, "--gpus-per-node", 2, "--cases", " ".join(cases), "--runs", RUNS,
             "--steps", LAYOUT_STEPS, "--log-root", logs, *trainer])
    print(r.stdout, end="")
    matrix_s = time.monotonic() - t0
    case_dir = os.path.join(logs, kind, "bs4_fp32")
    tree = sorted(os.path.relpath(os.path.join(d, f), logs) for d, _, files in os.walk(logs) for f in files)
    check(tree == sorted(f"{kind}/bs4_fp32/{d}/run{k}.log" for d in dirs.values() for k in range(1, RUNS + 1)),
          f"{kind} layout log tree {tree}")
    for case, d in dirs.items():
        with open(os.path.join(case_dir, d, "run1.log")) as f:
            cfg = [json.loads(line[8:]) for line in f if line.startswith("config: ")]
        tp, pp, dp, v, sp = want[case]
        check(len(cfg) == 1 and (cfg[0]["tensor_parallel"], cfg[0]["pipeline_parallel"], cfg[0]["data_parallel"],
                                 cfg[0]["virtual_stages"], cfg[0]["sequence_parallel"]) == (tp, pp, dp, v, sp)
              and cfg[0]["grad_accum"] == ACCUM and cfg[0]["global_batch"] == 4 * ACCUM * dp,
              f"{kind} {d}/run1.log config: tensor {tp} × pipeline {pp} × data {dp}, v {v}, sp {sp}, "
              f"global batch {4 * ACCUM * dp}")

    run(["/usr/bin/python3", os.path.join(SCRIPTS, "extract_logs.py"), case_dir, "--skip", LAYOUT_SKIP, "-q"])
    with open(os.path.join(case_dir, "result.json")) as f:
        result = json.load(f)
    group = result["groups"][0]
    got = {c["case"]: c for c in group["cases"]}
    check(list(got) == cases, f"{kind} result.json layout cases {list(got)}")
    params, seq = got[cases[0]]["parameters"], group["config"]["seq_len"]
    for name, c in got.items():
        tp, pp, dp, v, sp = want[name]
        check((c["tensor_parallel"], c["pipeline_parallel"], c["data_parallel"], c["virtual_stages"],
               c["sequence_parallel"], c["global_batch"], c["grad_accum"], c["micro_batch"], c["dir"])
              == (tp, pp, dp, v, sp, 4 * ACCUM * dp, ACCUM, 4, dirs[name]),
              f"{kind} {name}: tensor {c['tensor_parallel']} pipeline {c['pipeline_parallel']} data "
              f"{c['data_parallel']} v {c['virtual_stages']} sp {c['sequence_parallel']}, global batch {c['global_batch']}")
        check(c["parameters"] == params, f"{kind} {name}: seed formula over the whole model's {c['parameters']} "
              f"parameters (from {c['parameters_from']})")
        for run_ in c["run_details"]:
            ms = step_ms(run_["log"])[LAYOUT_SKIP:]
            rate = 4 * ACCUM * dp * len(ms) / (sum(ms) / 1e3)
            seed = params * 3 * 2 * seq * 4 * ACCUM * dp / (statistics.fmean(ms) / 1e3 * c["devices"]) / 1e12
            check(close(run_["samples_per_s"], rate) and close(run_["tflops_seed"], seed),
                  f"{kind} {name}: samples/s {run_['samples_per_s']:.2f} == {rate:.2f}, seed TFLOPs "
                  f"{run_['tflops_seed']:.5f} == {seed:.5f} from the logged step times")
        check(all(math.isfinite(c[k]) and c[k] > 0 for k in ("samples_per_s_median", "samples_per_s_mean",
                                                               "tflops_seed", "tflops_palm", "speedup", "device_mb")),
              f"{kind} {name}: finite samples/s {c['samples_per_s_median']:.1f}, TFLOPs {c['tflops_seed']:.5f} / "
              f"{c['tflops_palm']:.5f}, speedup {c['speedup']:.2f}")
    check(got["1n1g"]["speedup"] == 1.0 and group["base_case"] == "1n1g", f"{kind} layout speedups against 1n1g")

    with open(os.path.join(case_dir, "table.md")) as f:
        table = f.read()
    print(table)
    header, rows = table_rows(table)
    cols = [(r["case"], r["tp"], r["pp"], r["dp"], r["v"], r["sp"], r["global batch"]) for r in rows]
    check(cols == [(c, str(tp), str(pp), str(dp), str(v), "yes" if sp else "no", str(4 * ACCUM * dp))
                   for c, (tp, pp, dp, v, sp) in want.items()], f"{kind} table.md layout columns {cols}")
    check(all(math.isfinite(float(r["samples/s (median)"])) and float(r["TFLOPs/device (seed formula)"]) > 0
              and float(r["TFLOPs/device (PaLM)"]) > 0 for r in rows), f"{kind} table.md: finite samples/s and TFLOPs")

    png = os.path.join(tmp, f"layouts-{kind}.png")
    run(["/usr/bin/python3", os.path.join(SCRIPTS, "plot_throughput.py"), case_dir, "-o", png])
    with open(png, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000, f"layouts-{kind}.png: a PNG of {len(data)} bytes")
    check_layout_refusals(common)
    print(f"{kind} layout matrix: {matrix_s:.0f} s for {len(cases)} cases × {RUNS} runs, "
          f"{time.monotonic() - started:.0f} s with the plan, extraction, plot and refusals")


def main():
    if subprocess.run(["which", "mpirun"], capture_output=True).returncode != 0:
        cu.skip("mpirun not installed (openmpi-bin)")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        cu.skip("matplotlib not installed for /usr/bin/python3 (python3-matplotlib)")
    with cu.tempdir() as tmp:
        wordpiece, shards = os.path.join(tmp, "wordpiece"), os.path.join(tmp, "bert")
        run([cu.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 1000, "-o", wordpiece, SAMPLE])
        run([cu.tool("make-pretraining-shards"), "-q", "--model", "bert", "-i", SAMPLE, "--tokenizer",
             os.path.join(wordpiece, "vocab.txt"), "-o", shards, "--seq-len", 64, "--max-predictions", 10,
             "--dupe-factor", 2, "--num-shards", 2])
        common = ["--data", shards, "--model", "bert", "--model-size", "tiny", "--batch-size", 4, "--precision", "fp32",
                  "--device", "cpu", "--threads", 1, "--build-dir", cu.build_dir()]

        logs = os.path.join(tmp, "logs")
        r = run([os.path.join(SCRIPTS, "run_single_node.sh"), *common, "--gpus-per-node", 2, "--runs", RUNS,
                 "--steps", STEPS, "--log-root", logs])
        print(r.stdout, end="")
        check_logs(logs)

        case_dir = os.path.join(logs, "bert", "bs4_fp32")
        run(["/usr/bin/python3", os.path.join(SCRIPTS, "extract_logs.py"), case_dir, "--skip", SKIP, "-q"])
        check_result(case_dir)

        png = os.path.join(tmp, "plot.png")
        run(["/usr/bin/python3", os.path.join(SCRIPTS, "plot_throughput.py"), case_dir, "-o", png])
        with open(png, "rb") as f:
            data = f.read()
        check(data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000, f"plot.png: a PNG of {len(data)} bytes")

        # Multi-node: a hostfile on localhost only; then the plan for two hosts, not run.
        hosts = os.path.join(tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("localhost slots=2\n")
        multi = os.path.join(tmp, "multi")
        run([os.path.join(SCRIPTS, "run_multi_node.sh"), "--hostfile", hosts, *common, "--cases", "1n2g", "--runs", 1,
             "--steps", 3, "--log-root", multi])
        log = os.path.join(multi, "bert", "bs4_fp32", "1n2g", "run1.log")
        check(os.path.exists(log) and len(step_ms(log)) == 3, "run_multi_node.sh on localhost: 1n2g/run1.log, 3 steps")
        with open(hosts, "w") as f:
            f.write("# two nodes\nnode-a slots=2\nnode-b slots=2\n")
        r = run([os.path.join(SCRIPTS, "run_multi_node.sh"), "--hostfile", hosts, *common, "--runs", 1,
                 "--log-root", multi, "--dry-run"])
        planned = re.findall(r"/(\d+n\d+g)/run1\.log: (.*)", r.stdout)
        check([c for c, _ in planned] == ["1n1g", "1n2g", "2n2g"], f"2 hosts × 2 plan {[c for c, _ in planned]}")
        check(bool(planned) and " -np 4 " in planned[-1][1] and "-npernode 2" in planned[-1][1]
              and "--hostfile" in planned[-1][1], f"2n2g command: {planned[-1][1] if planned else None}")

        # Inside a Slurm allocation of 2 nodes × 2 tasks (its environment, no Slurm here): the same plan,
        # each case through srun.
        slurm_env = dict(ENV, SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="2", SLURM_NTASKS_PER_NODE="2(x2)")
        slurm_env.pop("SLURM_JOB_NODELIST", None)
        r = subprocess.run([os.path.join(SCRIPTS, "run_multi_node.sh"), *map(str, common), "--runs", "1",
                            "--log-root", multi, "--dry-run"], capture_output=True, text=True, env=slurm_env,
                           timeout=60)
        planned = re.findall(r"/(\d+n\d+g)/run1\.log: (.*)", r.stdout)
        check(r.returncode == 0 and [c for c, _ in planned] == ["1n1g", "1n2g", "2n2g"],
              f"Slurm 2 nodes × 2 plan {[c for c, _ in planned]} (exit {r.returncode}, {r.stderr.strip()})")
        check(bool(planned) and planned[-1][1].startswith("srun --nodes 2 --ntasks 4 --ntasks-per-node 2 --mpi=pmix")
              and "mpirun" not in planned[-1][1], f"Slurm 2n2g command: {planned[-1][1] if planned else None}")
        r = run([os.path.join(SCRIPTS, "run_multi_node.sh"), "--slurm", *common, "--dry-run"], expect=2)
        check("sbatch or salloc" in r.stderr, f"--slurm outside an allocation: exit 2, {r.stderr.strip()}")

        r = run([os.path.join(SCRIPTS, "run_single_node.sh"), *common, "--gpus-per-node", 2, "--cases", "2n1g",
                 "--log-root", multi], expect=2)
        check("2n1g" in r.stderr, f"a case the hosts do not allow: exit 2, {r.stderr.strip()}")
        r = run([os.path.join(SCRIPTS, "run_multi_node.sh"), *common], expect=2)
        check("--hostfile" in r.stderr, f"run_multi_node.sh without --hostfile: exit 2, {r.stderr.strip()}")
        check_errors(tmp, case_dir)

        # Layouts: GPT tiny (2 layers) on data, tensor, pipeline; BERT tiny at 4 layers adds sequence
        # parallel and the interleaved schedule.
        spm, gpt_shards = os.path.join(tmp, "spm"), os.path.join(tmp, "gpt")
        run([cu.tool("train-tokenizer"), "-q", "--kind", "sentencepiece", "--vocab-size", 100,
             "--character-coverage", 1.0, "-o", spm, SAMPLE])
        run([cu.tool("make-pretraining-shards"), "-q", "--model", "gpt", "-i", SAMPLE, "--tokenizer",
             os.path.join(spm, "spm.model"), "-o", gpt_shards])
        device_args = ["--precision", "fp32", "--device", "cpu", "--threads", 1, "--build-dir", cu.build_dir()]
        check_layout_matrix(tmp, "gpt", gpt_shards, GPT_LAYOUT_CASES, ["--seq-len", 64], device_args)
        check_layout_matrix(tmp, "bert", shards, BERT_LAYOUT_CASES, ["--layers", 4], device_args)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("OK")


if __name__ == "__main__":
    main()
