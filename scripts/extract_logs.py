#!/usr/bin/env python3
"""DLPerf-style tables from the logs scripts/run_single_node.sh and run_multi_node.sh write.

    scripts/extract_logs.py LOGDIR [--skip 20] [--average 100] [-o OUTDIR]

LOGDIR holds <case>/run<k>.log files at any depth (logs/, logs/bert/ or logs/bert/bs32_fp32/), a
<case> being <N>n<G>g (pure data parallel) or <N>n<G>g_<layout> (1n8g_tp2pp4, 2n8g_tp4pp2dp2,
1n4g_tp2pp2v2sp: see scripts/dlperf_matrix.sh --help); the case directories under one parent (e.g.
bert/bs32_fp32) form one table. Per run: the step lines after the first --skip iterations, at most
--average of them, give seconds per iteration (mean), samples/s (the config line's global batch
over those seconds), TFLOPs per device and memory. Evaluation lines ("eval at step …", from
--eval-interval) are not step lines and are ignored: the trainer times an evaluation apart from
every step, so samples/s never includes it. Per case: the layout the trainer's `config:`
line reports (tensor, pipeline and data parallel sizes, virtual stages, sequence parallel,
micro-batch, grad accum, global batch = micro-batch × grad accum × data parallel), mean and median
of the runs' samples/s, speedup = median / the median of 1n1g (the pure single-device case), the
median seconds per iteration (seed 003's latency), and TFLOPs per device two ways:
  seed formula  params × (4 with --recompute, else 3) × 2 × seq × global_batch / (time × devices),
                time = seconds per iteration, devices = all ranks: seed 002's (BigScience Megatron)
                formula. params is the whole model's count: the config line of a tensor or
                pipeline case reports rank 0's shard, so those take it from a pure data-parallel
                case of the same table (or from a "model_parameters" key when the trainer writes
                one); with neither the column is left empty and a warning names the case.
  PaLM          the trainer's own per-device figure, the mean of the logged TFLOPs over the
                window (PaLM's appendix B: 6 × matmul parameters per token plus the attention
                products, the MLM head on masked positions only, divided over tensor × pipeline;
                see docs/training.md, "FLOPs and MFU").
Memory: the largest device and host (RSS) MB that rank 0 logged in any run of the case (with
pipeline parallel, rank 0 is the first stage).
Writes OUTDIR/result.json and OUTDIR/table.md (OUTDIR defaults to LOGDIR) and prints the table.
Exit 1 with the file named on a missing or empty LOGDIR, or a log without step lines.
"""
import argparse
import json
import os
import re
import statistics
import sys

CASE_DIR = re.compile(r"^(\d+)n(\d+)g(?:_((?:tp\d+|pp\d+|dp\d+|v\d+|sp)+))?$")
LAYOUT_PART = re.compile(r"(tp|pp|dp|v)(\d+)|sp")
RUN_LOG = re.compile(r"^run(\d+)\.log$")
UNITS = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3, "TB": 1e6}


class LogError(Exception):
    pass


def parse_step(line):
    """One 'step  N/M | loss … | 61.8 ms | data … | 258.8 samples/s | … TFLOPs | … | device 15.41 MB | host …'
    line as a dict; fields are matched by their unit, so added fields do not break it."""
    parts = [p.strip() for p in line.split(" | ")]
    m = re.match(r"^step\s+(\d+)/(\d+)$", parts[0])
    if not m:
        return None
    rec = {"step": int(m.group(1)), "max_steps": int(m.group(2))}
    for p in parts[1:]:
        for key, pattern in (("ms", r"^([\d.]+) ms$"), ("samples_per_s", r"^([\d.]+) samples/s$"),
                             ("tokens_per_s", r"^([\d.]+) tokens/s$"), ("tflops", r"^([\d.]+) TFLOPs$"),
                             ("mfu", r"^MFU ([\d.]+)%$")):
            m = re.match(pattern, p)
            if m:
                rec[key] = float(m.group(1))
        m = re.match(r"^(device|host) ([\d.]+) (B|kB|MB|GB|TB)$", p)
        if m:
            rec[m.group(1) + "_mb"] = float(m.group(2)) * UNITS[m.group(3)]
    missing = [k for k in ("ms", "samples_per_s", "tflops") if k not in rec]
    if missing:
        raise LogError(f"step line without {', '.join(missing)}: {line.strip()[:160]}")
    return rec


def read_log(path):
    config, steps = None, []
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("config: "):
                try:
                    config = json.loads(line[len("config: "):])
                except json.JSONDecodeError as e:
                    raise LogError(f"{path}:{number}: config line is not JSON ({e})")
            elif line.startswith("step "):
                try:
                    rec = parse_step(line)
                except LogError as e:
                    raise LogError(f"{path}:{number}: {e}")
                if rec:
                    steps.append(rec)
    if not steps:
        raise LogError(f"{path}: no step lines (expected lines like 'step 1/120 | loss … | … ms | … samples/s | …'; "
                       "did the run fail, or run without --log-interval 1?)")
    return config, steps


