#!/usr/bin/env bash
# The GPU check of issue #47 in one call of the device tool (one H200, 16 cores; its image has CUDA,
# PyTorch, transformers and triton but none of our Debian libraries), run there from the repository
# root with the bundle that scripts/bench/gpu_bundle.sh made here carried along (docs/benchmarks.md,
# "GPU check", has the call):
#   1. the GPU (nvidia-smi) and where the bundle's CUDA libraries come from (the image's: PyTorch's);
#   2. the gpu tests (tests/gpu/*_test.cpp, the bundle's gpu_* binaries);
#   3. bf16 training throughput of our trainers, then of the same models in PyTorch on the same GPU
#      (scripts/bench/trainer_peer.py: HF BertForPreTraining / GPT2LMHeadModel, bf16 autocast, SDPA,
#      fused AdamW, clipping, BERT's MLM head on the masked positions), eager and torch.compile, same
#      batch and sequence: BERT-base and BERT-large at seq 128 (batch 256) and 512 (batch 32), GPT-2
#      124M and 350M at seq 1024 (batch 16); --warmup steps, then --steps timed;
#   4. samples/s, TFLOPs (our trainer's FLOP count, PaLM's), MFU against --peak-tflops (989: H100 and
#      H200 dense bf16), peak device memory and our ratio to each peer, in OUT/gpu.json, OUT/gpu.md,
#      OUT/gpu.log (this output) and OUT/details.log (every run's own output); the table prints last.
# Everything fits --budget seconds: a case that would start past it is skipped (torch.compile ones
# first, as they run last), and each run is stopped at what is left.
#   scripts/bench/gpu.sh [--bundle gpu-bundle] [--out DIR (default $OUT)] [--budget 420] [--steps 10]
#                        [--warmup 3] [--peak-tflops 989] [--compile-seconds 100] [--only REGEX]
#                        [--runs tests,ours,eager,compile]
#   scripts/bench/gpu.sh --dry-run [--build build] [--out DIR]
# --only keeps the cases whose "kind model seq" matches REGEX and --runs the runs named (a rerun of a
# few: --runs compile --only 'large|350M' fills in torch.compile rows a first call had no time for).
# --dry-run runs the same script here on the CPU in seconds: our trainers from --build
# with --device cpu and tiny models, the peers on Debian's torch (CPU, fp32: its 1.13 autocast cannot
# run HF's BERT in bf16; eager attention: no SDPA before torch 2; no torch.compile, so those rows are
# skipped), the gpu tests as they skip without a GPU; tests/e2e/test_gpu_sh.py runs it in CI.

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
dry=0 args=()
for arg in "$@"; do
  if [[ $arg == --dry-run ]]; then dry=1; else args+=("$arg"); fi
done
bundle=gpu-bundle build=build out=${OUT:-} budget=420 steps="" warmup="" peak=989 compile_seconds=100 only=. runs=tests,ours,eager,compile
bench_args --bundle=bundle --build=build --out=out --budget=budget --steps=steps --warmup=warmup --peak-tflops=peak \
  --compile-seconds=compile_seconds --only=only --runs=runs -- "${args[@]}"
