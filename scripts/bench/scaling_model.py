#!/usr/bin/env python3
"""Scaling on paper: predicted step time, samples/s and scaling efficiency of data-parallel BERT-base,
BERT-large and GPT-2 124M at 1-32 GPUs on the seeds' hardware, and the error against seed 001's
DeepSpeed BERT-base figures.

    scripts/bench/scaling_model.py [--bucket-mb 25] [--mfu-fp32 0.6] [--mfu-fp16 0.3] [--json FILE]

Assumptions (each one a flag):
  * GPU: V100-SXM2-16GB, peak 15.7 TFLOPs fp32 and 125 TFLOPs fp16 (tensor cores); a step reaches a
    fixed share of it (MFU: 60% fp32, 30% fp16 — GEMMs run near peak, the memory-bound layernorm,
    softmax, dropout and GELU kernels do not shrink with tensor cores) on the PaLM FLOPs count our
    trainer logs (6·T·L·12C² + 12·L·C·T², plus the MLM head on 20 masked positions / GPT's LM head).
    A second prediction instead takes the compute rate from seed 001's 1n1g figure (calibrated), so
    its error at 2+ devices is the communication model's alone.
  * Optimizer: memory bound, AdamW/LAMB read and write 28 bytes per parameter in fp32 (32 with the fp16
    gradient and weight copies) at 70% of 900 GB/s HBM2.
  * Node: 8 GPUs on NVLink (DGX-1 hybrid cube mesh), ring all-reduce bus bandwidth 120 GB/s, 3 µs
    per ring step. Between nodes: one 100 Gb/s InfiniBand EDR NIC per node at 90% (11.25 GB/s),
    6 µs per ring step. A ring over several nodes crosses each NIC once each way, so its bus
    bandwidth is the NIC's.
  * Ring all-reduce of S bytes over n ranks: 2(n-1)/n · S / bus bandwidth + 2(n-1) · step latency,
    per bucket. Gradients: every parameter, 4 bytes fp32, 2 bytes fp16 (DeepSpeed and Apex reduce
    fp16 gradients).
  * Overlap: backward produces gradients evenly over its time (2/3 of compute); buckets of
    --bucket-mb are reduced one after another on the link as soon as they are full (PyTorch DDP's
    25 MB buckets); the step waits for the last one. "no overlap" reduces
    everything after the backward pass (DeepSpeed's engine without overlap_comm).
  * Data loading, the loss all-reduce and stragglers cost nothing; no gradient accumulation.
Seed 001 (DLPerf, DeepSpeed BERT-base, seq 128): fp32 batch 32/GPU 1n1g 147.81 … 4n8g 4899.37
samples/s; fp16 batch 64/GPU 1n1g 565.3 … 4n8g 16401.67. Only these endpoints are given, so only
they are compared.
"""
import argparse
import json
import sys

PEAK = {"fp32": 15.7e12, "fp16": 125e12}
HBM = 900e9 * 0.7
CASES = [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8)]  # (nodes, GPUs per node): 1..32 GPUs

# name: layers, hidden, vocab, positions, seq, masked predictions (BERT) or None (GPT), batch per GPU
MODELS = {
    "bert-base": dict(kind="bert", layers=12, hidden=768, vocab=30522, positions=512, seq=128, predictions=20,
                      batch={"fp32": 32, "fp16": 64}),
    "bert-large": dict(kind="bert", layers=24, hidden=1024, vocab=30522, positions=512, seq=128, predictions=20,
                       batch={"fp32": 16, "fp16": 32}),
    "gpt2-124M": dict(kind="gpt", layers=12, hidden=768, vocab=50257, positions=1024, seq=1024, predictions=None,
                      batch={"fp32": 4, "fp16": 8}),
}
SEED_001 = {  # DeepSpeed BERT-base on V100-16GB, samples/s: {precision: (batch, {case: figure})}
    "fp32": (32, {"1n1g": 147.81, "4n8g": 4899.37}),
    "fp16": (64, {"1n1g": 565.3, "4n8g": 16401.67}),
}


def parameters(m):
    c, L, v = m["hidden"], m["layers"], m["vocab"]
    layer = 12 * c * c + 13 * c  # qkv + out (4C² + 4C), MLP (8C² + 5C), 2 layernorms (4C)
    if m["kind"] == "gpt":
        return v * c + m["positions"] * c + L * layer + 2 * c
    embeddings = v * c + m["positions"] * c + 2 * c + 2 * c  # words, positions, token types, layernorm
    heads = (c * c + c) + (c * c + c + 2 * c + v) + (2 * c + 2)  # pooler, MLM transform + bias, NSP
    return embeddings + L * layer + heads