def seed_tflops(parameters, config, time, devices):
    """Seed 002's formula: params × (4 with recompute, else 3) × 2 × seq × global batch / (s/iter × devices)."""
    factor = 4 if config.get("recompute") else 3
    return parameters * factor * 2 * config["seq_len"] * config["global_batch"] / (time * devices) / 1e12


def summarize_run(path, nodes, gpus, skip, average, parameters=None):
    """One run's window. parameters: the whole model's count for the seed formula (default: the
    config line's own, which is the whole model only without tensor or pipeline parallelism)."""
    config, steps = read_log(path)
    window = [s for s in steps if skip < s["step"] <= skip + average]
    if not window:
        raise LogError(f"{path}: {len(steps)} step lines, the last is step {steps[-1]['step']}: "
                       f"nothing left after --skip {skip} (run more --steps or pass a smaller --skip)")
    devices = nodes * gpus
    if config and config.get("world_size") not in (None, devices):
        print(f"warning: {path}: world_size {config['world_size']} but the directory says {devices} devices",
              file=sys.stderr)
        devices = config["world_size"]
    seconds = [s["ms"] / 1e3 for s in window]
    time = statistics.fmean(seconds)
    if config and "global_batch" in config:
        samples = config["global_batch"] * len(window)
    else:
        samples = sum(s["samples_per_s"] * t for s, t in zip(window, seconds))
    run = {"log": path, "steps_logged": len(steps), "steps_averaged": len(window),
           "first_step": window[0]["step"], "last_step": window[-1]["step"],
           "ms_per_iter": time * 1e3, "samples_per_s": samples / sum(seconds),
           "tflops_palm": statistics.fmean(s["tflops"] for s in window),
           "device_mb": max((s.get("device_mb", 0.0) for s in steps), default=0.0),
           "host_mb": max((s.get("host_mb", 0.0) for s in steps), default=0.0), "tflops_seed": None}
    if parameters is None and config and not model_sharded(config):
        parameters = config.get("model_parameters", config.get("parameters"))
    if parameters is not None and config and all(k in config for k in ("seq_len", "global_batch")):
        run["tflops_seed"] = seed_tflops(parameters, config, time, devices)
    return config, run


def model_sharded(config):
    return config.get("tensor_parallel", 1) * config.get("pipeline_parallel", 1) > 1


def parse_layout(text):
    """'tp2pp4dp2v2sp' -> {'tp': 2, 'pp': 4, 'dp': 2, 'v': 2, 'sp': 1}; '' or None -> {}."""
    return {m.group(1) or "sp": int(m.group(2)) if m.group(1) else 1 for m in LAYOUT_PART.finditer(text or "")}


def find_cases(logdir):
    """{group: {(nodes, gpus, layout): [run log paths]}}, group = the case directories' parent relative to
    logdir, layout the directory name's part after '_' ('' for a plain <N>n<G>g)."""
    groups = {}
    for parent, dirs, files in os.walk(logdir):
        dirs.sort()
        m = CASE_DIR.match(os.path.basename(parent))
        logs = sorted((f for f in files if RUN_LOG.match(f)), key=lambda f: int(RUN_LOG.match(f).group(1)))
        if not m or not logs:
            continue
        group = os.path.relpath(os.path.dirname(parent), logdir)
        key = (int(m.group(1)), int(m.group(2)), m.group(3) or "")
        groups.setdefault(group, {})[key] = [os.path.join(parent, f) for f in logs]
    return groups


def case_layout(nodes, gpus, layout, config, path):
    """Tensor, pipeline, data sizes, virtual stages, sequence parallel: from the config line (what ran),
    else from the directory name; a disagreement between the two is warned about."""
    devices = nodes * gpus
    named = parse_layout(layout)
    tp, pp = named.get("tp", 1), named.get("pp", 1)
    dirs = {"tensor_parallel": tp, "pipeline_parallel": pp, "data_parallel": devices // (tp * pp),
            "virtual_stages": named.get("v", 1), "sequence_parallel": bool(named.get("sp"))}
    out = dict(dirs)
    for key, want in dirs.items():
        if config and key in config:
            out[key] = type(want)(config[key])
            if out[key] != want:
                print(f"warning: {path}: the config line says {key} {config[key]}, the directory name "
                      f"{os.path.basename(os.path.dirname(path))} says {want}", file=sys.stderr)
    return out


