#!/usr/bin/env python3
"""Scaling on paper: predicted step time, samples/s and scaling efficiency of data-parallel BERT-base,
BERT-large and GPT-2 124M at 1-32 GPUs on the seeds' hardware, and the error against seed 001's
DeepSpeed BERT-base figures; then GPT under tensor x pipeline x data parallelism against the
published cases of seed 002 (BigScience Megatron-DeepSpeed, Jean Zay) and seed 003 (OneFlow GPT).

    scripts/bench/scaling_model.py [--bucket-mb 25] [--mfu-fp32 0.6] [--mfu-fp16 0.3] [--json FILE]
                                   [--check-seeds DIR] [any assumption flag below, see --help]
    scripts/bench/scaling_model.py --link-bert 4,512,30522,128,20 --link-batch 8 --link-step-ms 2100 \
                                   --ib-gbps 10 --ib-latency-us 25 [--ib-efficiency 0.94] [--json FILE]

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

Tensor x pipeline x data parallel GPT (seeds 002 and 003; Megatron-LM's layout and schedule):
  * Ranks: tensor fastest, then data, then pipeline (a tensor group stays inside a node when t <= GPUs
    per node). A ring of n GPUs inside a node runs at a bus bandwidth that depends on n and the board
    (--dgx1-nvlink-gbs: seed 003's nvidia-smi topo is a DGX-1 hybrid cube mesh, GPUs 0-1 share one
    NVLink (NV1); --jz-nvlink-gbs: Jean Zay's 4 V100 SXM2). A ring that leaves the node runs at the
    node's NIC bandwidth (--ib-gbps x --ib-efficiency x --s00N-nics) divided by the number of such
    rings that cross the same NIC at once (8 data-parallel rings of a 2D layout share one NIC).
  * Compute per rank: hardware FLOPs, the layers' forward 24·h²·T + 4·s·h·T per layer (T tokens of
    a micro-batch), run 4 times with activation recompute (3 without), plus the LM head 6·h·V·T on
    the last stage, all divided by t; at fp16 peak x e(h) with e(h) = e_max·h/(h + h_half): GEMMs grow
    with h², the memory-bound kernels with h. e_max and h_half are fitted to seed 003's two 1-GPU
    cases (h 768 and 1536; exact there) and nothing else; e(768) = 31% agrees with the 30% MFU
    assumed above for BERT-base. No further small-GEMM penalty for t > 1 by default
    (--tp-gemm-penalty): seed 003's in-node TP cases need none once the link bandwidths are right.
  * Tensor parallel (Megatron): per layer per micro-batch 2 all-reduces of mb·s·h fp16 activations
    forward and 2 backward, plus the 2 of the recomputed forward with --recompute: ring cost
    2(t-1)/t · bytes / bandwidth + 2(t-1)·latency each, not overlapped with compute.
  * Pipeline: 1F1B over m micro-batches; the step is m·max(stage) + (p-1)/v·mean(stage), i.e. a bubble
    of (p-1)/(v·m + p-1) of the step for balanced stages (the share of the total; Megatron's paper
    writes the same bubble as (p-1)/(v·m) of the ideal time); the last stage also runs the LM head.
    Per micro-batch each stage sends mb·s·h fp16 forward and the same backward (x v when
    interleaved), blocking as Megatron's p2p is, every rank of a node at once over its NIC; 1/t of it
    with --p2p-scatter-gather. Tied embeddings: one all-reduce of V·h/t gradients between the first
    and last stage.
  * Data parallel over dp = world/(t·p): each rank all-reduces the gradients of its params/(t·p)
    (the largest stage: its layers plus the embedding), --s003-grad-bytes 4 (OneFlow reduces fp32
    gradients: its DP cases lose 84 ms at 2 nodes and 112 ms at 4, as a 2.1 GB ring, not 1.1 GB,
    overlapped with backward gives), --s002-grad-bytes 2 (Megatron --fp16). Without pipeline and with
    t = 1 it overlaps the backward in 25 MB buckets as above; with t > 1 (the TP all-reduces share the
    NCCL stream; seed 003's 2D cases lose the whole all-reduce) or p > 1 (after the flush) it does not.
    Optimizer 32 B/param at 70% of HBM; ZeRO-1 (seed 002's DeepSpeed rows with dp 2) divides it by dp.
  * Memory (a reference column for seed 003): 18 B/param of weights, gradients and Adam (ZeRO-1
    shards 12 of them), the recompute checkpoints of min(m, p) micro-batches, one layer's activations
    (Korthikanti et al.: s·b·h·(34 + 5·a·s/h)/t bytes) and fp16 + fp32 logits.
Seed 003 publishes latency (ms), memory (MiB) and samples/s per case; seed 002 seconds per iteration and
TFLOPs by its formula size·4·2·seq·GBS/(s·GPUs); both are transcribed below with their sections.

The second form predicts one data-parallel BERT of those dimensions (layers, hidden, vocabulary,
sequence, masked predictions) on --link-nodes hosts of one rank each, joined by a link of
--ib-gbps and --ib-latency-us, the compute rate taken from a measured one-rank step
(--link-step-ms, the optimizer included) instead of a GPU's peak: what scripts/bench/shaped_link.sh
holds against a network it shapes.
"""
import argparse
import json
import math
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
    """PaLM appendix B, as trainer/ counts it (docs/training.md, "FLOPs and MFU")."""
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
    return bucketed_comm(grad_bytes, backward_s, a.bucket_mb, lambda size: allreduce_seconds(size, ranks, nodes, a))


