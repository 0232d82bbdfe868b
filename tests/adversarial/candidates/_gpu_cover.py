"""Shared by the GPU timing exploits: a spin kernel of a chosen length, calibrated once with events
(how the issue's candidates sized their cover just over the physics floor)."""

import torch

_hz: list[float] = []


def spin_s(seconds: float) -> None:
    """Keep the current stream busy for about ``seconds`` (torch's spin kernel)."""
    if not _hz:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(1_000_000)
        e.record()
        e.synchronize()
        _hz.append(1_000_000 / (s.elapsed_time(e) * 1e-3))
    torch.cuda._sleep(max(1, int(seconds * _hz[0])))


def seed_floor_cover_s(attn: torch.Tensor) -> float:
    """0.95 x T_ideal of the seed problem on an H200 datasheet (989 TFLOP/s bf16): a time the
    physics floor admits, well below the honest GEMM."""
    t, h = attn.shape
    return 2 * t * h * h / 989e12 / 0.95
