"""The peer of our trainer: the same model in PyTorch (HF transformers' BertForPreTraining and
GPT2LMHeadModel), one step = forward + backward (+ gradient clipping) + AdamW, on a random batch of
the same shape. Prints one JSON object per case.

By default what scripts/bench/trainer_cpu.sh compares with bench_trainer: CPU eager, fp32, eager
attention, dropout off, BERT's MLM loss over every position (HF's labels), the median ms of the
timed steps. scripts/bench/gpu.sh runs it as the field trains on a GPU: --device cuda --precision
bf16 (autocast; fp32 weights and AdamW state, fused AdamW), --attention sdpa, --sparse-mlm (BERT's
MLM head on the masked positions only, as NVIDIA's BERT does), --clip 1, BERT's dropout 0.1, and
--compile for torch.compile as a second peer; several --case in one process (torch is imported
once), each skipped when --time-left runs short. On CUDA the timed steps run back to back with
CUDA events between them (no host sync inside the window), and peak_mb is
torch.cuda.max_memory_allocated over the case (weights, gradients, optimizer state, activations).
FLOPs per step are our trainer's count (trainer/model.cpp train_flops_per_sample, PaLM's)."""
import argparse
import gc
import json
import statistics
import sys
import time
import traceback

import torch
import transformers

p = argparse.ArgumentParser()
p.add_argument("--kind", default="bert")
p.add_argument("--model", default="small")
p.add_argument("--seq", type=int, default=128)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--predictions", type=int, default=20)
p.add_argument("--case", action="append", default=[],
               help="'KIND MODEL SEQ BATCH [PREDICTIONS]' (repeatable; replaces --kind/--model/--seq/--batch/--predictions)")
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--device", default="cpu", help="cpu or cuda")
p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast to bfloat16")
p.add_argument("--attention", default="eager", choices=["eager", "sdpa"])
p.add_argument("--dropout", default="0", help="hidden and attention dropout; auto: the trainers' defaults (BERT 0.1, GPT 0)")
p.add_argument("--sparse-mlm", action="store_true", help="BERT: MLM head over the masked positions only")
p.add_argument("--clip", type=float, default=0.0, help="gradient-norm clipping (0: off)")
p.add_argument("--compile", action="store_true", help="torch.compile the model's loss")
p.add_argument("--time-left", type=float, default=0.0,
               help="seconds this process may run; a case is skipped when fewer than --case-seconds remain (0: no limit)")
p.add_argument("--case-seconds", type=float, default=30.0, help="what one case is expected to take, for --time-left")
p.add_argument("--ceilings", action="store_true",
               help="CUDA: first measure the GPU's bf16 matrix rate and copy bandwidth (METHOD.md's two ceilings)")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(1)
cuda = a.device.startswith("cuda")
if cuda:
    torch.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT: fp32 matmuls outside autocast on tensor cores
    torch.backends.cudnn.allow_tf32 = True
STARTED = time.monotonic()
SHAPES = {"bert": {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
                   "base": (12, 768, 12), "large": (24, 1024, 16)},
          "gpt": {"tiny": (2, 128, 2), "124M": (12, 768, 12), "350M": (24, 1024, 16)}}
VOCAB = {"bert": 30522, "gpt": 50257}


def train_flops_per_sample(kind, L, C, V, T, masked):
    """trainer/model.cpp's train_flops_per_sample (intermediate 4C, one instance per row)."""
    flops = 6 * T * L * (4 * C * C + 2 * C * 4 * C) + 12 * L * C * T * T
    return flops + (6 * T * C * V if kind == "gpt" else 6 * (C * C + 2 * C) + 6 * masked * (C * C + C * V))