def bucketed_comm(grad_bytes, backward_s, bucket_mb, seconds):
    """Buckets of bucket_mb all-reduced in turn as the backward pass (backward_s long) fills them,
    each taking seconds(bytes): (total communication, what is left after the backward pass ends)."""
    bucket = bucket_mb * 1e6
    n = max(1, math.ceil(grad_bytes / bucket))
    link_free, total = 0.0, 0.0
    for k in range(1, n + 1):
        size = min(bucket, grad_bytes - (k - 1) * bucket)
        ready = backward_s * min(1.0, k * bucket / grad_bytes)
        t = seconds(size)
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


def predict_link(a):
    """One data-parallel BERT (--link-bert) on --link-nodes hosts of one rank over a link of
    --ib-gbps x --ib-efficiency and --ib-latency-us per ring step: the measured one-rank step
    (--link-step-ms) is its compute, backward 2/3 of it, and the fp32 gradients are all-reduced in
    --bucket-mb buckets as the backward pass fills them (the trainer's GradientReducer), or after it."""
    layers, hidden, vocab, seq, predictions = (int(x) for x in a.link_bert.split(","))
    m = dict(kind="bert", layers=layers, hidden=hidden, vocab=vocab, positions=512, seq=seq, predictions=predictions)
    ranks = nodes = a.link_nodes
    compute = a.link_step_ms / 1e3
    grad_bytes = parameters(m) * 4
    comm, exposed = exposed_comm(grad_bytes, compute * 2 / 3, ranks, nodes, a, overlap=True)
    _, exposed_none = exposed_comm(grad_bytes, compute * 2 / 3, ranks, nodes, a, overlap=False)
    step, step_none = compute + exposed, compute + exposed_none
    return dict(layers=layers, hidden=hidden, vocab=vocab, seq=seq, predictions=predictions, batch=a.link_batch,
                parameters=parameters(m), grad_mb=grad_bytes / 1e6, nodes=nodes, link_gbps=a.ib_gbps,
                link_efficiency=a.ib_efficiency, link_latency_us=a.ib_latency_us, bucket_mb=a.bucket_mb,
                one_rank_ms=compute * 1e3, gflops_per_s=flops_per_sample(m) * a.link_batch / compute / 1e9,
                allreduce_ms=comm * 1e3, exposed_ms=exposed * 1e3, step_ms=step * 1e3,
                samples_per_s=a.link_batch * ranks / step, speedup=ranks * compute / step, efficiency=compute / step,
                step_ms_no_overlap=step_none * 1e3, speedup_no_overlap=ranks * compute / step_none)


def print_link(r):
    print(f"BERT {r['layers']} layers x {r['hidden']}, vocabulary {r['vocab']}, seq {r['seq']}, {r['predictions']} "
          f"predictions: {r['parameters'] / 1e6:.1f}M parameters, {r['grad_mb']:.0f} MB of fp32 gradients; batch "
          f"{r['batch']} per rank, one rank {r['one_rank_ms']:.0f} ms a step ({r['gflops_per_s']:.1f} GFLOP/s)")
    print(f"{r['nodes']} hosts x 1 rank on {r['link_gbps']:g} Gb/s x {r['link_efficiency']:g}, {r['link_latency_us']:g} µs "
          f"per ring step, {r['bucket_mb']:g} MB buckets: all-reduce {r['allreduce_ms']:.0f} ms, exposed "
          f"{r['exposed_ms']:.0f} ms, step {r['step_ms']:.0f} ms, {r['samples_per_s']:.2f} samples/s, speedup "
          f"{r['speedup']:.2f}x (efficiency {r['efficiency']:.0%}); without overlap {r['step_ms_no_overlap']:.0f} ms, "
          f"{r['speedup_no_overlap']:.2f}x")


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


# ---------------------------------------------------------------------------------------------
# Tensor x pipeline x data parallel GPT (Megatron-LM's layout), against seeds 002 and 003.

SEQ3D = {"002": 1024, "003": 2048}
VOCAB3D = 50257  # GPT-2 BPE in both seeds (Megatron pads to a multiple of 128·t: < 0.2% more head FLOPs, ignored)

# Seed 003 (/work/shared/seeds/003_*.txt, "Test Case" and "Test Result"): OneFlow GPT on 4 nodes x 8
# V100-SXM2-16GB, 100 Gb/s EDR, seq 2048 (the log names' s2048), fp16. Columns: case, nodes, GPUs per
# node, dp, tp, pp, micro-batch, accumulation steps (m), global batch, hidden, heads, layers, then the
# published latency (ms), memory (MiB) and throughput (samples/s).
SEED_003 = [
    ("DP_1x1x1_2_1536x16", 1, 1, 1, 1, 1, 2, 1, 2, 1536, 16, 16, 406.16, 11066, 4.92),
    ("DP_8x1x1_16_1536x16", 1, 8, 8, 1, 1, 2, 1, 16, 1536, 16, 16, 417.952, 12404, 38.28),
    ("DP_16x1x1_32_1536x16", 2, 8, 16, 1, 1, 2, 1, 32, 1536, 16, 16, 489.674, 12200, 65.35),
    ("DP_32x1x1_64_1536x16", 4, 8, 32, 1, 1, 2, 1, 64, 1536, 16, 16, 518.642, 12208, 123.4),
    ("MP_1x1x1_8_768x12", 1, 1, 1, 1, 1, 8, 1, 8, 768, 12, 12, 525.214, 7416, 15.23),
    ("MP_1x8x1_16_1536x16", 1, 8, 1, 8, 1, 16, 1, 16, 1536, 16, 16, 642.134, 6264, 24.92),
    ("MP_1x16x1_16_3072x16", 2, 8, 1, 16, 1, 16, 1, 16, 3072, 32, 16, 4819.296, 8678, 3.32),
    ("MP_1x32x1_16_3072x32", 4, 8, 1, 32, 1, 16, 1, 16, 3072, 32, 32, 9505.832, 11256, 1.68),
    ("2D_8x1x1_16_1536x16", 1, 8, 8, 1, 1, 2, 1, 16, 1536, 16, 16, 417.902, 12396, 38.29),
    ("2D_1x8x1_16_1536x16", 1, 8, 1, 8, 1, 16, 1, 16, 1536, 16, 16, 644.4, 6264, 24.83),
    ("2D_2x4x1_16_1536x16", 1, 8, 2, 4, 1, 8, 1, 16, 1536, 16, 16, 539.696, 6366, 29.65),
    ("2D_4x2x1_16_1536x16", 1, 8, 4, 2, 1, 4, 1, 16, 1536, 16, 16, 543.888, 7368, 29.42),
    ("2D_2x8x1_16_2304x24", 2, 8, 2, 8, 1, 8, 1, 16, 2304, 24, 24, 1268.532, 6998, 12.61),
    ("2D_4x8x1_32_2304x24", 4, 8, 4, 8, 1, 8, 1, 32, 2304, 24, 24, 1480.34, 6996, 21.62),
    ("DP_PP_8x1x4_512_1536x16", 4, 8, 8, 1, 4, 2, 32, 512, 1536, 16, 16, 4006.318, 8712, 127.8),
    ("MP_PP_1x8x4_512_2304x24", 4, 8, 1, 8, 4, 16, 32, 512, 2304, 24, 24, 19196.65, 15670, 26.67),
    ("2D_PP_2x4x4_512_2304x24", 4, 8, 2, 4, 4, 8, 32, 512, 2304, 24, 24, 13117.188, 11958, 39.03),
    ("2D_PP_2x8x2_512_2304x24", 4, 8, 2, 8, 2, 8, 32, 512, 2304, 24, 24, 14375.352, 10708, 35.62),
]