def summarize_group(name, cases, skip, average):
    # The whole model's parameter count for the seed formula: from a case that holds the whole model.
    configs = {}
    for key, paths in cases.items():
        configs[key] = read_log(paths[0])[0] or {}
    pure = [(k, c) for k, c in sorted(configs.items(), key=lambda kc: (kc[0][0] * kc[0][1], kc[0]))
            if c.get("parameters") is not None and not model_sharded(c)]
    same_model = lambda a, b: all(a.get(f) == b.get(f) for f in ("kind", "model", "layers", "hidden"))  # noqa: E731
    whole = pure[0] if pure else None

    def order(key):
        nodes, gpus, layout = key
        lay = case_layout(nodes, gpus, layout, configs[key], cases[key][0])
        # As seed 003 orders them: data parallel, then tensor (2D), then pipeline cases.
        return (nodes * gpus, nodes, layout != "", lay["pipeline_parallel"], -lay["data_parallel"],
                lay["tensor_parallel"], lay["virtual_stages"], lay["sequence_parallel"], layout)

    out_cases, first_config = [], None
    for key in sorted(cases, key=order):
        nodes, gpus, layout = key
        paths = cases[key]
        cfg0 = configs[key]
        parameters, parameters_from = None, None
        if "model_parameters" in cfg0:
            parameters, parameters_from = cfg0["model_parameters"], "model_parameters"
        elif cfg0 and not model_sharded(cfg0) and cfg0.get("parameters") is not None:
            parameters, parameters_from = cfg0["parameters"], "config"
        else:
            match = next(((k, c) for k, c in pure if same_model(c, cfg0)), None)
            if match:
                (wn, wg, wl), wc = match
                parameters, parameters_from = wc["parameters"], case_name(wn, wg, wl)
        runs = []
        for path in paths:
            cfg, run = summarize_run(path, nodes, gpus, skip, average, parameters)
            first_config = first_config or cfg
            runs.append(run)
        case = case_name(nodes, gpus, layout)
        if parameters is None and cfg0 and model_sharded(cfg0):
            print(f"warning: {case}: the config line's parameters ({cfg0.get('parameters')}) are rank 0's shard "
                  f"and no pure data-parallel case of the same model is in {paths[0].rsplit(os.sep, 2)[0]}: "
                  "seed-formula TFLOPs left out",
                  file=sys.stderr)
        lay = case_layout(nodes, gpus, layout, cfg0, paths[0])
        rates = [r["samples_per_s"] for r in runs]
        seed = [r["tflops_seed"] for r in runs if r["tflops_seed"] is not None]
        micro = cfg0.get("batch_size")
        accum = cfg0.get("grad_accum", 1 if micro is not None else None)
        out_cases.append({
            "case": case, "nodes": nodes, "gpus_per_node": gpus, "devices": nodes * gpus,
            "runs": len(runs), "samples_per_s_mean": statistics.fmean(rates),
            "samples_per_s_median": statistics.median(rates), "samples_per_s_runs": rates,
            "ms_per_iter_median": statistics.median(r["ms_per_iter"] for r in runs),
            "tflops_seed": statistics.fmean(seed) if seed else None,
            "tflops_palm": statistics.fmean(r["tflops_palm"] for r in runs),
            "device_mb": max(r["device_mb"] for r in runs), "host_mb": max(r["host_mb"] for r in runs),
            "dir": os.path.basename(os.path.dirname(paths[0])), "layout": layout, **lay,
            "micro_batch": micro, "grad_accum": accum,
            "global_batch": cfg0.get("global_batch",
                                     micro * accum * lay["data_parallel"] if micro is not None else None),
            "parameters": parameters, "parameters_from": parameters_from,
            "run_details": runs})
    base = next((c for c in out_cases if c["case"] == "1n1g"), None) or next(
        (c for c in out_cases if c["devices"] == 1 and c["tensor_parallel"] == c["pipeline_parallel"] == 1), None)
    for c in out_cases:
        c["speedup"] = c["samples_per_s_median"] / base["samples_per_s_median"] if base else None
        c["scaling_efficiency"] = c["speedup"] / c["devices"] if base else None
    # The table's config: that of a case holding the whole model (the base when there is one).
    config = first_config
    if whole:
        config = configs[whole[0]]
    if base:
        config = read_log(base["run_details"][0]["log"])[0] or config
    return {"name": name, "config": config, "base_case": base["case"] if base else None, "cases": out_cases}


def case_name(nodes, gpus, layout):
    """'1n8g' or, with a layout, '1n8g:tp2pp4' (as scripts/dlperf_matrix.sh --cases takes it)."""
    return f"{nodes}n{gpus}g" + (f":{layout}" if layout else "")


def fmt(x, digits):
    return "—" if x is None else f"{x:.{digits}f}"


