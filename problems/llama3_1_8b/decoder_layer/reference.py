"""Reference: the decoder-layer problems' own references chained, so this layer is exactly their sum.

Each op's reference (loaded from its sibling folder) computes in float32 and rounds its output once
to bfloat16, as its problem does; the K/V rows written to the caches are the roped keys and the values.
"""

import importlib.util
from pathlib import Path

import torch

FAMILY = Path(__file__).resolve().parents[1]
# Query rows of w_qkv are scaled by this (as the attention problems scale q): trained models attend
# sharply; a near-flat softmax would average the cache to ~0 and hide a wrong attention under atol.
QUERY_SCALE = 3.0


def _op(name: str):
    spec = importlib.util.spec_from_file_location(f"_decoder_layer_ref_{name}", FAMILY / name / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RMSNORM, _QKV, _ROPE = _op("rmsnorm"), _op("qkv_proj"), _op("rope")
_DECODE, _PREFILL = _op("attention_decode"), _op("attention_prefill")
_O_PROJ, _GATE_UP, _DOWN = _op("attn_o_proj_residual"), _op("gate_up_swiglu"), _op("mlp_down_proj_residual")


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    h, f, hq, d = axes["H"], axes["F"], axes["HQ"], axes["D"]

    def weight(rows: int, cols: int) -> torch.Tensor:  # the scale of a trained layer (std cols^-0.5)
        return torch.randn(rows, cols, generator=generator, device=device) * cols**-0.5

    w_qkv = weight(axes["N"], h)
    w_qkv[: hq * d] *= QUERY_SCALE
    # S consecutive positions from a random start: the tables depend on where the tokens sit.
    start = torch.randint(0, _ROPE.MAX_POSITIONS - axes["S"] + 1, (1,), generator=generator, device=device)
    positions = start + torch.arange(axes["S"], device=device)
    freqs = positions.double()[:, None] * _ROPE.llama3_inv_freq(d, device)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    bf16 = torch.bfloat16
    return {"w_qkv": w_qkv.to(bf16), "w_o": weight(h, hq * d).to(bf16), "w_gate_up": weight(2 * f, h).to(bf16),
            "w_down": weight(h, f).to(bf16), "cos": emb.cos().to(bf16), "sin": emb.sin().to(bf16)}


def _attention(q, k, v, k_cache, v_cache):
    """Write the new K/V rows to the caches' last S slots, then attend: decode over every slot, prefill causally."""
    b, s, _, _ = q.shape
    length = k_cache.shape[1]
    k_cache[:, length - s:] = k
    v_cache[:, length - s:] = v
    if s == 1:
        return _DECODE.run(q[:, 0], k_cache, v_cache)[:, None]
    if s == length:
        return _PREFILL.run(q, k_cache, v_cache)
    raise ValueError(f"decoder_layer: S={s}, L={length}: workloads are decode (S=1) or prefill (S=L)")


def run(x, ln1_weight, w_qkv, w_o, ln2_weight, w_gate_up, w_down, cos, sin, k_cache, v_cache, eps):
    b, s, h = x.shape
    hkv, d = k_cache.shape[2], k_cache.shape[3]
    hq = w_o.shape[1] // d
    rows = x.reshape(b * s, h)
    qkv = _QKV.run(_RMSNORM.run(rows, ln1_weight, eps), w_qkv)
    q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
    q, k = _ROPE.run(q.reshape(b * s, hq, d), k.reshape(b * s, hkv, d), cos.repeat(b, 1), sin.repeat(b, 1))
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    attn = _attention(q.reshape(b, s, hq, d), k.reshape(b, s, hkv, d), v.reshape(b, s, hkv, d), k_cache, v_cache)
    hidden = _O_PROJ.run(attn.reshape(b * s, hq * d), w_o, rows)
    out = _DOWN.run(_GATE_UP.run(_RMSNORM.run(hidden, ln2_weight, eps), w_gate_up), w_down, hidden)
    return out.reshape(b, s, h), k_cache, v_cache