# Seed 002 (/work/shared/seeds/002_*.txt): BigScience Megatron-LM / Megatron-DeepSpeed GPT on Jean Zay,
# 4 x V100-SXM2-32GB per node, seq 1024, 32 heads, fp16, --checkpoint-activations, TP=4 ("the full
# 4 gpu node is used only for tensor parallel"). Model sizes -> (hidden, layers) as the BigScience slurm
# scripts define MSIZE (18: 6144x40, 30: 7168x48, 39: 8192x48, 52: 8192x64, 65: 9216x64,
# 116: 12288x64, 206: 16384x64); the seed's "Max model size" table for 16GB nodes uses sizes (22B,
# 50B, 78B) that have no such definition and is left out, as are the ZeRO-3 / CPU-offload tables
# (not pipeline or tensor parallel alone). Columns: section, GPUs, size (B), dp, pp, micro-batch,
# global batch, published seconds per iteration, published TFLOPs, note (date or the seed's ID).
# m = global / (micro x dp) (the seed's "PP chunks"/GAS column disagrees with GBS in two DS rows).
S002_ARCH = {18: (6144, 40), 30: (7168, 48), 39: (8192, 48), 52: (8192, 64), 65: (9216, 64),
             116: (12288, 64), 206: (16384, 64)}
SEED_002 = [
    # "Max model size", 32GB nodes: 4 micro-batches of 1 -> the bubble dominates
    ("maxsize-32GB", 16, 18, 1, 4, 1, 4, 1.381, 26.7, ""),
    ("maxsize-32GB", 32, 30, 1, 8, 1, 4, 1.618, 19.0, ""),
    ("maxsize-32GB", 64, 65, 1, 16, 1, 4, 2.738, 12.2, ""),
    ("maxsize-32GB", 128, 116, 1, 32, 1, 4, 4.234, 7.0, ""),
    ("maxsize-32GB", 256, 206, 1, 64, 1, 4, 6.736, 3.9, ""),
    # "Megatron / Performance"
    ("meg-perf", 16, 18, 1, 8, 4, 256, 90.5, 26.1, "05-26"),
    ("meg-perf", 16, 18, 1, 8, 4, 512, 177, 26.7, "05-26"),
    ("meg-perf", 16, 18, 1, 8, 4, 1024, 356, 26.5, "05-26"),
    ("meg-perf", 16, 18, 1, 4, 4, 512, 179, 26.4, "05-26"),
    ("meg-perf", 16, 18, 1, 4, 6, 768, 262, 27.0, "05-26"),
    ("meg-perf", 16, 18, 1, 8, 6, 768, 259, 27.3, "05-26"),
    ("meg-perf", 16, 18, 1, 8, 8, 256, 89, 26.5, "05-26"),
    ("meg-perf", 32, 39, 1, 8, 4, 512, 82, 62.3, "05-26"),
    ("meg-perf", 32, 39, 1, 8, 6, 768, 123, 62.3, "05-26"),
    ("meg-perf", 32, 39, 1, 8, 6, 1536, 241, 63.6, "05-26"),
    ("meg-perf", 32, 39, 1, 8, 6, 3072, 478, 64.2, "05-26"),
    ("meg-perf", 64, 52, 1, 16, 4, 1024, 129, 52.8, "05-25"),
    ("meg-perf", 64, 52, 1, 16, 4, 1024, 217, 31.4, "05-26"),
    ("meg-perf", 64, 52, 1, 16, 4, 1024, 125, 54.5, "05-27"),
    ("meg-perf", 64, 52, 1, 16, 4, 1024, 225, 30.3, "05-28"),
    ("meg-perf", 64, 52, 1, 16, 6, 1536, 328, 31.2, "05-26"),
    ("meg-perf", 64, 52, 1, 16, 8, 2048, 435, 31.3, "05-26"),
    ("meg-perf", 64, 52, 1, 16, 6, 3072, 650, 31.5, "05-26"),
    ("meg-perf", 64, 52, 1, 16, 8, 4096, 870, 31.3, "05-26"),
    ("meg-perf", 64, 52, 1, 32, 4, 1024, 220, 31.0, "05-26"),
    # "Megatron + Deepspeed 3D (new branch)": DS Y rows and the Megatron-alone row
    ("meg-ds-3d", 64, 52, 1, 16, 4, 1024, 137, 46.7, "DS 06-10"),
    ("meg-ds-3d", 64, 52, 1, 16, 4, 1536, 206, 49.6, "DS 06-10"),
    ("meg-ds-3d", 64, 52, 1, 16, 4, 2048, 270, 50.5, "DS 06-10"),
    ("meg-ds-3d", 64, 52, 1, 16, 4, 4096, 544, 50.1, "DS 06-10"),
    ("meg-ds-3d", 64, 52, 1, 16, 4, 1024, 126, 54.1, "Meg 06-10"),
    ("ds-3d-zero1", 64, 52, 2, 8, 4, 1024, 137, 48.8, "bucket 5e8"),
    ("ds-3d-zero1", 64, 52, 2, 8, 4, 1024, 141, 48.3, "bucket 1e9"),
    ("ds-3d-zero1", 64, 52, 2, 8, 4, 1024, 141, 48.3, "bucket 2e9"),
    ("experiment-1", 64, 52, 2, 8, 2, 1024, 150, 45.4, "ID 1.1"),
    ("experiment-1", 64, 52, 2, 8, 2, 1024, 150, 45.4, "ID 1.2"),
    ("experiment-1", 64, 52, 2, 8, 3, 1536, 213, 48.0, "ID 1.3"),
    ("experiment-1", 64, 52, 2, 8, 3, 1536, 208, 49.1, "ID 1.4"),
    ("experiment-2", 64, 39, 2, 8, 4, 1024, 104, 49.1, "ID 2.1"),
    ("experiment-2", 64, 39, 2, 8, 4, 1024, 105, 48.7, "ID 2.2"),
    ("experiment-2", 64, 39, 1, 16, 4, 1024, 109, 46.9, "ID 2.3"),  # table: PP 8; the text above it: PP=16
    ("experiment-2", 64, 39, 2, 8, 4, 1024, 110, 46.5, "ID 2.4"),
    # "Megatron + Deepspeed 3D (old branch)"
    ("ds-3d-old", 64, 52, 1, 16, 4, 1024, 146, 46.7, "05-27"),
]
S002_TP = 4


