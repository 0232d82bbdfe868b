"""The dtypes a problem may use, their sizes, and (lazily) their torch equivalents."""

from __future__ import annotations

from typing import Any

ITEMSIZE: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    # OCP microscaling: two e2m1 values packed in one byte (the element is the pair), and the
    # power-of-two block scale. torch stores and moves them; it has almost no arithmetic on them.
    "float4_e2m1fn_x2": 1,
    "float8_e8m0fnu": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
DTYPES = tuple(ITEMSIZE)
PACKED_FP4 = "float4_e2m1fn_x2"
# The 16 values of an e2m1 nibble (sign bit 3, exponent bits 2-1, mantissa bit 0).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# Keys a spec file's peak_flops may have: the dtypes that have an arithmetic rate, plus tf32.
PEAK_KEYS = ("float64", "float32", "tf32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8")


def torch_dtype(name: str) -> Any:
    """The torch.dtype for a dtype name (imports torch)."""
    import torch

    return getattr(torch, name)


def unpack_fp4(t: Any) -> Any:
    """A ``float4_e2m1fn_x2`` tensor ``[..., n]`` as float32 ``[..., 2n]`` (the element at the low nibble first).

    torch cannot convert or compare fp4 itself, so checks and references go through this.
    """
    import torch

    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=t.device)
    raw = t.view(torch.uint8).to(torch.int64)
    pairs = torch.stack((raw & 0xF, raw >> 4), dim=-1)
    return table[pairs].reshape(*t.shape[:-1], 2 * t.shape[-1]) if t.dim() else table[pairs]