bench_tmpdir gpu
tmp=$bench_tmp
if [[ -z $out ]]; then
  ((dry)) || { echo "gpu.sh: no --out and no \$OUT: where do the results go?" >&2; exit 2; }
  out=$tmp/out
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
for run in ${runs//,/ }; do
  [[ $run =~ ^(tests|ours|eager|compile)$ ]] || { echo "gpu.sh: --runs takes tests, ours, eager, compile, not $run" >&2; exit 2; }
done
runs=,$runs,

main() {
  SECONDS=0
  local details=$out/details.log
  : >"$details"
  if ((dry)); then
    steps=${steps:-2} warmup=${warmup:-1}
    echo "== gpu.sh --dry-run: CPU, tiny models, our binaries from $build, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    bench_build_missing "$build" trainer/bert_pretrain trainer/gpt_pretrain datagen/make-pretraining-shards >>"$details"
    bin=$build/trainer
    test_bins=()
    for t in "$build"/tests/gpu_*_test; do [[ -x $t ]] && test_bins+=("$t"); done
    scripts/bench/gpu_bundle.sh --shards-only "$tmp/shards" --build "$build"
    shards=$tmp/shards manifest=""
    libpath=${LD_LIBRARY_PATH:-}
    py=.venv/bin/python
    [[ -x $py ]] || py=python3
    report_py=/usr/bin/python3
    cases=("bert tiny 128 4 20" "bert tiny 512 2 80" "gpt tiny 256 2")
    compile_order=("${cases[@]}")
    ours_flags=(--device cpu --threads 2 --workers 1)
    peer_flags=(--device cpu --precision fp32 --threads 2)
    per_case=5 compile_seconds=5
  else
    steps=${steps:-10} warmup=${warmup:-3}
    echo "== gpu.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget} s"
    unpack_bundle
    bin=$B/bin shards=$B/shards manifest=$B/MANIFEST.txt
    test_bins=("$B"/bin/gpu_*)
    py=python3 report_py=python3
    cases=("bert base 128 256 20" "bert base 512 32 80" "bert large 128 256 20" "bert large 512 32 80"
      "gpt 124M 1024 16" "gpt 350M 1024 16")
    compile_order=("bert large 128 256 20" "gpt 124M 1024 16" "bert large 512 32 80" "gpt 350M 1024 16"
      "bert base 128 256 20" "bert base 512 32 80")
    ours_flags=(--device cuda --workers 4)
    peer_flags=(--device cuda --precision bf16 --threads "$(nproc)")
    per_case=15
    export TORCHINDUCTOR_CACHE_DIR=$tmp/inductor
  fi
  local c kept=()
  for c in "${cases[@]}"; do [[ $(cut -d' ' -f1-3 <<<"$c") =~ $only ]] && kept+=("$c"); done
  cases=("${kept[@]}") kept=()
  for c in "${compile_order[@]}"; do [[ $(cut -d' ' -f1-3 <<<"$c") =~ $only ]] && kept+=("$c"); done
  compile_order=("${kept[@]}")

  echo "== GPU"
  local smi
  smi=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
  if [[ -x $smi ]]; then
    "$smi" || true
    "$smi" --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
      --format=csv >"$tmp/gpu.csv" || true
  else
    echo "no nvidia-smi here"
  fi

  : >"$tmp/tests.tsv"
  if [[ $runs == *,tests,* ]]; then
    echo "== gpu tests"
    local t name rc s
    for t in "${test_bins[@]}"; do
      name=$(basename "$t") s=$SECONDS
      set +e
      timeout 240 env LD_LIBRARY_PATH="$libpath" "$t" --gtest_brief=1 >"$tmp/$name.log" 2>&1
      rc=$?
      set -e
      printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - s))" >>"$tmp/tests.tsv"
      { echo "==== $name (exit $rc)"; cat "$tmp/$name.log"; } >>"$details"
      echo "$name: exit $rc, $((SECONDS - s)) s: $(grep -E '^\[ *(PASSED|SKIPPED|FAILED) *\] [0-9]+ test' "$tmp/$name.log" | tr '\n' ' ')"
      grep -E '^\[  FAILED  \] [A-Za-z]' "$tmp/$name.log" || true
    done
  fi

  echo "== ours: bert_pretrain / gpt_pretrain --precision bf16, $warmup + $steps steps (peers reserve $((per_case * ${#cases[@]} + 30)) s)"
  : >"$tmp/ours.tsv"
  local i=0 kind model seq batch pred data extra left cap
  for c in "${cases[@]}"; do
    read -r kind model seq batch pred <<<"$c"
    i=$((i + 1)) pred=${pred:-0}
    if [[ $runs != *,ours,* ]]; then
      printf '%s\t%s\t%s\t%s\t%s\t%s\tnotrun\t0\n' "$i" "$kind" "$model" "$seq" "$batch" "$pred" >>"$tmp/ours.tsv"
      continue
    fi
    left=$((budget - SECONDS - per_case * ${#cases[@]} - 30))
    cap=$((left < 240 ? left : 240))
    if ((cap < 20)); then
      printf '%s\t%s\t%s\t%s\t%s\t%s\tskipped\t0\n' "$i" "$kind" "$model" "$seq" "$batch" "$pred" >>"$tmp/ours.tsv"
      echo "$c: skipped, $left s left"
      continue
    fi
    extra=()
    if [[ $kind == bert ]]; then data=$shards/bert$seq; else data=$shards/gpt extra=(--seq-len "$seq"); fi
    s=$SECONDS
    set +e
    timeout "$cap" env LD_LIBRARY_PATH="$libpath" "$bin/${kind}_pretrain" --data "$data" --model "$model" \
      --batch-size "$batch" --max-steps $((warmup + steps)) --precision bf16 --log-dir "$tmp/ours-$i" \
      --log-interval 1000 --eval-interval 0 "${ours_flags[@]}" "${extra[@]}" >"$tmp/ours-$i.log" 2>&1
    rc=$?
    set -e
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$kind" "$model" "$seq" "$batch" "$pred" "$rc" "$((SECONDS - s))" \
      >>"$tmp/ours.tsv"
    { echo "==== ours $c (exit $rc)"; cat "$tmp/ours-$i.log"; } >>"$details"
    echo "$c: exit $rc, $((SECONDS - s)) s: $(grep -E '^summary|error' "$tmp/ours-$i.log" | tail -1)"
  done

  : >"$tmp/peers.jsonl"
  local case_args=() compile_args=()
  for c in "${cases[@]}"; do case_args+=(--case "$c"); done
  for c in "${compile_order[@]}"; do compile_args+=(--case "$c"); done
  [[ $runs != *,eager,* ]] || run_peer eager "${case_args[@]}" -- --case-seconds "$per_case" --ceilings
  [[ $runs != *,compile,* ]] || run_peer compile "${compile_args[@]}" -- --compile --case-seconds "$compile_seconds"

  echo "== report ($SECONDS s of $budget)"
  GPU_SH_DRY=$dry GPU_SH_OUT=$out GPU_SH_TMP=$tmp GPU_SH_MANIFEST=$manifest GPU_SH_PEAK=$peak GPU_SH_BUDGET=$budget \
    GPU_SH_ELAPSED=$SECONDS GPU_SH_WARMUP=$warmup GPU_SH_STEPS=$steps GPU_SH_RUNS=$runs "$report_py" - <<'PY'
import csv, json, os, re, statistics, time

E = os.environ
dry, out, tmp, peak = E["GPU_SH_DRY"] == "1", E["GPU_SH_OUT"], E["GPU_SH_TMP"], float(E["GPU_SH_PEAK"])
warmup = int(E["GPU_SH_WARMUP"])
NAMES = {("bert", "base"): "BERT-base", ("bert", "large"): "BERT-large", ("gpt", "124M"): "GPT-2 124M",
         ("gpt", "350M"): "GPT-2 350M"}
MFU_GOALS = {("bert", "large", 128): 0.50, ("bert", "large", 512): 0.60, ("gpt", "124M", 1024): 0.45,
             ("gpt", "350M", 1024): 0.50}  # issue #47's targets
GOAL_EAGER, GOAL_COMPILE = 1.3, 1.0


def rows(path):
    return list(csv.reader(open(path), delimiter="\t")) if os.path.exists(path) else []


def records(path):  # JSON lines; a run stopped mid-line leaves a last one cut short
    out = []
    for line in open(path) if os.path.exists(path) else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def error_line(log):
    lines = [l.strip() for l in open(log, errors="replace")] if os.path.exists(log) else []
    errors = [l for l in lines if "error" in l.lower()]
    return (errors or lines or ["(no output)"])[-1][:300]


def ours(i, kind, model, seq, batch, pred, rc, seconds):
    r = {"impl": "ours", "seconds": int(seconds)}
    if rc in ("skipped", "notrun"):
        return {**r, "status": "skipped" if rc == "skipped" else "not run",
                "note": "time budget" if rc == "skipped" else "--runs left it out"}
    metrics = os.path.join(tmp, f"ours-{i}", "metrics.jsonl")
    recs = [x for x in records(metrics) if "ms" in x and not x.get("eval")]
    timed = [x for x in recs if x["step"] > warmup]
    stopped = rc in ("124", "137")  # timeout's: the run outlasted its share of the budget
    if (rc != "0" and not stopped) or len(timed) < (1 if rc == "0" else 2):
        return {**r, "status": "timeout" if stopped else "failed", "exit": int(rc), "steps_done": len(recs),
                "note": error_line(os.path.join(tmp, f"ours-{i}.log"))}
    if stopped:
        r["note"] = f"stopped at its time cap after {len(recs)} steps: the figures are of steps {warmup + 1}-{len(recs)}"
    ms = statistics.median(x["ms"] for x in timed)
    flops = statistics.fmean(x["tflops"] * x["ms"] * 1e9 for x in timed)  # per step (the masked count varies)
    return {**r, "status": "ok", "median_ms": ms, "samples_per_s": batch * 1e3 / ms, "flops_per_step": flops,
            "tflops": flops / ms / 1e9, "peak_mb": max(x["device_mb"] for x in recs),
            "data_ms": statistics.median(x["data_ms"] for x in timed), "loss": timed[-1]["loss"],
            "steps": [{k: x[k] for k in ("step", "ms", "loss", "tflops", "device_mb")} for x in recs]}


peers = records(os.path.join(tmp, "peers.jsonl"))
cases = []
for i, kind, model, seq, batch, pred, rc, seconds in rows(os.path.join(tmp, "ours.tsv")):
    seq, batch, pred = int(seq), int(batch), int(pred)
    c = {"kind": kind, "model": model, "seq": seq, "batch": batch, "predictions": pred,
         "name": NAMES.get((kind, model), f"{kind.upper() if kind == 'gpt' else 'BERT'} {model}"),
         "mfu_goal": MFU_GOALS.get((kind, model, seq)), "ours": ours(i, kind, model, seq, batch, pred, rc, seconds)}
    for impl in ("pytorch eager", "pytorch compile"):
        got = [p for p in peers if p["impl"] == impl and (p["kind"], p["model"], p["seq"], p["batch"]) == (kind, model, seq, batch)]
        if got:
            c[impl] = got[0]
        elif f",{impl.split()[1]}," not in E["GPU_SH_RUNS"]:
            c[impl] = {"impl": impl, "status": "not run", "note": "--runs left it out"}
        else:
            c[impl] = {"impl": impl, "status": "missing", "note": "no result: its process was stopped at the budget or failed (details.log)"}
    for r in (c["ours"], c["pytorch eager"], c["pytorch compile"]):
        if r.get("status") == "ok":
            r["mfu"] = r["tflops"] / peak
    o = c["ours"]
    for impl, key in (("pytorch eager", "eager"), ("pytorch compile", "compile")):
        p = c[impl]
        if o["status"] == "ok" and p.get("status") == "ok":
            c[f"ours_over_{key}"] = o["samples_per_s"] / p["samples_per_s"]
            if p.get("peak_mb"):
                c[f"memory_over_{key}"] = o["peak_mb"] / p["peak_mb"]
    cases.append(c)

tests = [{"binary": n, "exit": int(rc), "seconds": int(s)} for n, rc, s in rows(os.path.join(tmp, "tests.tsv"))]
for t in tests:
    text = open(os.path.join(tmp, t["binary"] + ".log"), errors="replace").read()
    for word in ("PASSED", "SKIPPED", "FAILED"):  # gtest's summary lines: "[  SKIPPED ] 3 tests, listed below:"
        t[word.lower()] = sum(int(m.group(1)) for m in re.finditer(rf"^\[ *{word} *\] (\d+) tests?\b", text, re.M))
gpu = {}
gpu_csv = os.path.join(tmp, "gpu.csv")
if os.path.exists(gpu_csv):
    lines = [l for l in csv.reader(open(gpu_csv), skipinitialspace=True)]
    if len(lines) > 1:
        gpu = dict(zip(lines[0], lines[1]))
manifest = E["GPU_SH_MANIFEST"]
bundle = [l.rstrip("\n") for l in open(manifest)] if manifest and os.path.exists(manifest) else []
bundle = bundle[:bundle.index("files:")] if "files:" in bundle else bundle
first_peer = next((p for p in peers if "torch" in p), {})
measured = next((p for p in peers if p["impl"] == "ceilings" and p["status"] == "ok"), None)
result = {"mode": "dry-run (CPU, tiny models)" if dry else "gpu", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
          "gpu": gpu, "torch": first_peer.get("torch"), "transformers": first_peer.get("transformers"), "bundle": bundle,
          "peak_tflops": peak, "ceilings": measured, "warmup_steps": warmup, "timed_steps": int(E["GPU_SH_STEPS"]),
          "budget_s": int(E["GPU_SH_BUDGET"]), "elapsed_s": int(E["GPU_SH_ELAPSED"]), "tests": tests, "cases": cases}
json.dump(result, open(os.path.join(out, "gpu.json"), "w"), indent=1)


def figure(v):  # 3 significant digits below 100 (the dry run's tiny CPU figures), else one decimal
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.1f}"


def num(r, key):
    return figure(r[key]) if r.get("status") == "ok" and r.get(key) is not None else r.get("status", "-")


def ratio(c, key, goal):
    v = c.get(key)
    return "-" if v is None else f"{v:.2f}× {'ok' if v >= goal else 'MISSED'}"


def mfu(c):
    o = c["ours"]
    if o["status"] != "ok":
        return o["status"]
    g = c["mfu_goal"]
    return f"{figure(o['mfu'] * 100)}%" + ("" if g is None else f" (≥{g * 100:.0f}%: {'ok' if o['mfu'] >= g else 'MISSED'})")


def gb(r):
    return f"{r['peak_mb'] / 1e3:.1f}" if r.get("status") == "ok" and r.get("peak_mb") else "-"


lines = []
where = (f"{gpu.get('name', '?')}, driver {gpu.get('driver_version', '?')}, {gpu.get('memory.total [MiB]', '?')}"
         if gpu else "CPU (dry run)" if dry else "no GPU found (nvidia-smi)")
lines.append(f"gpu.sh {result['mode']}, {result['date']}: {where}; torch {result['torch']}, transformers "
             f"{result['transformers']}; {warmup} warm-up + {result['timed_steps']} timed steps; MFU against {peak:g} TFLOPs; "
             f"{result['elapsed_s']} of {result['budget_s']} s")
if measured:
    lines.append(f"measured on this GPU: an 8192³ bf16 matrix product at {measured['bf16_matmul_tflops']:.0f} TFLOPs "
                 f"({measured['bf16_matmul_tflops'] / peak * 100:.0f}% of {peak:g}), a device copy at {measured['copy_tb_s']:.2f} TB/s")
if bundle:
    lines.append("bundle " + "; ".join(l for l in bundle[1:3]))
lines.append("gpu tests: " + (", ".join(f"{t['binary']} exit {t['exit']} ({t['passed']} passed, {t['skipped']} skipped, "
                                        f"{t['failed']} failed)" for t in tests) or "not run"))
for c in cases:
    for impl in ("ours", "pytorch eager", "pytorch compile"):
        r = c[impl]
        if r.get("status") not in ("ok", "not run") or (r.get("status") == "ok" and r.get("note")):
            lines.append(f"- {c['name']} {c['seq']}×{c['batch']}, {impl}: {r.get('status')}: {r.get('note', '')}")
    if c["ours"]["status"] == "ok" and c["ours"]["data_ms"] > 0.05 * c["ours"]["median_ms"]:
        lines.append(f"- {c['name']} {c['seq']}×{c['batch']}: ours waited {c['ours']['data_ms']:.1f} ms per step for data")
lines.append("")
lines.append("| model | seq × batch | ours samples/s | ours TFLOPs | ours MFU | eager samples/s | compile samples/s | "
             "ours ÷ eager (≥ 1.3) | ours ÷ compile (≥ 1.0) | peak GB ours / eager / compile | memory ÷ eager (≤ 1) |")
lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for c in cases:
    o, e, k = c["ours"], c["pytorch eager"], c["pytorch compile"]
    lines.append(f"| {c['name']} | {c['seq']} × {c['batch']} | {num(o, 'samples_per_s')} | {num(o, 'tflops')} | "
                 f"{mfu(c)} | {num(e, 'samples_per_s')} | {num(k, 'samples_per_s')} | "
                 f"{ratio(c, 'ours_over_eager', GOAL_EAGER)} | {ratio(c, 'ours_over_compile', GOAL_COMPILE)} | "
                 f"{gb(o)} / {gb(e)} / {gb(k)} | "
                 f"{'-' if c.get('memory_over_eager') is None else format(c['memory_over_eager'], '.2f') + ('' if c['memory_over_eager'] <= 1 else ' MISSED')} |")
text = "\n".join(lines) + "\n"
open(os.path.join(out, "gpu.md"), "w").write(text)
print(text, end="")
PY
}

# unpack_bundle: the bundle's files in $B, and $libpath: its libraries, then CUDA's from the image
# (PyTorch's nvidia-* wheels first, so both sides run the same cuBLAS; else /usr/local/cuda), and
# its libstdc++ only where the image's is older than the bundle needs.
unpack_bundle() {
  B=$tmp/bundle
  if [[ -f $bundle/bundle.tar.xz ]]; then
    mkdir -p "$B"
    if command -v xz >/dev/null; then
      tar -C "$B" -xJf "$bundle/bundle.tar.xz"
    else
      python3 - "$bundle/bundle.tar.xz" "$B" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="tar")  # Python >= 3.12: keeps the modes
    except TypeError:
        t.extractall(sys.argv[2])
PY
    fi
  elif [[ -x $bundle/bin/bert_pretrain ]]; then
    B=$bundle
  else
    echo "gpu.sh: no bundle in $bundle: run scripts/bench/gpu_bundle.sh on the build machine and carry $bundle" >&2
    exit 1
  fi
  sed -n '/^files:/q; p' "$B/MANIFEST.txt"
  local sites=() sonames so dir dirs=() need system_cxx
  for dir in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))'); do
    [[ -d $dir/nvidia ]] && sites+=("$dir/nvidia")
  done
  # What ldd sees (must be found), then what the binaries open at run time (cuDNN: without it our
  # attention falls back to batched GEMMs, which the output says).
  read -r -a sonames < <(sed -n 's/^\(dlopen-\)\?from-image: //p' "$B/MANIFEST.txt" | tr '\n' ' '; echo)
  for so in "${sonames[@]}"; do
    dir=""
    ((${#sites[@]} == 0)) || dir=$(find "${sites[@]}" -name "$so" -print -quit 2>/dev/null || true)
    [[ -n $dir ]] || dir=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib -name "$so" -print -quit 2>/dev/null || true)
    if [[ -n $dir ]]; then
      dirs+=("$(dirname "$dir")")
      [[ $so != libcudnn* ]] || echo "$so: $dir"
    else
      echo "$so: not in the image (site-packages/nvidia, /usr/local/cuda)"
    fi
  done
  libpath=$B/lib
  system_cxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ && !f { print $NF; f = 1 }' || true)
  while read -r need; do
    if [[ -z $system_cxx ]] || ! grep -qa "$need" "$system_cxx"; then
      libpath+=:$B/lib/cxx
      echo "libstdc++: the bundle's (the image's ${system_cxx:-none} lacks $need)"
      break
    fi
  done < <(sed -n 's/^needs-\(glibcxx\|cxxabi\): //p' "$B/MANIFEST.txt")
  for dir in "${dirs[@]}"; do [[ :$libpath: == *:$dir:* ]] || libpath+=:$dir; done
  echo "LD_LIBRARY_PATH for our binaries: $libpath"
  if env LD_LIBRARY_PATH="$libpath" ldd "$B/bin/bert_pretrain" | grep 'not found'; then
    echo "gpu.sh: the bundle's bert_pretrain misses the libraries above here" >&2
    exit 1
  fi
  env LD_LIBRARY_PATH="$libpath" ldd "$B/bin/bert_pretrain" | grep -E 'libcublas|libnccl|libstdc' || true
}

# run_peer eager|compile --case ... -- FLAGS: trainer_peer.py over the cases, stopped at the budget.
run_peer() {
  local what=$1 cases=() left rc
  shift
  while [[ $1 != -- ]]; do cases+=("$1"); shift; done
  shift
  left=$((budget - SECONDS - 15))
  echo "== PyTorch $what ($left s left)"
  # Cases past the budget are still listed (as skipped), which takes the process's start: 30 s at least.
  set +e
  PYTHONUNBUFFERED=1 timeout "$((left > 30 ? left : 30))" "$py" scripts/bench/trainer_peer.py "${peer_flags[@]}" \
    --attention sdpa --sparse-mlm --clip 1 --dropout auto --steps "$steps" --warmup "$warmup" \
    --time-left "$((left > 6 ? left - 5 : 1))" "$@" "${cases[@]}" \
    >"$tmp/peer-$what.jsonl" 2>"$tmp/peer-$what.err"
  rc=$?
  set -e
  cat "$tmp/peer-$what.jsonl" >>"$tmp/peers.jsonl"
  { echo "==== PyTorch $what (exit $rc)"; cat "$tmp/peer-$what.err"; } >>"$out/details.log"
  "$report_py" - "$tmp/peer-$what.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:  # cut short by the budget's timeout
        continue
    if r["impl"] == "ceilings" and r["status"] == "ok":
        print("measured: bf16 matrix product %.0f TFLOPs, copy %.2f TB/s" % (r["bf16_matmul_tflops"], r["copy_tb_s"]))
    elif r["impl"] == "ceilings":
        print("measuring the ceilings failed:", r.get("note"))
    elif r["status"] == "ok":
        what = "%.1f samples/s, %.1f GB, warm-up %.0f s, attention %s" % (
            r["samples_per_s"], (r.get("peak_mb") or 0) / 1e3, r["warmup_s"], r["attention"])
    else:
        what = r["status"] + ": " + r.get("note", "")
    print(r["kind"], r["model"], r["seq"], r["batch"], "|", what)
PY
  ((rc == 0)) || { echo "PyTorch $what: exit $rc; its last lines:"; tail -5 "$tmp/peer-$what.err"; }
}

set -o pipefail
main 2>&1 | tee "$out/gpu.log"
