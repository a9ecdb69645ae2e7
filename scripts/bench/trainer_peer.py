"""The peer of bench_trainer: the same model in PyTorch CPU eager (HF transformers' BertForPreTraining
and GPT2LMHeadModel, dropout off, eager attention), one step = forward + backward + AdamW, on a
random batch of the same shape. Prints one JSON object like bench_trainer's."""
import argparse
import json
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--kind", default="bert")
p.add_argument("--model", default="small")
p.add_argument("--seq", type=int, default=128)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--predictions", type=int, default=20)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(1)
SHAPES = {"bert": {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
                   "base": (12, 768, 12), "large": (24, 1024, 16)},
          "gpt": {"tiny": (2, 128, 2), "124M": (12, 768, 12), "350M": (24, 1024, 16)}}
L, C, NH = SHAPES[a.kind][a.model]
B, T = a.batch, a.seq
if a.kind == "bert":
    from transformers import BertConfig, BertForPreTraining
    V = 30522
    model = BertForPreTraining(BertConfig(vocab_size=V, hidden_size=C, num_hidden_layers=L, num_attention_heads=NH,
                                          intermediate_size=4 * C, hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0, attn_implementation="eager"))
    ids = torch.randint(1000, V, (B, T))
    labels = torch.full((B, T), -100)
    pos = torch.tensor([1 + p * (T - 2) // a.predictions for p in range(a.predictions)])
    labels[:, pos] = torch.randint(1000, V, (B, a.predictions))
    nsp = torch.randint(0, 2, (B,))
    types, mask = torch.zeros(B, T, dtype=torch.long), torch.ones(B, T, dtype=torch.long)

    def loss_fn():
        return model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
                     next_sentence_label=nsp).loss
else:
    from transformers import GPT2Config, GPT2LMHeadModel
    V = 50257
    model = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=1024, n_embd=C, n_layer=L, n_head=NH, resid_pdrop=0.0,
                                       embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager"))
    ids, targets = torch.randint(1000, V, (B, T)), torch.randint(0, V, (B, T))

    def loss_fn():
        logits = model(input_ids=ids).logits
        return torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1))
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
times = []
for s in range(a.warmup + a.steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn()
    loss.backward()
    opt.step()
    t = (time.perf_counter() - t0) * 1e3
    if s >= a.warmup:
        times.append(t)
print(json.dumps({"impl": "pytorch", "kind": a.kind, "model": a.model, "threads": a.threads, "batch": B, "seq": T,
                  "median_ms": statistics.median(times), "mean_ms": statistics.mean(times), "loss": loss.item(),
                  "torch": torch.__version__}))
