"""Reference: dequantize the MXFP4 weights exactly in float32 (code value * 2^(scale - 127)), matmul per expert group
in float32, round once."""

import torch

# FP4 e2m1 code -> value (sign bit 3), as the OCP MX spec and gpt-oss's dequantization define it
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
SCALE_BIAS = 127


def dequantize(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[..., N, H/2] uint8 codes and [..., N, H/32] e8m0 scales -> [..., N, H] float32."""
    table = torch.tensor(FP4_VALUES, dtype=torch.float32, device=blocks.device)
    codes = torch.stack([blocks & 0x0F, blocks >> 4], dim=-1).flatten(-2).long()  # low nibble first
    values = table[codes]
    exp = torch.pow(2.0, scales.float() - SCALE_BIAS).repeat_interleave(32, dim=-1)
    return values * exp


def run(x_sorted, group_sizes, w_blocks, w_scales):
    out = torch.empty(x_sorted.shape[0], w_blocks.shape[1], dtype=x_sorted.dtype, device=x_sorted.device)
    start = 0
    for e, n in enumerate(group_sizes.tolist()):
        if n:
            w = dequantize(w_blocks[e], w_scales[e])
            out[start:start + n] = (x_sorted[start:start + n].float() @ w.t()).to(out.dtype)
            start += n
    return out


def make_inputs(axes, generator, device):
    """Routing of T tokens to K distinct experts from random logits; random FP4 codes with scales 2^-7..2^-5 (weights
    of std ~0.02 ~ H^-0.5, as trained experts)."""
    t, e, k, n, h = axes["T"], axes["E"], axes["K"], axes["N"], axes["H"]
    ids = torch.randn(t, e, generator=generator, device=device).topk(k, dim=-1).indices
    sizes = torch.bincount(ids.flatten(), minlength=e).to(torch.int32)
    # drawn as uint8 directly: the weights are 265 MB at the real shape (an int32 draw was 4x that, and slow)
    blocks = torch.randint(0, 256, (e, n, h // 2), generator=generator, device=device, dtype=torch.uint8)
    scales = torch.randint(SCALE_BIAS - 7, SCALE_BIAS - 4, (e, n, h // 32), generator=generator, device=device,
                           dtype=torch.uint8)
    return {"group_sizes": sizes, "w_blocks": blocks, "w_scales": scales}


def cost(axes, inputs):
    m, n, h = axes["M"], axes["N"], axes["H"]
    touched = int((inputs["group_sizes"] > 0).sum())
    return {"flops": 2 * m * n * h,
            "bytes": m * h * 2 + touched * n * (h // 2 + h // 32) + axes["E"] * 4 + m * n * 2}
