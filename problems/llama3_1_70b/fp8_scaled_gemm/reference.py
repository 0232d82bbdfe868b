"""Reference: dequantize exactly in float32 (fp8 * per-tensor scale), matmul in float32, round once."""

import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def run(a: torch.Tensor, scale_a: torch.Tensor, b: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return ((a.float() * scale_a) @ (b.float() * scale_b).t()).to(torch.bfloat16)


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = x.abs().amax().reshape(1) / FP8_MAX
    return (x / scale).to(torch.float8_e4m3fn), scale


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """Per-tensor amax quantization of activations ~N(0, 1) and a weight ~N(0, 1/H)."""
    h = axes["H"]
    a, scale_a = _quantize(torch.randn(axes["T"], h, generator=generator, device=device))
    b, scale_b = _quantize(torch.randn(axes["N"], h, generator=generator, device=device) * h**-0.5)
    return {"a": a, "scale_a": scale_a, "b": b, "scale_b": scale_b}
