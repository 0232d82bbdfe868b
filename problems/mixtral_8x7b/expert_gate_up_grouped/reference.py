"""Reference: per-expert gate and up GEMMs over contiguous row groups, SwiGLU, all in float32."""

import torch
import torch.nn.functional as F


def run(x_sorted: torch.Tensor, group_sizes: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x_sorted.shape[0], w1.shape[1], dtype=x_sorted.dtype, device=x_sorted.device)
    start = 0
    for e, n in enumerate(group_sizes.tolist()):
        rows = x_sorted[start:start + n].float()
        out[start:start + n] = (F.silu(rows @ w1[e].float().t()) * (rows @ w3[e].float().t())).to(out.dtype)
        start += n
    return out


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """Group sizes from a realistic routing (random logits, top-K distinct experts per token);
    weights of std 1/sqrt(H) so the gate and up outputs are ~N(0, 1)."""
    t, h, f, e, k = axes["T"], axes["H"], axes["F"], axes["E"], axes["K"]
    ids = torch.randn(t, e, generator=generator, device=device).topk(k, dim=-1).indices
    sizes = torch.bincount(ids.flatten(), minlength=e).to(torch.int32)
    w1 = torch.randn(e, f, h, generator=generator, device=device) * h**-0.5
    w3 = torch.randn(e, f, h, generator=generator, device=device) * h**-0.5
    return {"group_sizes": sizes, "w1": w1.to(torch.bfloat16), "w3": w3.to(torch.bfloat16)}
