"""Straightforward PyTorch: the residual add and F.layer_norm in float32, rounded once.

transformers adds in bf16 first; that rounding (ulp 0.06 at |h| ~ 10) reaches the output on rare
elements beyond the tolerance a fused add + LayerNorm kernel meets.
"""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float() + residual.float()
    return F.layer_norm(h, (x.shape[-1],), weight.float(), bias.float(), eps).to(x.dtype)
