"""Straightforward PyTorch: F.layer_norm without affine and the modulation, in float32, rounded once.

Diffusers runs both in bf16; rounding the normalised values before the multiply-add loses up to
0.1 where shift cancels scale * x, beyond the tolerance a fused kernel meets.
"""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    normed = F.layer_norm(x.float(), (x.shape[-1],), eps=eps)
    return (normed * (1 + scale.float()[:, None, :]) + shift.float()[:, None, :]).to(x.dtype)
