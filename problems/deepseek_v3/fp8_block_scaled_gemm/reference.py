"""Reference: dequantize both operands exactly in float32 (fp8 * block scale), matmul in float32."""

import torch

BLOCK = 128
FP8_MAX = 448.0  # largest finite float8_e4m3fn


def run(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    a_deq = a.float() * a_scale.repeat_interleave(BLOCK, dim=1)
    b_deq = b.float() * b_scale.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
    return (a_deq @ b_deq.t()).to(torch.bfloat16)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """Quantize real-valued operands the way DeepSeek-V3 does: scale = amax / 448 per 1x128 group
    (activations ~N(0, 1)) and per 128x128 block (weights ~N(0, 1/K)), so codes use the fp8 range."""
    t, n, k = axes["T"], axes["N"], axes["K"]
    act = torch.randn(t, k // BLOCK, BLOCK, generator=generator, device=device)
    a_scale = act.abs().amax(dim=-1).clamp(min=1e-12) / FP8_MAX
    a = (act / a_scale[..., None]).reshape(t, k).to(torch.float8_e4m3fn)
    w = torch.randn(n // BLOCK, BLOCK, k // BLOCK, BLOCK, generator=generator, device=device) * k**-0.5
    b_scale = w.abs().amax(dim=(1, 3)).clamp(min=1e-12) / FP8_MAX
    b = (w / b_scale[:, None, :, None]).reshape(n, k).to(torch.float8_e4m3fn)
    return {"a": a, "a_scale": a_scale, "b": b, "b_scale": b_scale}
