"""The optimizers we are compared against, in torch: torch.optim.AdamW with biases and LayerNorms
exempt from weight decay (the rule of HF's and NVIDIA's BERT scripts, and of ParamInfo::decay),
and apex FusedLAMB's algorithm, which has no torch release of its own. Shared by
test_trainer_torch.py (whole-model training steps) and test_optimizer_torch.py (single steps)."""
import torch


def no_decay(name):
    return name.endswith("bias") or "LayerNorm" in name or ".ln_" in name


def adamw(named, lr, wd, eps, betas=(0.9, 0.999)):
    """torch.optim.AdamW over the parameters of `named` ({name: parameter}), two groups: with
    weight decay `wd`, and without (no_decay)."""
    groups = [{"params": [p for n, p in named.items() if not no_decay(n)], "weight_decay": wd},
              {"params": [p for n, p in named.items() if no_decay(n)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def lamb_state(named):
    """LAMB's moments, zero: {name: (exp_avg, exp_avg_sq)}."""
    return {n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in named.items()}


def lamb_step(params, grads, state, t, lr, b1, b2, eps, wd, max_norm):
    """apex FusedLAMB (bias correction, grad averaging, adam_w mode, use_nvlamb off): gradients
    divided by norm / max_norm when the global norm exceeds max_norm (0: never); the trust ratio
    ‖p‖ / ‖u‖ only on tensors that decay, 1 when either norm is 0. Returns the global norm."""
    gnorm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values())).item()
    clip = max_norm / gnorm if max_norm > 0 and gnorm > max_norm else 1.0
    with torch.no_grad():
        for name, p in params.items():
            g = grads[name] * clip
            m, v = state[name]
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            decay = 0.0 if no_decay(name) else wd
            u = (m / (1 - b1 ** t)) / (torch.sqrt(v / (1 - b2 ** t)) + eps) + decay * p
            ratio = 1.0
            if decay != 0:
                wn, un = p.norm().item(), u.norm().item()
                if wn > 0 and un > 0:
                    ratio = wn / un
            p.sub_(lr * ratio * u)
    return gnorm
