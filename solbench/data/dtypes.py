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
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
DTYPES = tuple(ITEMSIZE)
# Keys a spec file's peak_flops may have: the dtypes that have an arithmetic rate, plus tf32.
PEAK_KEYS = ("float64", "float32", "tf32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8")


def torch_dtype(name: str) -> Any:
    """The torch.dtype for a dtype name (imports torch)."""
    import torch

    return getattr(torch, name)
