"""Reference: HF apply_rotary_pos_emb (rotate_half convention) in float32, rounded once.

make_inputs builds the cos/sin tables exactly as LlamaRotaryEmbedding does for rope_type llama3.
"""

import math

import torch

ROPE_THETA = 500000.0
MAX_POSITIONS = 131072
# rope_scaling of Llama-3.1 (config.json)
FACTOR, LOW_FREQ_FACTOR, HIGH_FREQ_FACTOR, ORIGINAL_MAX_POSITIONS = 8.0, 1.0, 4.0, 8192


def llama3_inv_freq(head_dim: int, device: str) -> torch.Tensor:
    """Frequencies of HF's _compute_llama3_parameters, in float64."""
    inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = ORIGINAL_MAX_POSITIONS / LOW_FREQ_FACTOR
    high_freq_wavelen = ORIGINAL_MAX_POSITIONS / HIGH_FREQ_FACTOR
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / FACTOR, inv_freq)
    smooth = (ORIGINAL_MAX_POSITIONS / wavelen - LOW_FREQ_FACTOR) / (HIGH_FREQ_FACTOR - LOW_FREQ_FACTOR)
    smoothed = (1 - smooth) * scaled / FACTOR + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Positions anywhere in the 128k context (decode tokens of many sequences sit at different
    # depths); arange(T) would leave the low frequencies almost unrotated (cos ~ 1, sin ~ 0).
    positions = torch.randint(0, MAX_POSITIONS, (axes["T"],), generator=generator, device=device)
    freqs = positions.double()[:, None] * llama3_inv_freq(axes["D"], device)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return {"cos": emb.cos().to(torch.bfloat16), "sin": emb.sin().to(torch.bfloat16)}


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    half = xf.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    # Tables are [T, D]; broadcast over the head axis.
    return (xf * cos.float()[:, None, :] + rotated * sin.float()[:, None, :]).to(x.dtype)


def run(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
