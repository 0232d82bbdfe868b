"""Reference: FLUX EmbedND rope table (float64 angles) and apply_rope (float32), as in flux/math.py."""

import torch

AXES_DIM = (16, 56, 56)
THETA = 10000.0


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # FLUX.1-dev ids: text tokens all zeros; image token (0, row, col) on the G x G patch grid.
    g = axes["G"]
    rows = torch.arange(g, device=device, dtype=torch.int32).repeat_interleave(g)
    cols = torch.arange(g, device=device, dtype=torch.int32).repeat(g)
    img = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1)
    txt = torch.zeros(axes["L_txt"], 3, dtype=torch.int32, device=device)
    return {"ids": torch.cat([txt, img], dim=0)}


def rope_angles(ids: torch.Tensor) -> torch.Tensor:
    """[S, D/2] rotation angle of each (token, pair), axis 0's pairs first (EmbedND's cat order)."""
    parts = []
    for axis, dim in enumerate(AXES_DIM):
        scale = torch.arange(0, dim, 2, dtype=torch.float64, device=ids.device) / dim
        omega = 1.0 / THETA**scale
        parts.append(ids[:, axis].to(torch.float64)[:, None] * omega[None, :])
    return torch.cat(parts, dim=-1)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    out = torch.stack([cos * x0 - sin * x1, sin * x0 + cos * x1], dim=-1)
    return out.reshape(x.shape).to(x.dtype)


def run(q: torch.Tensor, k: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angles = rope_angles(ids)
    cos, sin = angles.cos().float(), angles.sin().float()
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
