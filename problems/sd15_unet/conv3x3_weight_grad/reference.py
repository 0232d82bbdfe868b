"""Reference: conv weight gradient as explicit im2col GEMMs in float32, one sample at a time.

grad_weight[co, ci*9 + kh*3 + kw] = sum_{n, pixel} grad_out[n, co, pixel] * patches[n, ci*9 + kh*3 + kw, pixel]
(independent of cuDNN's wgrad; cuBLAS float32 GEMMs do not use TF32 unless asked to).
"""

import math

import torch
import torch.nn.functional as F


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Gradients of a batch-mean loss: std 1/sqrt(N*H*W) keeps |dW| near 1 at every size.
    shape = (axes["N"], axes["CO"], axes["H"], axes["W"])
    std = 1.0 / math.sqrt(axes["N"] * axes["H"] * axes["W"])
    return {"grad_out": (torch.randn(shape, generator=generator, device=device) * std).to(torch.bfloat16)}


def run(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    n, ci = x.shape[:2]
    co = grad_out.shape[1]
    acc = torch.zeros(co, ci * 9, dtype=torch.float32, device=x.device)
    for i in range(n):
        patches = F.unfold(x[i : i + 1].float(), kernel_size=3, padding=1)[0]  # [CI*9, H*W]
        acc += grad_out[i].float().reshape(co, -1) @ patches.t()
    return acc.reshape(co, ci, 3, 3).to(x.dtype)
