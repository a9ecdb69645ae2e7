"""Our AdamW and LAMB (trainer/optimizer.h) against PyTorch's, step by step, on fixed tensors.

tests/compat/optimizer_dump runs our optimizer over a tiny BERT's parameters (every shape BERT has:
embeddings, square and rectangular matrices, biases and LayerNorms, the last two exempt from
weight decay) on weights and per-step gradients drawn here, and writes the weights and moments
after each step. The same steps in torch: torch.optim.AdamW after clip_grad_norm_, and apex
FusedLAMB's algorithm (torch_optimizers.py). LAMB's trust ratio meets a tensor of zero weights
(ratio 1) on the way. Checked after each of 3 steps, without clipping and with a bound below the
gradients' norm, relative to each tensor's largest magnitude:
  * weights and first moments within 1e-6;
  * second moments within 2e-5: our kernels form 1 − β2 in float (1 − float(0.999) =
    0.00099998713), torch in double (0.001), 1.3e-5 apart, while our bias correction 1 − β2ᵗ is
    the double one, so our Adam direction m̂ / √v̂ is 6.4e-6 longer than torch's. On weights of
    magnitude 0.5 that is 1e-7 of them; the tensor that starts at zero is nothing but updates,
    and is held to 1e-5;
  * the global gradient norm within 1e-6 relative.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import compat_util  # noqa: E402

compat_util.require_venv_modules("torch", "safetensors")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
import torch_optimizers  # noqa: E402

torch.set_num_threads(2)
STEPS, LR, WD, EPS = 3, 1e-2, 0.1, 1e-6  # decay large enough that applying it to an exempt tensor shows
ZERO_WEIGHTS = "bert.pooler.dense.weight"
failures = []
worst = {}


def close(what, kind, ours, theirs, tol):
    ours, theirs = ours.double(), theirs.detach().double()
    if ours.shape != theirs.shape:
        failures.append(f"{what}: shape {tuple(ours.shape)} vs {tuple(theirs.shape)}")
        return
    scale = max(theirs.abs().max().item(), 1e-30)
    err = (ours - theirs).abs().max().item() / scale
    worst[kind] = max(worst.get(kind, 0.0), err)
    if not err <= tol:
        failures.append(f"{what}: error {err:.2e} of the largest magnitude {scale:.3e}")
        print(f"FAIL {what}: error {err:.2e} of the largest magnitude {scale:.3e}")


def fixed_tensors(shapes):
    """Weights N(0, 0.5²) (biases and LayerNorms too, so decay on them would show), one decayed
    tensor all zero; gradients N(0, 0.1²), different each step."""
    g = torch.Generator().manual_seed(5)
    weights = {n: torch.randn(s, generator=g) * 0.5 for n, s in shapes.items()}
    weights[ZERO_WEIGHTS].zero_()
    grads = [{n: torch.randn(s, generator=g) * 0.1 for n, s in shapes.items()} for _ in range(STEPS)]
    return weights, grads


def ours(optimizer, weights, grads, max_norm, tmp):
    wpath, gpath, out = (os.path.join(tmp, f) for f in ("w.safetensors", "g.safetensors", "out.safetensors"))
    save_file(weights, wpath)
    save_file({f"grad{t + 1}.{n}": g for t, step in enumerate(grads) for n, g in step.items()}, gpath)
    compat_util.run(compat_util.tool("optimizer_dump"), "--weights", wpath, "--grads", gpath, "--out", out,
                    "--steps", STEPS, "--optimizer", optimizer, "--lr", LR, "--weight-decay", WD, "--eps", EPS,
                    "--max-grad-norm", max_norm)
    return load_file(out)


def compare(optimizer, weights, grads, max_norm, tmp):
    got = ours(optimizer, weights, grads, max_norm, tmp)
    named = {n: torch.nn.Parameter(w.clone()) for n, w in weights.items()}
    adamw = torch_optimizers.adamw(named, LR, WD, EPS)
    lamb = torch_optimizers.lamb_state(named)
    case = f"{optimizer}, max grad norm {max_norm}"
    for t in range(1, STEPS + 1):
        for n, p in named.items():
            p.grad = grads[t - 1][n].clone()
        if optimizer == "adamw":
            norm = torch.nn.utils.clip_grad_norm_(list(named.values()), max_norm).item() if max_norm > 0 else \
                torch.sqrt(sum((p.grad.double() ** 2).sum() for p in named.values())).item()
            adamw.step()
            moments = {n: (adamw.state[p]["exp_avg"], adamw.state[p]["exp_avg_sq"]) for n, p in named.items()}
        else:
            norm = torch_optimizers.lamb_step(named, {n: p.grad for n, p in named.items()}, lamb, t, LR, 0.9, 0.999,
                                              EPS, WD, max_norm)
            moments = lamb
        ours_norm = got[f"step{t}.grad_norm"].item()
        if abs(ours_norm - norm) > 1e-6 * norm:
            failures.append(f"{case}, step {t}: gradient norm {ours_norm} vs torch {norm}")
        if max_norm > 0 and not got[f"step{t}.clip"].item() < 1:
            failures.append(f"{case}, step {t}: the bound {max_norm} below the norm {norm} did not clip")
        for n, p in named.items():
            if n == ZERO_WEIGHTS:
                close(f"{case}, step {t}: {n}", "weights from zero", got[f"step{t}.{n}"], p, 1e-5)
            else:
                close(f"{case}, step {t}: {n}", "weights", got[f"step{t}.{n}"], p, 1e-6)
            close(f"{case}, step {t}: exp_avg.{n}", "exp_avg", got[f"step{t}.exp_avg.{n}"], moments[n][0], 1e-6)
            close(f"{case}, step {t}: exp_avg_sq.{n}", "exp_avg_sq", got[f"step{t}.exp_avg_sq.{n}"], moments[n][1],
                  2e-5)
    return named


with compat_util.tempdir() as tmp:
    compat_util.run(compat_util.tool("optimizer_dump"), "--out", os.path.join(tmp, "params.safetensors"))
    shapes = {n: t.shape for n, t in load_file(os.path.join(tmp, "params.safetensors")).items()}
    exempt = [n for n in shapes if torch_optimizers.no_decay(n)]
    if not exempt or len(exempt) == len(shapes) or ZERO_WEIGHTS not in shapes or ZERO_WEIGHTS in exempt:
        sys.exit(f"optimizer_dump's parameters lack what this test needs: {sorted(shapes)}")
    weights, grads = fixed_tensors(shapes)
    for optimizer in ("adamw", "lamb"):
        for max_norm in (0.0, 1.0):  # the gradients' norm is about 3 (991 × 0.1²): 1.0 clips
            final = compare(optimizer, weights, grads, max_norm, tmp)
            if not final[ZERO_WEIGHTS].abs().max() > 0:
                failures.append(f"{optimizer}: the zero-weight tensor did not move")
if failures:
    sys.exit(f"{len(failures)} comparison(s) failed")
print(f"{len(shapes)} tensors ({len(exempt)} exempt from decay), AdamW and LAMB, {STEPS} steps, with and without "
      f"clipping, match PyTorch; largest errors: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
