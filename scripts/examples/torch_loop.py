#!/usr/bin/env python3
"""Train a tiny PyTorch model from our shards through the pretrain_loader module.

  scripts/examples/torch_loop.py --model bert shards/bert/ --steps 60
  scripts/examples/torch_loop.py --model gpt shards/gpt/ --seq-len 64 --steps 60

BERT: a small transformer encoder with the masked-LM + next-sentence losses, from the batch's
mlm_labels (-1 = not predicted) and next_sentence_labels. GPT: a small causal LM on tokens/targets.
Batches reach torch without a copy (torch.from_numpy on the loader's ring slots); the slot goes back
to the loader when the step drops its tensors. Halfway (--resume-at) the loader's state is saved,
the loader closed, and a new one restored from the state: the run goes on with exactly the batches
an uninterrupted run gets, which the script checks against the old loader's next batch.

Prints "step N loss X" per step, then a JSON summary line. Needs the package installed (pip install .)
or built (cmake --build build --target pretrain_python) and python3 with torch (Debian's python3-torch).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn


def import_module(build_dir):
    """pretrain.loader from --build-dir (or $PRETRAIN_BUILD_DIR) when given, else the installed package
    (pip install .), else this source tree's build/."""
    here = os.path.dirname(os.path.abspath(__file__))
    build_dir = build_dir or os.environ.get("PRETRAIN_BUILD_DIR")
    if build_dir:
        sys.path.insert(0, os.path.join(build_dir, "python"))
    try:
        import pretrain.loader
    except ImportError:
        sys.path.insert(0, os.path.join(here, "..", "..", "build", "python"))
        import pretrain.loader
    return pretrain.loader


def as_torch(array):
    """A torch view of a numpy array (no copy). torch has no uint16: those are widened (a copy)."""
    if array.dtype == np.uint16:
        return torch.from_numpy(array.astype(np.int32))
    return torch.from_numpy(array)


def init_embeddings(model):
    """BERT's and GPT-2's N(0, 0.02): with the output projection tied to the token embeddings, torch's
    N(0, 1) default would start at logits of ±8 and a loss far above log(vocab)."""
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)


class TinyBert(nn.Module):
    def __init__(self, vocab, seq_len, dim, layers, heads):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq_len, dim)
        self.segments = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.mlm_transform = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim))
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.pooler = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.nsp = nn.Linear(dim, 2)
        init_embeddings(self)

    def loss(self, batch):
        ids = as_torch(batch["input_ids"]).long()
        segments = as_torch(batch["segment_ids"]).long()
        padding = as_torch(batch["input_mask"]) == 0
        labels = as_torch(batch["mlm_labels"]).long()
        nsp_labels = as_torch(batch["next_sentence_labels"]).long()
        positions = torch.arange(ids.shape[1])
        x = self.norm(self.tokens(ids) + self.positions(positions) + self.segments(segments))
        x = self.encoder(x, src_key_padding_mask=padding)
        picked = labels >= 0  # score only the predicted positions: [M, vocab] instead of [B·S, vocab]
        logits = self.mlm_transform(x[picked]) @ self.tokens.weight.t() + self.mlm_bias
        mlm = nn.functional.cross_entropy(logits, labels[picked])
        nsp = nn.functional.cross_entropy(self.nsp(self.pooler(x[:, 0])), nsp_labels)
        return mlm + nsp


class TinyGpt(nn.Module):
    def __init__(self, vocab, seq_len, dim, layers, heads):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.decoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("causal", torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1))
        init_embeddings(self)

    def loss(self, batch):
        tokens = as_torch(batch["tokens"]).long()
        targets = as_torch(batch["targets"]).long()
        s = tokens.shape[1]
        x = self.tokens(tokens) + self.positions(torch.arange(s))
        x = self.norm(self.decoder(x, mask=self.causal[:s, :s]))
        logits = x @ self.tokens.weight.t()
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def same_batch(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shards", nargs="+", help="a manifest directory (or manifest.json, shard files, globs)")
    p.add_argument("--model", choices=("bert", "gpt"), default="bert")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=0, help="GPT: tokens per sample (required); BERT: the shards'")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dynamic-masking", action="store_true", help="BERT: new masks every epoch (LDDL's)")
    p.add_argument("--resume-at", type=int, default=-1,
                   help="save the loader state after this step and continue from a new loader (default: steps/2; 0: never)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--build-dir", help="use the modules built there (<dir>/python), not the installed package")
    args = p.parse_args()
    if args.model == "gpt" and args.seq_len <= 0:
        p.error("--model gpt needs --seq-len")

    pretrain_loader = import_module(args.build_dir)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)

    options = dict(kind=args.model, batch_size=args.batch_size, seed=args.seed, workers=args.workers,
                   id_dtype="int64")
    if args.seq_len:
        options["seq_len"] = args.seq_len
    if args.dynamic_masking:
        # [MASK], the vocabulary size and the ids never to mask come from the shards' manifest.
        options["dynamic_masking"] = True
    loader = pretrain_loader.Loader(args.shards, **options)

    def open_loader():
        return pretrain_loader.Loader(args.shards, **options)

    vocab = loader.vocab_size
    if vocab <= 0:
        sys.exit("the shards have no manifest with the tokenizer's vocabulary size: pass a manifest directory")
    seq_len = loader.seq_len
    model_type = TinyBert if args.model == "bert" else TinyGpt
    model = model_type(vocab, seq_len, args.dim, args.layers, args.heads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    params = sum(p.numel() for p in model.parameters())
    print(f"{args.model}: vocab {vocab}, seq_len {seq_len}, {params} parameters; {loader.samples_per_epoch} samples, "
          f"{loader.batches_per_epoch} batches of {args.batch_size} per epoch", flush=True)

    resume_at = args.steps // 2 if args.resume_at < 0 else args.resume_at
    losses, resumed = [], None
    start = time.perf_counter()
    step = 0
    while step < args.steps:
        batch = loader.next_batch()
        if batch is None:  # end of an epoch; the next call starts the next one
            continue
        loss = model.loss(batch)
        del batch  # the step's tensors hold the ring slot until backward is done with them
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            sys.exit(f"step {step}: loss is {losses[-1]}")
        print(f"step {step} loss {losses[-1]:.4f}", flush=True)

        if step == resume_at and step < args.steps:
            # What a checkpoint stores: the loader's state string (with the model and optimizer).
            state = loader.state()
            peek = loader.next_batch()
            while peek is None:
                peek = loader.next_batch()
            expected = {k: np.array(v) for k, v in peek.items()}
            del peek
            loader.close()
            loader = open_loader()
            loader.restore(state)
            first = loader.next_batch()
            while first is None:
                first = loader.next_batch()
            resumed = same_batch(first, expected)
            print(f"resumed from state {state}: the next batch is {'identical' if resumed else 'DIFFERENT'}",
                  flush=True)
            if not resumed:
                sys.exit("a restored loader gave another batch")
            loss = model.loss(first)
            del first
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            losses.append(loss.item())
            print(f"step {step} loss {losses[-1]:.4f}", flush=True)

    seconds = time.perf_counter() - start
    k = max(1, min(5, len(losses) // 4))
    summary = {
        "model": args.model, "steps": step, "seconds": round(seconds, 3), "steps_per_second": round(step / seconds, 2),
        "first_loss": sum(losses[:k]) / k, "last_loss": sum(losses[-k:]) / k, "resumed_identical": resumed,
        "loader": loader.stats(), "module": sys.modules["pretrain_loader"].__file__,
    }
    print(json.dumps(summary), flush=True)
    loader.close()


if __name__ == "__main__":
    main()
