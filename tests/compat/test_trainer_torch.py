"""Our BERT and GPT-2 against PyTorch, in fp32, on the same weights and batch.

The references are HF transformers' own BertForPreTraining and GPT2LMHeadModel (torch, CPU): the
weights are made there, saved as safetensors under the names our trainer uses (HF's for BERT;
nanoGPT's for GPT-2, i.e. HF's with the Conv1D weights transposed to nn.Linear's [out, in]), loaded
by tests/compat/trainer_dump (our model), which writes its loss, logits and the gradient of every
parameter. Checked:
  * losses within 1e-5 relative; logits and each parameter's gradient within 1e-4 of the tensor's
    largest magnitude (a per-tensor relative error: element-wise ratios of near-zero gradients
    are noise in either implementation);
  * 10 steps of AdamW (torch.optim.AdamW with clip_grad_norm_) and of LAMB (apex FusedLAMB's
    algorithm in torch, torch_optimizers.py) on that batch give losses within 1e-5 relative.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import compat_util  # noqa: E402

compat_util.require_venv_modules("torch", "transformers", "safetensors")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
import torch_optimizers  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(2)
failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append(f"{what}: {detail}")
        print(f"FAIL {what}: {detail}")


def close_tensor(what, ours, theirs, tol=1e-4):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        return check(what, False, f"shape {ours.shape} vs {theirs.shape}")
    # The floor: BERT's key biases have a gradient that is exactly 0 in exact arithmetic (softmax
    # does not change when a constant is added to every score of a row); both sides give ~1e-12.
    scale = max(np.abs(theirs).max(), 1e-6)
    err = np.abs(ours - theirs).max() / scale
    check(what, err <= tol, f"max error {err:.2e} of the largest magnitude {scale:.3e}")
    return err


def close_scalar(what, ours, theirs, tol=1e-5):
    err = abs(ours - theirs) / max(abs(theirs), 1e-12)
    check(what, err <= tol, f"ours {ours:.9f} torch {theirs:.9f} (relative {err:.2e})")
    return err


def run_ours(kind, shape, weights, batch, tmp, **opt):
    bpath, wpath, out = (os.path.join(tmp, f) for f in ("batch.safetensors", "w.safetensors", "out.safetensors"))
    save_file({k: v.float().contiguous() for k, v in batch.items()}, bpath)
    save_file({k: v.contiguous() for k, v in weights.items()}, wpath)
    args = [compat_util.tool("trainer_dump"), "--kind", kind, "--shape", ",".join(map(str, shape)),
            "--batch", bpath, "--weights", wpath, "--out", out, "--threads", "2"]
    for k, v in opt.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    compat_util.run(*args)
    return load_file(out)


def train_torch(model, params_of, loss_of, optimizer, steps, lr, wd, eps, max_norm):
    named = dict(params_of(model))
    if optimizer == "adamw":
        opt = torch_optimizers.adamw(named, lr, wd, eps)
    state = torch_optimizers.lamb_state(named)
    losses = []
    for t in range(1, steps + 1):
        model.zero_grad()
        loss = loss_of(model)
        loss.backward()
        losses.append(loss.item())
        if optimizer == "adamw":
            if max_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            opt.step()
        else:
            grads = {n: p.grad for n, p in named.items()}
            torch_optimizers.lamb_step(named, grads, state, t, lr, 0.9, 0.999, eps, wd, max_norm)
    return losses


def bert(tmp):
    from transformers import BertConfig, BertForPreTraining
    L, C, NH, I, V, POS, B, T, P = 2, 32, 4, 128, 97, 64, 4, 16, 5
    cfg = BertConfig(vocab_size=V, hidden_size=C, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=I,
                     max_position_embeddings=POS, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     layer_norm_eps=1e-12, attn_implementation="eager")

    def make():
        torch.manual_seed(1)
        m = BertForPreTraining(cfg).float()
        with torch.no_grad():  # HF starts biases at 0: give them values, so their gradients are tested too
            for n, p in m.named_parameters():
                if n.endswith("bias"):
                    p.normal_(0, 0.02)
        return m

    model = make()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0] = 2  # [CLS]
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 12:] = 0
    mask[3, 9:] = 0
    ids[mask == 0] = 0
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, T // 2:] = 1
    types[mask == 0] = 0
    positions = torch.zeros(B, P, dtype=torch.long)
    mlm_ids = torch.zeros(B, P, dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for b, count in enumerate([5, 3, 4, 1]):  # predictions per sample (the rest is padding)
        pos = torch.sort(torch.randperm(8, generator=g)[:count] + 1).values
        positions[b, :count] = pos
        mlm_ids[b, :count] = torch.randint(5, V, (count,), generator=g)
        labels[b, pos] = mlm_ids[b, :count]
    nsp = torch.tensor([0, 1, 1, 0])
    batch = {"input_ids": ids, "segment_ids": types, "input_mask": mask, "masked_lm_positions": positions,
             "masked_lm_ids": mlm_ids, "next_sentence_labels": nsp}
    weights = {n: p.detach().clone() for n, p in model.named_parameters() if not n.startswith("cls.predictions.decoder")}

    def loss_of(m):
        return m(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels, next_sentence_label=nsp).loss

    ours = run_ours("bert", (L, C, NH, I, V, POS), weights, batch, tmp)
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels, next_sentence_label=nsp)
    out.loss.backward()
    close_scalar("bert loss", ours["loss"].item(), out.loss.item())
    # MLM logits at the valid prediction slots, then NSP logits.
    ours_logits = ours["logits"].numpy()
    mlm = ours_logits[:B * P * V].reshape(B, P, V)
    for b in range(B):
        n = int((positions[b] != 0).sum())
        close_tensor(f"bert mlm logits sample {b}", mlm[b, :n], out.prediction_logits[b, positions[b, :n]].detach())
    close_tensor("bert nsp logits", ours_logits[B * P * V:].reshape(B, 2), out.seq_relationship_logits.detach())
    grads = {n: p.grad for n, p in model.named_parameters()}
    for name in weights:
        close_tensor(f"bert grad {name}", ours["grad." + name], grads[name])
    check("bert: every parameter has a gradient", len(weights) == sum(1 for k in ours if k.startswith("grad.")),
          f"{len(weights)} torch parameters, {sum(1 for k in ours if k.startswith('grad.'))} of ours")

    for optimizer in ("adamw", "lamb"):
        lr, wd, eps, max_norm = 2e-3, 0.01, 1e-6, 1.0
        ours = run_ours("bert", (L, C, NH, I, V, POS), weights, batch, tmp, steps=10, optimizer=optimizer, lr=lr,
                        weight_decay=wd, eps=eps, max_grad_norm=max_norm)
        theirs = train_torch(make(), lambda m: [(n, p) for n, p in m.named_parameters()
                                                 if not n.startswith("cls.predictions.decoder")],
                             loss_of, optimizer, 10, lr, wd, eps, max_norm)
        for t, (a, b) in enumerate(zip(ours["step_losses"].tolist(), theirs)):
            close_scalar(f"bert {optimizer} step {t + 1} loss", a, b)
        print(f"bert {optimizer}: ours {ours['step_losses'][0].item():.6f} → {ours['step_losses'][-1].item():.6f}, "
              f"torch {theirs[0]:.6f} → {theirs[-1]:.6f}")


def gpt(tmp):
    from transformers import GPT2Config, GPT2LMHeadModel
    L, C, NH, V, POS, B, T = 2, 32, 4, 101, 32, 3, 12
    cfg = GPT2Config(vocab_size=V, n_positions=POS, n_embd=C, n_layer=L, n_head=NH, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, layer_norm_epsilon=1e-5, activation_function="gelu_new",
                     attn_implementation="eager")

    def make():
        torch.manual_seed(3)
        m = GPT2LMHeadModel(cfg).float()
        with torch.no_grad():
            for n, p in m.named_parameters():
                if n.endswith("bias"):
                    p.normal_(0, 0.02)
        return m

    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")

    def ours_name_tensor(n, t):  # HF's Conv1D keeps [in, out]; nanoGPT's nn.Linear [out, in]
        return t.t().contiguous() if n.endswith(conv1d) else t

    model = make()
    g = torch.Generator().manual_seed(4)
    seq = torch.randint(0, V, (B, T + 1), generator=g)
    tokens, targets = seq[:, :-1], seq[:, 1:]
    weights = {n: ours_name_tensor(n, p.detach().clone()) for n, p in model.named_parameters() if n != "lm_head.weight"}

    def loss_of(m):
        logits = m(input_ids=tokens).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    ours = run_ours("gpt", (L, C, NH, 4 * C, V, POS), weights, {"tokens": tokens, "targets": targets}, tmp)
    model.zero_grad()
    logits = model(input_ids=tokens).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    loss.backward()
    close_scalar("gpt loss", ours["loss"].item(), loss.item())
    close_tensor("gpt logits", ours["logits"].numpy().reshape(B, T, V), logits.detach())
    for n, p in model.named_parameters():
        if n == "lm_head.weight":
            continue
        close_tensor(f"gpt grad {n}", ours["grad." + n], ours_name_tensor(n, p.grad))

    for optimizer in ("adamw", "lamb"):
        lr, wd, eps, max_norm = 3e-3, 0.1, 1e-8, 1.0
        ours = run_ours("gpt", (L, C, NH, 4 * C, V, POS), weights, {"tokens": tokens, "targets": targets}, tmp,
                        steps=10, optimizer=optimizer, lr=lr, weight_decay=wd, eps=eps, max_grad_norm=max_norm)
        theirs = train_torch(make(), lambda m: [(n, p) for n, p in m.named_parameters() if n != "lm_head.weight"],
                             loss_of, optimizer, 10, lr, wd, eps, max_norm)
        for t, (a, b) in enumerate(zip(ours["step_losses"].tolist(), theirs)):
            close_scalar(f"gpt {optimizer} step {t + 1} loss", a, b)
        print(f"gpt {optimizer}: ours {ours['step_losses'][0].item():.6f} → {ours['step_losses'][-1].item():.6f}, "
              f"torch {theirs[0]:.6f} → {theirs[-1]:.6f}")


with compat_util.tempdir() as tmp:
    bert(tmp)
    gpt(tmp)
if failures:
    sys.exit(f"{len(failures)} comparison(s) failed")
print("trainer matches PyTorch: BERT and GPT-2 losses, logits, every gradient, 10 AdamW and LAMB steps")
