"""Reference: GEMM + bias + GELU(tanh) in float32, rounded once to bfloat16."""

import math

import torch
import torch.nn.functional as F


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Trained-scale weights (std 1/sqrt(K)) keep pre-activations near unit scale, where GELU-tanh
    # is curved; with unit-normal weights it would act like a ReLU on huge values.
    w = torch.randn(axes["N"], axes["K"], generator=generator, device=device) / math.sqrt(axes["K"])
    return {"weight": w.to(torch.bfloat16)}


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    pre = x.float() @ weight.float().t() + bias.float()
    return F.gelu(pre, approximate="tanh").to(x.dtype)