class Bert(torch.nn.Module):
    """BertForPreTraining's loss: MLM (+ NSP). sparse: the MLM head runs on the masked positions
    only (NVIDIA's BERT); else on every position with -100 labels elsewhere (HF's forward)."""

    def __init__(self, model, sparse):
        super().__init__()
        self.model, self.sparse = model, sparse

    def forward(self, ids, types, mask, positions, mlm_ids, labels, nsp):
        if not self.sparse:
            return self.model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
                              next_sentence_label=nsp).loss
        out = self.model.bert(input_ids=ids, token_type_ids=types, attention_mask=mask)
        hidden, pooled = out[0], out[1]
        picked = torch.gather(hidden, 1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        scores = self.model.cls.predictions(picked).float()
        nsp_scores = self.model.cls.seq_relationship(pooled).float()
        f = torch.nn.functional
        return f.cross_entropy(scores.view(-1, scores.shape[-1]), mlm_ids.view(-1)) + f.cross_entropy(nsp_scores, nsp)


class Gpt(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, targets):
        logits = self.model(input_ids=ids).logits
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def build(kind, model_name, B, T, P):
    """The model wrapped with its loss, and the random batch's tensors, on the device."""
    L, C, NH = SHAPES[kind][model_name]
    V = VOCAB[kind]
    gen = torch.Generator().manual_seed(1)
    drop = (0.1 if kind == "bert" else 0.0) if a.dropout == "auto" else float(a.dropout)
    attention = a.attention
    if attention == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        attention = "eager"  # torch < 2.0 (Debian's, for --dry-run): the row says which ran
    if kind == "bert":
        from transformers import BertConfig, BertForPreTraining
        config = BertConfig(vocab_size=V, hidden_size=C, num_hidden_layers=L, num_attention_heads=NH,
                            intermediate_size=4 * C, hidden_dropout_prob=drop, attention_probs_dropout_prob=drop,
                            attn_implementation=attention)
        hf = BertForPreTraining(config)
        ids = torch.randint(1000, V, (B, T), generator=gen)
        positions = torch.tensor([1 + p * (T - 2) // P for p in range(P)]).repeat(B, 1)
        mlm_ids = torch.randint(1000, V, (B, P), generator=gen)
        labels = torch.full((B, T), -100)
        labels.scatter_(1, positions, mlm_ids)
        nsp = torch.randint(0, 2, (B,), generator=gen)
        types, mask = torch.zeros(B, T, dtype=torch.long), torch.ones(B, T, dtype=torch.long)
        module, batch = Bert(hf, a.sparse_mlm), (ids, types, mask, positions, mlm_ids, labels, nsp)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(vocab_size=V, n_positions=1024, n_embd=C, n_layer=L, n_head=NH, resid_pdrop=drop,
                            embd_pdrop=drop, attn_pdrop=drop, attn_implementation=attention)
        hf = GPT2LMHeadModel(config)
        module, batch = Gpt(hf), (torch.randint(1000, V, (B, T), generator=gen), torch.randint(0, V, (B, T), generator=gen))
    flops = B * train_flops_per_sample(kind, L, C, V, T, P if kind == "bert" else 0)
    attention = getattr(hf.config, "_attn_implementation", None) or attention
    return module.to(a.device), tuple(t.to(a.device) for t in batch), flops, sum(x.numel() for x in hf.parameters()), attention


def run_case(kind, model_name, T, B, P):
    module, batch, flops, params, attention = build(kind, model_name, B, T, P)
    module.train()
    opt_args = {"lr": 1e-4}
    fused = False
    if cuda:
        try:
            opt = torch.optim.AdamW(module.parameters(), fused=True, **opt_args)
            fused = True
        except (TypeError, RuntimeError):
            opt = torch.optim.AdamW(module.parameters(), **opt_args)
    else:
        opt = torch.optim.AdamW(module.parameters(), **opt_args)
    loss_of = torch.compile(module) if a.compile else module
    autocast = torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_of(*batch)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(module.parameters(), a.clip)
        opt.step()
        return loss

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        loss = step()
    if cuda:
        torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    times = []
    if cuda:  # back to back, an event between steps: no host sync inside the window
        events = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps + 1)]
        events[0].record()
        for s in range(a.steps):
            loss = step()
            events[s + 1].record()
        torch.cuda.synchronize()
        times = [events[s].elapsed_time(events[s + 1]) for s in range(a.steps)]
    else:
        for _ in range(a.steps):
            t = time.perf_counter()
            loss = step()
            times.append((time.perf_counter() - t) * 1e3)
    median = statistics.median(times)
    return {"median_ms": median, "mean_ms": statistics.mean(times), "warmup_s": warmup_s, "loss": loss.item(),
            "flops_per_step": flops, "tflops": flops / median / 1e9, "samples_per_s": B * 1e3 / median,
            "parameters": params, "attention": attention, "optimizer": "AdamW (fused)" if fused else "AdamW"}


def ceilings():
    """An 8192³ bf16 matrix product on random data, and a 2 GiB device-to-device copy (bytes read plus
    written): medians of 10 after 3 warm-ups, timed with CUDA events."""
    def median_ms(f):
        for _ in range(3):
            f()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(11)]
        events[0].record()
        for i in range(10):
            f()
            events[i + 1].record()
        torch.cuda.synchronize()
        return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(10))
    n = 8192
    x, y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    matmul = 2 * n ** 3 / median_ms(lambda: x @ y) / 1e9
    src = torch.randn(2 ** 29, device="cuda")
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / median_ms(lambda: dst.copy_(src)) / 1e9  # TB/s
    del x, y, src, dst
    torch.cuda.empty_cache()
    return {"impl": "ceilings", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "bf16_matmul_tflops": matmul, "copy_tb_s": copy, "status": "ok"}


if a.ceilings and cuda:
    try:
        print(json.dumps(ceilings()), flush=True)
    except Exception as e:  # the cases still run
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"impl": "ceilings", "status": "failed", "note": f"{type(e).__name__}: {e}"[:300]}), flush=True)
cases = [c.split() for c in a.case] or [[a.kind, a.model, str(a.seq), str(a.batch), str(a.predictions)]]
impl = "pytorch " + ("compile" if a.compile else "eager")
for c in cases:
    kind, model_name, T, B = c[0], c[1], int(c[2]), int(c[3])
    P = int(c[4]) if len(c) > 4 else a.predictions
    out = {"impl": impl, "kind": kind, "model": model_name, "seq": T, "batch": B, "predictions": P if kind == "bert" else 0,
           "threads": a.threads, "device": torch.cuda.get_device_name() if cuda else "cpu", "precision": a.precision,
           "torch": torch.__version__, "transformers": transformers.__version__, "steps": a.steps, "warmup": a.warmup}
    left = a.time_left - (time.monotonic() - STARTED) if a.time_left > 0 else float("inf")
    if a.compile and not hasattr(torch, "compile"):
        out.update(status="skipped", note=f"torch {torch.__version__} has no torch.compile")
    elif left < a.case_seconds:
        out.update(status="skipped", note=f"time budget: {max(left, 0):.0f} s left, a case takes ~{a.case_seconds:.0f} s")
    else:
        if cuda:
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            out.update(run_case(kind, model_name, T, B, P), status="ok")
            if cuda:
                out["peak_mb"] = torch.cuda.max_memory_allocated() / 1e6
        except Exception as e:  # one case's failure (out of memory, a compiler error) is reported, the rest run
            traceback.print_exc(file=sys.stderr)
            out.update(status="failed", note=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
        if a.compile:
            torch._dynamo.reset()
    print(json.dumps(out), flush=True)
