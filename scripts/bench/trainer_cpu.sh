#!/usr/bin/env bash
# Trainer speed on the CPU: ms per training step (forward + backward + AdamW) of our BERT small
# (seq 128, batch 8, 20 predictions) and GPT tiny (seq 256, batch 8, vocab 50257) against the same
# models in PyTorch CPU eager (HF transformers, scripts/bench/trainer_peer.py), same threads, same
# run. Then, on paper, FLOPs and bytes per step of BERT-large and GPT-2 124M and the step time an
# H100 (989 TFLOPs bf16) needs at 60% MFU.
#   scripts/bench/trainer_cpu.sh [--threads "1 2"] [--steps 10] [--build DIR]

# shellcheck source=scripts/bench/lib.sh
source "$(dirname "$0")/lib.sh"
threads="1 2" steps=10 build=build
bench_args --threads=threads --steps=steps --build=build -- "$@"
py=.venv/bin/python
bench_require $py "trainer_cpu.sh: .venv with transformers missing (run scripts/setup_deps.sh)"
bench_build "$build" bench_trainer
bench_tmpdir trainer
tmp=$bench_tmp
cases=("bert small 128 8" "gpt tiny 256 8")
for t in $threads; do
  for c in "${cases[@]}"; do
    read -r kind model seq batch <<<"$c"
    "$build/bench/bench_trainer" --threads "$t" --kind "$kind" --model "$model" --seq "$seq" --batch "$batch" \
      --steps "$steps" >>"$tmp/ours.jsonl"
    $py scripts/bench/trainer_peer.py --threads "$t" --kind "$kind" --model "$model" --seq "$seq" --batch "$batch" \
      --steps "$steps" >>"$tmp/peer.jsonl"
  done
done
/usr/bin/python3 - "$tmp/ours.jsonl" "$tmp/peer.jsonl" <<'PY' | tee -a /dev/stderr >/dev/null
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
peer = [json.loads(l) for l in open(sys.argv[2])]
print(f"load average: {open('/proc/loadavg').read().split()[:3]}; PyTorch {peer[0]['torch']} eager (HF transformers)")
print("| model | seq | batch | threads | ours ms/step | PyTorch ms/step | ratio (PyTorch / ours) | ours GFLOP/s | goal |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for o, p in zip(ours, peer):
    ratio = p["median_ms"] / o["median_ms"]
    gflops = o["flops_per_step"] / o["median_ms"] / 1e6
    print(f"| {o['kind']} {o['model']} | {o['seq']} | {o['batch']} | {o['threads']} | {o['median_ms']:.1f} | "
          f"{p['median_ms']:.1f} | {ratio:.2f}x | {gflops:.1f} | {'OK' if ratio >= 1 else 'MISSED'} (ours <= PyTorch) |")

# On paper: training FLOPs (PaLM's count, as the trainer logs them) and bytes per step.
def flops(kind, L, C, V, T, masked=0):
    layer = 4 * C * C + 2 * C * 4 * C
    f = 6 * T * L * layer + 12 * L * C * T * T
    return f + (6 * T * C * V if kind == "gpt" else 6 * (C * C + 2 * C) + 6 * masked * (C * C + C * V))
print()
print("On paper (per step; bf16 weights/activations, fp32 master weights and Adam moments):")
print("| model | seq | global batch | parameters | TFLOP per step | weight+grad+optimizer bytes | activation bytes (no recompute) | with --recompute | H100 step at 60% MFU |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, kind, L, C, V, T, B, heads, masked in (("BERT-large", "bert", 24, 1024, 30522, 128, 256, 16, 20),
                                                  ("GPT-2 124M", "gpt", 12, 768, 50257, 1024, 512, 12, 0)):
    params = V * C + (512 if kind == "bert" else 1024) * C + L * (12 * C * C + 13 * C)
    f = flops(kind, L, C, V, T, masked) * B
    state = params * (2 + 2 + 4 + 4 + 4)  # bf16 weights + bf16 grads + fp32 master + 2 fp32 moments
    # per layer and token: ~34·C bytes of bf16 activations plus 5·heads·T for attention (Korthikanti et al.)
    act = L * B * T * (34 * C + 5 * heads * T)
    # --recompute drops the attention term (selective recomputation) and the GELU output (8·C)
    act_recompute = L * B * T * (34 - 8) * C
    ms = f / (0.6 * 989e12) * 1e3
    print(f"| {name} | {T} | {B} | {params/1e6:.0f}M | {f/1e12:.1f} | {state/1e9:.2f} GB | {act/1e9:.1f} GB | "
          f"{act_recompute/1e9:.1f} GB | {ms:.0f} ms |")
PY
