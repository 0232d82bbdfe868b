"""torch.compile of SDPA forward + backward (AOTAutograd traces the joint graph), compiled on the first call."""

import torch
import torch.nn.functional as F

_compiled = None


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor,
        lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_attention, dynamic=False)
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        o = _compiled(q, k, v)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), grad_out)
    return dq, dk, dv
