"""Straightforward PyTorch: autograd through SDPA (its backward recomputes the forward statistics)."""

import torch
import torch.nn.functional as F


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor,
        lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        o = F.scaled_dot_product_attention(q, k, v)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), grad_out)
    return dq, dk, dv
