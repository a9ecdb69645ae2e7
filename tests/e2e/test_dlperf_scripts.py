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
  * errors: extract_logs.py on an empty directory, on a log without step lines and with nothing left
    after --skip exits 1 naming the directory or file; a case the hosts do not allow and
    run_multi_node.sh without --hostfile exit 2.
"""
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
SCRIPTS = os.path.join(SRC, "scripts")
SAMPLE = os.path.join(SRC, "tests", "data", "sample-docs.jsonl")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
STEPS, SKIP, RUNS = 30, 10, 2
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
    rows = [line for line in table.splitlines() if re.match(r"^\| \d", line)]
    check("| node num | gpu num/node | samples/s (median) |" in table and "TFLOPs/device (seed formula)" in table
          and "TFLOPs/device (PaLM)" in table and "memory" in table, "table.md has the DLPerf columns")
    check(len(rows) == 2 and rows[0].startswith("| 1 | 1 |") and rows[1].startswith("| 1 | 2 |")
          and rows[0].split("|")[5].strip() == "1.00", f"table.md rows: {rows}")


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

        r = run([os.path.join(SCRIPTS, "run_single_node.sh"), *common, "--gpus-per-node", 2, "--cases", "2n1g",
                 "--log-root", multi], expect=2)
        check("2n1g" in r.stderr, f"a case the hosts do not allow: exit 2, {r.stderr.strip()}")
        r = run([os.path.join(SCRIPTS, "run_multi_node.sh"), *common], expect=2)
        check("--hostfile" in r.stderr, f"run_multi_node.sh without --hostfile: exit 2, {r.stderr.strip()}")
        check_errors(tmp, case_dir)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("OK")


if __name__ == "__main__":
    main()