def bubble_fraction(p, m, v=1):
    """Share of a 1F1B step the pipeline stands idle: (p-1)/(v·m + p-1) of the total time (v virtual
    stages per rank, Megatron's interleaved schedule; v=1 is plain 1F1B). Megatron's paper writes the
    same bubble relative to the ideal time instead: (p-1)/(v·m)."""
    return (p - 1) / (v * m + p - 1)


def ring_seconds(nbytes, n, gbs, latency_us):
    """Ring all-reduce of nbytes over n ranks at bus bandwidth gbs (GB/s)."""
    if n <= 1 or nbytes == 0:
        return 0.0
    return 2 * (n - 1) / n * nbytes / (gbs * 1e9) + 2 * (n - 1) * latency_us * 1e-6


def parse_sizes(text):
    return {int(k): float(v) for k, v in (x.split(":") for x in text.split(","))}


def nvlink_gbs(sizes, n):
    """Bus bandwidth of a ring of n GPUs inside one node: the table's entry for the smallest listed size >= n."""
    for k in sorted(sizes):
        if n <= k:
            return sizes[k]
    return sizes[max(sizes)]


def gemm_efficiency(h, t, a):
    """Share of the fp16 peak a rank reaches on a transformer layer of width h split t ways. The
    GEMMs grow with h² per token, the memory-bound kernels (layernorm, softmax, dropout, GELU, bias,
    residual) with h, so time ∝ h²/R + c·h and the share is e_max · h/(h + h_half)."""
    e = a.gemm_eff_max * h / (h + a.gemm_half_width)
    if t > 1:
        e *= (1 - a.tp_gemm_penalty) ** math.log2(t)
    return e


