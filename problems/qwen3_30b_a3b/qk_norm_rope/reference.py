"""Reference: Qwen3 q_norm/k_norm (RMSNorm over head_dim) then rotate-half RoPE, all in float32."""

import torch

ROPE_THETA = 1_000_000.0
MAX_POSITION = 40960


def _norm_rope(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    xf = xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps) * weight.float()
    half = xf.shape[-1] // 2
    x1, x2 = xf[..., :half], xf[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]  # broadcast over heads
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def run(q: torch.Tensor, k: torch.Tensor, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
        cos: torch.Tensor, sin: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return _norm_rope(q, q_norm_weight, cos, sin, eps), _norm_rope(k, k_norm_weight, cos, sin, eps)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """cos/sin tables at random positions in [0, max_position_embeddings)."""
    d = axes["D"]
    pos = torch.randint(0, MAX_POSITION, (axes["T"],), generator=generator, device=device)
    inv_freq = ROPE_THETA ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
    angles = pos.double()[:, None] * inv_freq[None, :]
    return {"cos": angles.cos().float(), "sin": angles.sin().float()}
