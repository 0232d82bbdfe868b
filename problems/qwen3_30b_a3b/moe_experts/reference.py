"""Reference: routed SwiGLU experts with the weighted combine and residual, all in float32, rounded once."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, residual: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
        topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    out = residual.float()
    inter = w2.shape[2]
    for e in topk_ids.unique().tolist():
        tok, slot = (topk_ids == e).nonzero(as_tuple=True)
        gate_up = xf[tok] @ w13[e].float().t()
        act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        y = act @ w2[e].float().t()
        out.index_add_(0, tok, y * topk_weights[tok, slot].unsqueeze(1))
    return out.to(x.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """Weights of std 1/sqrt(fan_in) (activations stay O(1)); routing as the router makes it: random
    logits, softmax, top-K distinct experts (uniform over experts), renormalised weights."""
    t, h, f, e, k = axes["T"], axes["H"], axes["F"], axes["E"], axes["K"]
    w13 = torch.randn(e, 2 * f, h, generator=generator, device=device) * h**-0.5
    w2 = torch.randn(e, h, f, generator=generator, device=device) * f**-0.5
    logits = torch.randn(t, e, generator=generator, device=device)
    weights, ids = logits.softmax(dim=-1).topk(k, dim=-1)
    return {
        "w13": w13.to(torch.bfloat16),
        "w2": w2.to(torch.bfloat16),
        "topk_weights": weights / weights.sum(dim=-1, keepdim=True),
        "topk_ids": ids.to(torch.int32),
    }