def table(group, skip, average):
    cfg = group["config"] or {}
    name = group["name"]
    cases = group["cases"]
    pure = all(c["tensor_parallel"] == c["pipeline_parallel"] == 1 for c in cases)
    title = " · ".join(str(x) for x in (
        f"{cfg.get('kind', '?')} {cfg.get('model', '?')}" if cfg else name,
        (f"batch {cfg['batch_size']} per device" if pure else f"micro-batch {cfg['batch_size']} per data-parallel rank")
        if "batch_size" in cfg else None,
        f"grad accum {cfg['grad_accum']}" if cfg.get("grad_accum", 1) != 1 else None,
        cfg.get("precision"), f"seq {cfg['seq_len']}" if "seq_len" in cfg else None,
        "recompute" if cfg.get("recompute") else None, f"ZeRO-{cfg['zero']}" if cfg.get("zero") else None,
        cfg.get("device")) if x)
    runs = [r for c in cases for r in c["run_details"]]
    first, last = min(r["first_step"] for r in runs), max(r["last_step"] for r in runs)
    where = "" if name == "." else f"`{name}`: "
    base = group.get("base_case")
    lines = [f"### {title}", "",
             f"{where}steps {first}–{last} of each run averaged (--skip {skip} --average {average}); "
             f"median and mean over runs; speedup against the {base or '1n1g'} median"
             f"{'' if base else ' (not in this table)'}; tp, pp, dp: tensor, pipeline, data parallel sizes, "
             "v: virtual stages, sp: sequence parallel; global batch = micro-batch × grad accum × dp; "
             "ms/iter: median over runs; memory: rank 0's.", "",
             "| node num | gpu num/node | case | tp | pp | dp | v | sp | micro-batch | grad accum | global batch | "
             "ms/iter | samples/s (median) | samples/s (mean) | speedup | TFLOPs/device (seed formula) | "
             "TFLOPs/device (PaLM) | memory device / host (MB) | runs |",
             "|---:|---:|:---|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in cases:
        # Rows start "| nodes | gpus |" as before the layout columns (scripts and tests grep for "| 1 | 1 |").
        lines.append(f"| {c['nodes']} | {c['gpus_per_node']} | {c['case']} | {c['tensor_parallel']} | "
                     f"{c['pipeline_parallel']} | {c['data_parallel']} | {c['virtual_stages']} | "
                     f"{'yes' if c['sequence_parallel'] else 'no'} | {fmt_int(c['micro_batch'])} | "
                     f"{fmt_int(c['grad_accum'])} | {fmt_int(c['global_batch'])} | {c['ms_per_iter_median']:.1f} | "
                     f"{c['samples_per_s_median']:.2f} | {c['samples_per_s_mean']:.2f} | {fmt(c['speedup'], 2)} | "
                     f"{fmt(c['tflops_seed'], 4)} | {c['tflops_palm']:.4f} | {c['device_mb']:.1f} / {c['host_mb']:.1f} | "
                     f"{c['runs']} |")
    return "\n".join(lines) + "\n"


def fmt_int(x):
    return "—" if x is None else str(x)


def write_atomic(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="See the top of this file for the formulas.")
    ap.add_argument("logdir", help="directory with <N>n<G>g[_<layout>]/run<k>.log (at any depth)")
    ap.add_argument("--skip", type=int, default=20, help="warm-up iterations left out of each run (default 20)")
    ap.add_argument("--average", type=int, default=100, help="iterations averaged after them (default 100)")
    ap.add_argument("-o", "--out-dir", help="where result.json and table.md go (default LOGDIR)")
    ap.add_argument("-q", "--quiet", action="store_true", help="do not print the table")
    args = ap.parse_args(argv)
    if args.skip < 0 or args.average < 1:
        ap.error("--skip must be >= 0 and --average >= 1")
    try:
        if not os.path.isdir(args.logdir):
            raise LogError(f"{args.logdir}: no such log directory")
        groups = find_cases(args.logdir)
        if not groups:
            raise LogError(f"{args.logdir}: no <N>n<G>g[_<layout>]/run<k>.log files under it (run scripts/run_single_node.sh first)")
        result = {"logdir": os.path.abspath(args.logdir), "skip": args.skip, "average": args.average,
                  "groups": [summarize_group(name, cases, args.skip, args.average)
                             for name, cases in sorted(groups.items())]}
    except (LogError, OSError) as e:
        print(f"extract_logs.py: {e}", file=sys.stderr)
        return 1
    out = args.out_dir or args.logdir
    os.makedirs(out, exist_ok=True)
    md = "\n".join(table(g, args.skip, args.average) for g in result["groups"])
    write_atomic(os.path.join(out, "result.json"), json.dumps(result, indent=1) + "\n")
    write_atomic(os.path.join(out, "table.md"), md)
    if not args.quiet:
        print(md, end="")
        print(f"wrote {os.path.join(out, 'result.json')} and {os.path.join(out, 'table.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