def predict_3d(case, a, system):
    """Step time of one GPT layout. case: dict with nodes, gpn, dp, tp, pp, mb, m, gbs, hidden, heads,
    layers, seq. system: peak, hbm, nvlink sizes table, NIC GB/s per node, grad bytes, latencies."""
    h, L, s, V = case["hidden"], case["layers"], case["seq"], VOCAB3D
    t, p, dp, mb, m, gpn, v = case["tp"], case["pp"], case["dp"], case["mb"], case["m"], case["gpn"], a.virtual_stages
    nodes = case["nodes"]
    assert t * p * dp == nodes * gpn, case
    tokens = mb * s
    layer_fwd = tokens * (24 * h * h + 4 * s * h)          # QKV, projection, MLP GEMMs + QK^T and AV
    passes = 4 if a.recompute else 3                        # forward, (recomputed forward), backward 2x
    head = 6 * tokens * h * V                               # LM head forward + backward, not recomputed
    rate = system["peak"] * gemm_efficiency(h, t, a)
    nic = system["nic_gbs"]
    # Where the groups sit (Megatron's rank order: tensor fastest, then data, then pipeline).
    def group_bw(n, stride):
        """(bus GB/s, latency µs) of a ring of n ranks whose members are stride ranks apart."""
        span = n * stride
        if span <= gpn:
            return nvlink_gbs(system["nvlink"], n), a.nvlink_latency_us
        per_node = max(1, gpn // stride) if stride < gpn else 1
        rings_per_nic = gpn // per_node                      # concurrent rings crossing each node's NICs
        return nic / rings_per_nic, a.ib_latency_us
    tp_bw, tp_lat = group_bw(t, 1)
    dp_bw, dp_lat = group_bw(dp, t)
    layers_per_stage = L / p
    ar_per_layer = 4 + (2 if a.recompute else 0)            # 2 fwd + 2 bwd (+ 2 in the recomputed fwd)
    act_bytes = tokens * h * 2                              # fp16 activations
    tp_ar = ring_seconds(act_bytes, t, tp_bw, tp_lat)
    stages = []
    for k in range(p):
        flops = passes * layer_fwd * layers_per_stage + (head if k == p - 1 else 0)
        compute = flops / t / rate
        comm = ar_per_layer * layers_per_stage * tp_ar
        stages.append((compute, comm))
    # Point-to-point between stages: one activation forward, one gradient backward per micro-batch (x v).
    p2p = 0.0
    if p > 1:
        sent = act_bytes / (t if a.p2p_scatter_gather else 1)
        if t * dp * p <= gpn:
            bw, lat = a.nvlink_p2p_gbs, a.nvlink_latency_us
        else:
            bw, lat = nic / min(gpn, t * dp), a.ib_latency_us  # every rank of a node sends at once
        p2p = 2 * v * (sent / (bw * 1e9) + lat * 1e-6)
    tau = [c + x + p2p for c, x in stages]
    if p == 1:
        pipeline = m * tau[0]
    else:
        pipeline = m * max(tau) + (p - 1) / v * sum(tau) / p
    # Data-parallel gradient all-reduce of this rank's parameters (largest stage: the last one holds
    # the LM head, tied to the first stage's embedding, whose gradients are summed across the two).
    layer_params = 12 * h * h + 13 * h
    stage_params = (layer_params * layers_per_stage + V * h + (s * h if p == 1 else 0)) / t
    grad_bytes = stage_params * system["grad_bytes"]
    compute_total = sum(c for c, _ in stages) / p * m
    if dp > 1:
        if p == 1 and a.dp_overlap and (t == 1 or a.dp_overlap_with_tp):
            backward = (stages[0][0] + stages[0][1]) * (passes - 1) / passes   # the last micro-batch's backward
            _, dp_exposed = exposed_comm_bw(grad_bytes, backward, dp, dp_bw, dp_lat, a.bucket_mb)
        else:                                               # after the pipeline flush, as Megatron does
            dp_exposed = ring_seconds(grad_bytes, dp, dp_bw, dp_lat)
    else:
        dp_exposed = 0.0
    embed = 0.0
    if p > 1:                                               # tied embedding: first and last stage
        ebytes = V * h / t * system["grad_bytes"]
        embed = ring_seconds(ebytes, 2, nic / min(gpn, t * dp), a.ib_latency_us) if gpn < t * dp * p else \
            ring_seconds(ebytes, 2, a.nvlink_p2p_gbs, a.nvlink_latency_us)
    optimizer = stage_params / (dp if case.get("zero1") else 1) * 32 / system["hbm"]
    step = pipeline + dp_exposed + embed + optimizer
    # Memory per GPU (rough): fp16 weights + grads and fp32 master + Adam = 18 B/param (ZeRO-1 shards
    # the 12), the layer inputs kept for recompute (min(m, p) micro-batches in flight on stage 0), one
    # layer's full activations (Korthikanti et al.: s·b·h·(34 + 5·a·s/h) / t bytes) and the logits
    # (fp16 + fp32 softmax). A reference only: the seeds' frameworks add workspaces and fragmentation.
    states = stage_params * (6 + 12 / (dp if case.get("zero1") else 1))
    inflight = min(m, p)
    stash = inflight * layers_per_stage * act_bytes if a.recompute else \
        inflight * layers_per_stage * tokens * h * (34 + 5 * case["heads"] * s / h) / t
    one_layer = tokens * h * (34 + 5 * case["heads"] * s / h) / t
    logits = tokens * V / t * 6                        # on the last stage; counted for every rank
    memory = states + stash + one_layer + logits
    return dict(step_s=step, samples_per_s=case["gbs"] / step, pipeline_s=pipeline, compute_s=compute_total,
                tp_comm_s=sum(x for _, x in stages) / p * m, p2p_s=p2p * m, dp_exposed_s=dp_exposed, embed_s=embed,
                optimizer_s=optimizer, bubble=bubble_fraction(p, m, v) if p > 1 else 0.0,
                tflops_rate=rate / 1e12, tp_bus_gbs=tp_bw if t > 1 else None, dp_bus_gbs=dp_bw if dp > 1 else None,
                memory_gb=memory / 2**30)


def exposed_comm_bw(grad_bytes, backward_s, ranks, bw, lat, bucket_mb):
    """exposed_comm() with an explicit bus bandwidth: buckets reduced as the backward fills them."""
    return bucketed_comm(grad_bytes, backward_s, bucket_mb, lambda size: ring_seconds(size, ranks, bw, lat))


def system_003(a):
    return dict(peak=PEAK["fp16"], hbm=HBM, nvlink=parse_sizes(a.dgx1_nvlink_gbs),
                nic_gbs=a.ib_gbps / 8 * a.ib_efficiency * a.s003_nics, grad_bytes=a.s003_grad_bytes)


def system_002(a):
    return dict(peak=PEAK["fp16"], hbm=HBM, nvlink=parse_sizes(a.jz_nvlink_gbs),
                nic_gbs=a.ib_gbps / 8 * a.ib_efficiency * a.s002_nics, grad_bytes=a.s002_grad_bytes)


def seed_003_rows(a):
    rows = []
    for (name, nodes, gpn, dp, tp, pp, mb, m, gbs, h, heads, L, lat_ms, mem_mib, sps) in SEED_003:
        case = dict(nodes=nodes, gpn=gpn, dp=dp, tp=tp, pp=pp, mb=mb, m=m, gbs=gbs, hidden=h, heads=heads,
                    layers=L, seq=SEQ3D["003"])
        r = predict_3d(case, a, system_003(a))
        rows.append(dict(case=name, layout=f"{nodes}n{gpn}g dp{dp} tp{tp} pp{pp} mb{mb} m{m}", seed=sps,
                         seed_ms=lat_ms, seed_mem_mib=mem_mib, predicted=r["samples_per_s"],
                         error=r["samples_per_s"] / sps - 1, **r))
    return rows


def seed_002_rows(a):
    rows = []
    for (section, gpus, size, dp, pp, mb, gbs, seconds, tflops, note) in SEED_002:
        h, L = S002_ARCH[size]
        tp = S002_TP
        consistent = tp * pp * dp == gpus
        if not consistent:                  # the seed's row cannot hold TP=4: the remaining factor is TP
            tp = gpus // (pp * dp)
        m = gbs // (mb * dp)
        case = dict(nodes=gpus // 4, gpn=4, dp=dp, tp=tp, pp=pp, mb=mb, m=m, gbs=gbs, hidden=h, heads=32,
                    layers=L, seq=SEQ3D["002"], zero1=section in ("ds-3d-zero1", "experiment-1", "experiment-2")
                    and dp > 1 and note not in ("ID 2.3", "ID 2.4"))
        r = predict_3d(case, a, system_002(a))
        # The seed's TFLOPs formula: size·4·2·seq·GBS / (seconds · GPUs) (4 = with activation checkpointing)
        pred_tflops = size * 1e9 * 4 * 2 * SEQ3D["002"] * gbs / (r["step_s"] * gpus) / 1e12
        name = f"{section} {gpus}g {size}B {note}".rstrip()
        rows.append(dict(case=name, layout=f"dp{dp} tp{tp}{'' if consistent else '*'} pp{pp} mb{mb} m{m}",
                         consistent=consistent, seed_s=seconds, seed_tflops=tflops, predicted_s=r["step_s"],
                         predicted_tflops=pred_tflops, error=seconds / r["step_s"] - 1, **r))
    return rows


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else float("nan")


def print_seed_003(rows):
    print("\nSeed 003 (OneFlow GPT, 4 nodes x 8 V100-SXM2-16GB, 100 Gb/s EDR, seq 2048, fp16, recompute): "
          "samples/s, error = predicted / seed - 1")
    print(f"  {'case':<24} {'layout':<30} {'compute':>8} {'TP comm':>8} {'p2p':>6} {'DP exp':>7} {'bubble':>6} "
          f"{'step ms':>8} {'seed ms':>8} {'pred/s':>7} {'seed/s':>7} {'error':>7} {'mem GiB':>7} {'seed':>5}")
    for r in rows:
        print(f"  {r['case']:<24} {r['layout']:<30} {r['compute_s'] * 1e3:>8.0f} {r['tp_comm_s'] * 1e3:>8.0f} "
              f"{r['p2p_s'] * 1e3:>6.0f} {r['dp_exposed_s'] * 1e3:>7.0f} {r['bubble']:>6.1%} {r['step_s'] * 1e3:>8.0f} "
              f"{r['seed_ms']:>8.0f} {r['predicted']:>7.2f} {r['seed']:>7.2f} {r['error']:>+7.1%} "
              f"{r['memory_gb']:>7.1f} {r['seed_mem_mib'] / 1024:>5.1f}")
    errs = [abs(r["error"]) for r in rows]
    print(f"  median |error| {median(errs):.1%}, mean {sum(errs) / len(errs):.1%}, max {max(errs):.1%} over {len(rows)} cases")


def print_seed_002(rows):
    print("\nSeed 002 (BigScience GPT on Jean Zay, 4 x V100-SXM2-32GB per node, seq 1024, fp16, recompute, TP=4): "
          "seconds per iteration; error = seed s / predicted s - 1 (as throughput); the seed says +/-40%")
    print(f"  {'case':<32} {'layout':<28} {'bubble':>6} {'pred s':>7} {'seed s':>7} {'error':>7} "
          f"{'pred TFLOPs':>11} {'seed TFLOPs':>11}")
    for r in rows:
        print(f"  {r['case']:<32} {r['layout']:<28} {r['bubble']:>6.1%} {r['predicted_s']:>7.1f} {r['seed_s']:>7.1f} "
              f"{r['error']:>+7.1%} {r['predicted_tflops']:>11.1f} {r['seed_tflops']:>11.1f}")
    ok = [abs(r["error"]) for r in rows if r["consistent"]]
    print("  * the seed's row has TP·PP·DP != GPUs with TP=4; modelled with TP = GPUs/(PP·DP), left out of the errors")
    print(f"  median |error| {median(ok):.1%}, mean {sum(ok) / len(ok):.1%}, max {max(ok):.1%} over {len(ok)} "
          f"consistent cases ({sum(1 for e in ok if e <= 0.4)} within the seed's +/-40%)")


def print_3d_assumptions(a):
    e = ", ".join(f"e({h}) = {gemm_efficiency(h, 1, a):.0%}" for h in (768, 1536, 2304, 3072, 6144, 8192))
    print("\nIn effect for seeds 002 and 003:")
    print(f"  compute: e_max {a.gemm_eff_max}, h_half {a.gemm_half_width:g}: {e} of {PEAK['fp16'] / 1e12:.0f} TFLOPs; "
          f"TP GEMM penalty {a.tp_gemm_penalty:.0%} per doubling of t; recompute {'on' if a.recompute else 'off'}")
    print(f"  pipeline: 1F1B, v = {a.virtual_stages}, bubble (p-1)/(v·m+p-1) (p=4, m=4: {bubble_fraction(4, 4, a.virtual_stages):.4f}); "
          f"p2p scatter-gather {'on' if a.p2p_scatter_gather else 'off'}, one NVLink {a.nvlink_p2p_gbs:g} GB/s")
    print(f"  links: DGX-1 rings {a.dgx1_nvlink_gbs} GB/s, Jean Zay rings {a.jz_nvlink_gbs} GB/s, NIC "
          f"{a.ib_gbps / 8 * a.ib_efficiency:.2f} GB/s x {a.s003_nics} (seed 003) / x {a.s002_nics} (seed 002), "
          f"latency {a.nvlink_latency_us:g} / {a.ib_latency_us:g} µs per ring step")
    print(f"  data parallel: gradients {a.s003_grad_bytes} B (seed 003) / {a.s002_grad_bytes} B (seed 002); overlap with "
          f"backward {'on' if a.dp_overlap else 'off'} for t = 1, {'on' if a.dp_overlap_with_tp else 'off'} for t > 1, "
          f"buckets {a.bucket_mb:g} MB")


def check_seed_files(directory):
    """Compare the transcribed figures with the seed files when they are at hand; returns the misses."""
    import glob
    import re
    misses = []
    texts = {}
    for key in ("002", "003"):
        found = glob.glob(f"{directory}/{key}_*.txt")
        if not found:
            misses.append(f"seed {key}: no {key}_*.txt in {directory}")
            continue
        texts[key] = " ".join(open(found[0], encoding="utf-8").read().split())
    if "003" in texts:
        for row in SEED_003:
            name, lat, mem, sps = row[0], row[12], row[13], row[14]
            pattern = rf"{re.escape(name)} \| {lat} \(ms\) \| {mem} \(MiB\) \| {sps:g}\b"
            if not re.search(pattern, texts["003"]):
                misses.append(f"seed 003: {name} {lat} ms {mem} MiB {sps:g}/s not found")
    if "002" in texts:
        for row in SEED_002:
            seconds, tflops = row[7], row[8]
            if not re.search(rf"\b{seconds:g}s? {tflops:.1f}\b", texts["002"]):
                misses.append(f"seed 002: {row[0]} {seconds:g} s {tflops:.1f} TFLOPs not found")
    return misses


def print_summary(rows3, rows2, a):
    by = {r["case"]: r for r in rows3}
    def err(name):
        return f"{by[name]['error']:+.0%}"
    tp_x = [r for r in rows3 if r["case"].startswith("MP_1x") and r["case"].split("_")[1] in ("1x16x1", "1x32x1")]
    measured_bw = []
    for r in tp_x:
        t, L = int(r["case"].split("x")[1]), int(r["case"].rsplit("x", 1)[1])
        h = int(r["case"].rsplit("_", 1)[1].split("x")[0])
        per_ar = (r["seed_ms"] / 1e3 - r["compute_s"] - r["optimizer_s"]) / ((4 + 2 * a.recompute) * L)
        measured_bw.append(2 * (t - 1) / t * 16 * 2048 * h * 2 / per_ar / 1e9)
    same = sorted(r["seed_s"] for r in rows2 if r["case"].startswith("meg-perf 64g 52B") and r["layout"] == "dp1 tp4 pp16 mb4 m256")
    fast = [r for r in rows2 if r["consistent"] and abs(r["error"]) <= 0.4]
    slow = [r for r in rows2 if r["consistent"] and abs(r["error"]) > 0.4]
    print("\nWhere the model is off, and why:")
    print(f"  * seed 003, tensor parallel across nodes (MP_1x16x1 {err('MP_1x16x1_16_3072x16')}, MP_1x32x1 "
          f"{err('MP_1x32x1_16_3072x32')}): the all-reduces are 85-90% of the step; the seed's times mean a bus "
          f"bandwidth of {min(measured_bw):.1f}-{max(measured_bw):.1f} GB/s on the 100 Gb/s NIC, against the "
          f"{a.ib_gbps / 8 * a.ib_efficiency:.2f} assumed (its topo puts mlx5_0 behind GPU2/3's PCIe switch, GPUs 4-7 "
          f"across the CPU link). --ib-efficiency 0.68 fits them and costs the DP and PP cases.")
    print(f"  * seed 003, tensor parallel in a node (MP_1x8x1 {err('MP_1x8x1_16_1536x16')}, 2D_2x4x1 "
          f"{err('2D_2x4x1_16_1536x16')}, 2D_4x2x1 {err('2D_4x2x1_16_1536x16')}): t = 8 is slower than 6 all-reduces "
          f"per layer at 120 GB/s give; t = 2 and 4 fit with one and two NVLinks' bandwidth.")
    print(f"  * seed 003, pipeline (DP_PP_8x1x4 {err('DP_PP_8x1x4_512_1536x16')}, 2D_PP_2x4x4 "
          f"{err('2D_PP_2x4x4_512_2304x24')}, MP_PP_1x8x4 {err('MP_PP_1x8x4_512_2304x24')}, 2D_PP_2x8x2 "
          f"{err('2D_PP_2x8x2_512_2304x24')}): the bubble is small (m = 32: {bubble_fraction(4, 32):.1%} at p = 4), "
          f"so the error is in the stage time: blocking sends of every rank through one NIC and the LM head on the "
          f"last stage (+{6 * 50257 / (4 * 4 * (24 * 1536 + 4 * 2048)):.0%} for 1536x16 at p = 4) make the model slow "
          f"where OneFlow's actors overlap copies with compute or balance the stages.")
    dp_only = max(abs(r["error"]) for r in rows3 if r["case"].startswith(("DP_", "2D_")) and "x1x1_" in r["case"])
    overlapped = {r["case"]: r["error"] for r in seed_003_rows(argparse.Namespace(**{**vars(a), "dp_overlap_with_tp": True}))}
    print(f"  * seed 003, data parallel alone: within {dp_only:.0%} (fp32 gradient rings overlapped with backward); 2D "
          f"across nodes fits only with the all-reduce not overlapped (2D_2x8x1 {err('2D_2x8x1_16_2304x24')}, 2D_4x8x1 "
          f"{err('2D_4x8x1_32_2304x24')}; overlapped they would be {overlapped['2D_2x8x1_16_2304x24']:+.0%} and "
          f"{overlapped['2D_4x8x1_32_2304x24']:+.0%}).")
    print(f"  * seed 002: {len(fast)} of {len(fast) + len(slow)} consistent rows within the seed's +/-40%. The others are "
          f"05-26/05-28 runs ({', '.join(sorted({r['case'].split()[2] + ' ' + r['case'].split()[1] for r in slow}))}): the "
          f"same 52B layout (meg-perf, pp16, mb4, m256) took {', '.join(f'{x:g}' for x in same)} s on four days, which no "
          f"model of the layout separates. The "
          f"bubble-bound max-size rows (m = 4, p up to 64, bubble up to {max(r['bubble'] for r in rows2):.0%}) are within "
          f"{max(abs(r['error']) for r in rows2 if r['case'].startswith('maxsize')):.0%}; with many micro-batches the model is "
          f"optimistic (e(8192) = {gemm_efficiency(8192, 1, a):.0%} of peak is the 1-GPU fit extrapolated from h = 1536; the seed's "
          f"best runs imply ~50%).")


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
    g = ap.add_argument_group("tensor / pipeline parallel GPT (seeds 002 and 003)")
    g.add_argument("--check-seeds", metavar="DIR",
                   help="check the transcribed seed 002/003 figures against DIR/002_*.txt and DIR/003_*.txt (exit 1 on a miss)")
    g.add_argument("--gemm-eff-max", type=float, default=0.68,
                   help="fp16 peak share of a wide transformer layer: e_max in e_max·h/(h+h_half) (0.68)")
    g.add_argument("--gemm-half-width", type=float, default=940,
                   help="h_half: the hidden size at which a layer reaches half of e_max (940)")
    g.add_argument("--tp-gemm-penalty", type=float, default=0.0,
                   help="compute share lost per doubling of t on the narrower per-rank GEMMs (0: none)")
    g.add_argument("--recompute", action=argparse.BooleanOptionalAction, default=True,
                   help="activation checkpointing: 4 passes per layer and 6 TP all-reduces instead of 3 and 4 (on)")
    g.add_argument("--virtual-stages", type=int, default=1, help="interleaved 1F1B chunks per rank, v (1)")
    g.add_argument("--p2p-scatter-gather", action="store_true",
                   help="each TP rank sends 1/t of a stage boundary's activation (Megatron's scatter-gather; off)")
    g.add_argument("--dp-overlap", action=argparse.BooleanOptionalAction, default=True,
                   help="without pipeline, overlap the gradient all-reduce with the backward pass (on)")
    g.add_argument("--dp-overlap-with-tp", action=argparse.BooleanOptionalAction, default=False,
                   help="also overlap it when t > 1 (off: the TP all-reduces share the NCCL stream)")
    g.add_argument("--dgx1-nvlink-gbs", default="2:22,4:45,8:120",
                   help="seed 003 node (DGX-1 hybrid cube mesh): ring bus GB/s by group size (2:22,4:45,8:120)")
    g.add_argument("--jz-nvlink-gbs", default="2:45,4:90",
                   help="seed 002 node (4 V100 SXM2, 2 NVLinks per pair): ring bus GB/s by group size (2:45,4:90)")
    g.add_argument("--nvlink-p2p-gbs", type=float, default=22, help="one NVLink, point-to-point GB/s (22)")
    g.add_argument("--s003-nics", type=int, default=1, help="100 Gb/s NICs per node, seed 003 (1: one mlx5_0)")
    g.add_argument("--s002-nics", type=int, default=1, help="100 Gb/s NICs per node, seed 002 (1; not in the seed)")
    g.add_argument("--s003-grad-bytes", type=int, default=4,
                   help="bytes per gradient element in OneFlow's all-reduce (4: fp32, see the DP cases)")
    g.add_argument("--s002-grad-bytes", type=int, default=2, help="bytes per gradient element, Megatron fp16 (2)")
    g = ap.add_argument_group("one data-parallel BERT on a link of your own (scripts/bench/shaped_link.sh); "
                              "the link is --ib-gbps, --ib-efficiency and --ib-latency-us")
    g.add_argument("--link-bert", metavar="L,H,V,S,P",
                   help="predict only this BERT: layers, hidden, vocabulary, sequence, masked predictions")
    g.add_argument("--link-batch", type=int, default=8, help="samples per rank per step (8)")
    g.add_argument("--link-step-ms", type=float, help="measured ms of one rank's step (sets the compute rate)")
    g.add_argument("--link-nodes", type=int, default=2, help="hosts, one rank each (2)")
    a = ap.parse_args(argv)

    if a.link_bert:
        if not a.link_step_ms:
            ap.error("--link-bert needs --link-step-ms (the measured one-rank step)")
        r = predict_link(a)
        print_link(r)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(r, f, indent=1)
        return 0
    print(__doc__.split("\n\n", 2)[2].rstrip())
    print_3d_assumptions(a)
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
    out["seed_003"] = seed_003_rows(a)
    print_seed_003(out["seed_003"])
    out["seed_002"] = seed_002_rows(a)
    print_seed_002(out["seed_002"])
    print_summary(out["seed_003"], out["seed_002"], a)
    out["bubble_p4_m4"] = bubble_fraction(4, 4)
    if a.check_seeds:
        misses = check_seed_files(a.check_seeds)
        for x in misses:
            print(f"seed check: {x}")
        print(f"seed check: {len(SEED_003)} + {len(SEED_002)} transcribed rows against {a.check_seeds}: "
              f"{'all found' if not misses else f'{len(misses)} not found'}")
        if misses:
            return 1
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