def flops_per_sample(m):
    """PaLM appendix B, as trainer/ counts it (README "FLOPs and MFU")."""
    c, L, t, v = m["hidden"], m["layers"], m["seq"], m["vocab"]
    f = 6 * t * L * (4 * c * c + 2 * c * 4 * c) + 12 * L * c * t * t
    if m["kind"] == "gpt":
        return f + 6 * t * c * v
    return f + 6 * (c * c + 2 * c) + 6 * m["predictions"] * (c * c + c * v)


def allreduce_seconds(nbytes, ranks, nodes, a):
    if ranks == 1 or nbytes == 0:
        return 0.0
    bus = a.ib_gbps / 8 * 1e9 * a.ib_efficiency if nodes > 1 else a.nvlink_gbs * 1e9
    step_latency = a.ib_latency_us * 1e-6 if nodes > 1 else a.nvlink_latency_us * 1e-6
    return 2 * (ranks - 1) / ranks * nbytes / bus + 2 * (ranks - 1) * step_latency


def exposed_comm(grad_bytes, backward_s, ranks, nodes, a, overlap):
    """Seconds the step waits for the gradient all-reduce after its backward pass ends."""
    if ranks == 1:
        return 0.0, 0.0
    if not overlap:
        t = allreduce_seconds(grad_bytes, ranks, nodes, a)
        return t, t
    bucket = a.bucket_mb * 1e6
    n = max(1, -(-grad_bytes // int(bucket)))
    link_free, total = 0.0, 0.0
    for k in range(1, n + 1):
        size = min(bucket, grad_bytes - (k - 1) * bucket)
        ready = backward_s * min(1.0, k * bucket / grad_bytes)
        t = allreduce_seconds(size, ranks, nodes, a)
        link_free = max(link_free, ready) + t
        total += t
    return total, max(0.0, link_free - backward_s)


def predict(name, precision, a, rate=None, batch=None):
    """Per case: compute, optimizer, all-reduce and exposed seconds, step seconds, samples/s.
    rate: achieved FLOP/s per GPU (default: the peak × the MFU assumption)."""
    m = MODELS[name]
    batch = batch or m["batch"][precision]
    p = parameters(m)
    rate = rate or PEAK[precision] * (a.mfu_fp32 if precision == "fp32" else a.mfu_fp16)
    compute = flops_per_sample(m) * batch / rate
    optimizer = p * (28 if precision == "fp32" else 32) / HBM
    grad_bytes = p * (4 if precision == "fp32" else 2)
    rows = []
    for nodes, gpn in CASES:
        ranks = nodes * gpn
        comm, exposed = exposed_comm(grad_bytes, compute * 2 / 3, ranks, nodes, a, overlap=True)
        _, exposed_none = exposed_comm(grad_bytes, compute * 2 / 3, ranks, nodes, a, overlap=False)
        step = compute + optimizer + exposed
        step_none = compute + optimizer + exposed_none
        rows.append(dict(case=f"{nodes}n{gpn}g", devices=ranks, compute_ms=compute * 1e3, optimizer_ms=optimizer * 1e3,
                         allreduce_ms=comm * 1e3, exposed_ms=exposed * 1e3, step_ms=step * 1e3,
                         samples_per_s=batch * ranks / step, samples_per_s_no_overlap=batch * ranks / step_none))
    base = rows[0]["samples_per_s"]
    for r in rows:
        r["efficiency"] = r["samples_per_s"] / (base * r["devices"])
        r["efficiency_no_overlap"] = r["samples_per_s_no_overlap"] / (base * r["devices"])
    return dict(model=name, precision=precision, batch=batch, parameters=p, flops_per_sample=flops_per_sample(m),
                rate_tflops=rate / 1e12, grad_mb=grad_bytes / 1e6, cases=rows)


def calibrated_rate(name, precision, batch, samples_per_s):
    """The FLOP/s per GPU at which one GPU's step (compute + optimizer) gives the seed's 1n1g figure."""
    m = MODELS[name]
    optimizer = parameters(m) * (28 if precision == "fp32" else 32) / HBM
    return flops_per_sample(m) * batch / (batch / samples_per_s - optimizer)


def print_prediction(pred):
    print(f"\n{pred['model']} {pred['precision']}, batch {pred['batch']}/GPU: {pred['parameters'] / 1e6:.1f}M parameters, "
          f"{pred['flops_per_sample'] / 1e9:.1f} GFLOPs/sample, {pred['rate_tflops']:.2f} TFLOPs/GPU achieved, "
          f"{pred['grad_mb']:.0f} MB of gradients")
    print(f"  {'case':>5} {'GPUs':>4} {'compute ms':>10} {'optim ms':>8} {'allreduce ms':>12} {'exposed ms':>10} "
          f"{'step ms':>8} {'samples/s':>10} {'eff':>6} {'no overlap':>10} {'eff':>6}")
    for r in pred["cases"]:
        print(f"  {r['case']:>5} {r['devices']:>4} {r['compute_ms']:>10.1f} {r['optimizer_ms']:>8.1f} "
              f"{r['allreduce_ms']:>12.1f} {r['exposed_ms']:>10.1f} {r['step_ms']:>8.1f} {r['samples_per_s']:>10.1f} "
              f"{r['efficiency']:>6.1%} {r['samples_per_s_no_overlap']:>10.1f} {r['efficiency_no_overlap']:>6.1%}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--mfu-fp32", type=float, default=0.60, help="share of the 15.7 TFLOPs fp32 peak reached (0.60)")
    ap.add_argument("--mfu-fp16", type=float, default=0.30, help="share of the 125 TFLOPs fp16 peak reached (0.30)")
    ap.add_argument("--nvlink-gbs", type=float, default=120, help="ring all-reduce bus bandwidth in a node, GB/s (120)")
    ap.add_argument("--nvlink-latency-us", type=float, default=3, help="per ring step in a node (3 µs)")
    ap.add_argument("--ib-gbps", type=float, default=100, help="InfiniBand line rate per node, Gb/s (100)")
    ap.add_argument("--ib-efficiency", type=float, default=0.9, help="share of the line rate NCCL reaches (0.9)")
    ap.add_argument("--ib-latency-us", type=float, default=6, help="per ring step across nodes (6 µs)")
    ap.add_argument("--bucket-mb", type=float, default=25, help="gradient bucket size for the overlap (25 MB)")
    ap.add_argument("--json", help="also write the predictions and the comparison as JSON here")
    a = ap.parse_args(argv)

    print(__doc__.split("\n\n", 2)[2].rstrip())
    out = {"predictions": [], "seed_001": []}
    for name in MODELS:
        for precision in ("fp32", "fp16"):
            pred = predict(name, precision, a)
            out["predictions"].append(pred)
            print_prediction(pred)

    print("\nSeed 001 (DeepSpeed BERT-base, V100-16GB) against the prediction: samples/s, error = predicted / seed - 1")
    print(f"  {'precision':>9} {'batch':>5} {'case':>5} {'seed':>10} {'assumed rate':>12} {'error':>7} "
          f"{'no overlap':>10} {'error':>7} {'calibrated':>10} {'error':>7} {'seed speedup':>12} {'predicted':>9}")
    for precision, (batch, figures) in SEED_001.items():
        assumed = {r["case"]: r for r in predict("bert-base", precision, a, batch=batch)["cases"]}
        rate = calibrated_rate("bert-base", precision, batch, figures["1n1g"])
        calibrated = {r["case"]: r for r in predict("bert-base", precision, a, rate=rate, batch=batch)["cases"]}
        for case, seed in figures.items():
            x, c = assumed[case], calibrated[case]
            row = dict(precision=precision, batch=batch, case=case, seed=seed, predicted=x["samples_per_s"],
                       error=x["samples_per_s"] / seed - 1, predicted_no_overlap=x["samples_per_s_no_overlap"],
                       error_no_overlap=x["samples_per_s_no_overlap"] / seed - 1, calibrated=c["samples_per_s"],
                       error_calibrated=c["samples_per_s"] / seed - 1, seed_speedup=seed / figures["1n1g"],
                       predicted_speedup=c["samples_per_s"] / calibrated["1n1g"]["samples_per_s"],
                       calibrated_tflops=rate / 1e12)
            out["seed_001"].append(row)
            print(f"  {precision:>9} {batch:>5} {case:>5} {seed:>10.2f} {row['predicted']:>12.1f} {row['error']:>+7.1%} "
                  f"{row['predicted_no_overlap']:>10.1f} {row['error_no_overlap']:>+7.1%} {row['calibrated']:>10.1f} "
                  f"{row['error_calibrated']:>+7.1%} {row['seed_speedup']:>12.2f} {row['predicted_speedup']:>9.2f}")
        print(f"  ({precision}: the seed's 1n1g figure means {rate / 1e12:.2f} TFLOPs/GPU on the PaLM count, "
              f"{rate / PEAK[precision]:.0%} of peak; seed formula params×6×seq: "
              f"{parameters(MODELS['bert-base']) * 6 * 128 * figures['1n1g'] / 1e12:.2f} TFLOPs)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
