"""torch.compile of dequantize-to-bfloat16 + linear (Inductor fuses the dequantization), compiled on the first call."""

import torch
import torch.nn.functional as F

BLOCK = 128
_compiled = None


def _dequant_linear(a, a_scale, b, b_scale):
    t, k = a.shape
    n = b.shape[0]
    a_bf16 = (a.float().view(t, k // BLOCK, BLOCK) * a_scale[..., None]).view(t, k).to(torch.bfloat16)
    b_blocks = b.float().view(n // BLOCK, BLOCK, k // BLOCK, BLOCK) * b_scale[:, None, :, None]
    return F.linear(a_bf16, b_blocks.view(n, k).to(torch.bfloat16))


def run(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_dequant_linear, dynamic=False)
    return _compiled(a, a_scale, b, b_scale)
