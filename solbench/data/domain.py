"""Value domains: what values and layouts real models give each input, which the edge rounds test.

An input's ``domain`` (in ``problem.yaml``) says its typical scale and offset, the largest magnitudes
and offsets real models produce for it (with the source of those figures), whether zeros, tiny
values, infinities or NaNs are legal, and which non-contiguous layouts are legal. Everything is
optional: :func:`effective_domain` fills what is left out from the dtype (see ``DEFAULTS`` in the
README). The edge rounds (:mod:`solbench.engine.edge`) draw their inputs from the effective domains.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["value", "index", "fixed"]
Special = Literal["inf", "-inf", "nan"]
Layout = Literal["permuted", "strided", "broadcast"]

# Largest finite value and smallest normal of each float dtype the edge rounds may scale.
FORMAT_MAX = {"float64": 1.797e308, "float32": 3.4028e38, "bfloat16": 3.3895e38, "float16": 65504.0,
              "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
FORMAT_MIN_NORMAL = {"float64": 2.2251e-308, "float32": 1.1755e-38, "bfloat16": 1.1755e-38, "float16": 6.1035e-5,
                     "float8_e4m3fn": 0.015625, "float8_e5m2": 6.1035e-5}
_STRIDE_PAD = 3  # extra elements per row in a strided layout (NaN: a kernel that reads them shows it)
# Packed or exponent-only formats: their bytes are structure, never scaled.
_OPAQUE = ("float4_e2m1fn_x2", "float8_e8m0fnu")

DEFAULT_MAX_ABS = {"float64": 1.0e4, "float32": 1.0e4, "bfloat16": 1.0e4, "float16": 1.0e3,
                   "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
"""The 'large' round's magnitude when a value input declares none: for 32- and 16-bit floats the
scale of the largest hidden-state activations of LLMs (Sun et al. 2024, "Massive Activations in Large
Language Models", arXiv 2402.17762: up to ~2.6e3 in LLaMA2-7B, larger in bigger models), kept within
float16's range for float16; for FP8 the format's largest finite value (OCP 8-bit floating point
spec: e4m3fn 448, e5m2 57344)."""

DEFAULT_TINY = {"float64": 1.0e-30, "float32": 1.0e-15, "bfloat16": 1.0e-15, "float16": 1.0e-3,
                "float8_e4m3fn": 0.0625, "float8_e5m2": 1.0e-3}
"""The 'tiny' round's magnitude when a value input declares none: small enough that squares and
products of two such values leave the dtype's normal range if a kernel computes them in it (float16
squares of 1e-3 are subnormal), large enough that the values themselves stay normal."""


class Domain(BaseModel):
    """The values and layouts an input takes in real models (all optional; see ``effective_domain``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role | None = Field(
        default=None,
        description="value: float data the edge rounds transform (default for float tensors); index: ids, "
                    "offsets, masks, routing (default for integer and bool tensors); fixed: never changed by the "
                    "edge rounds (tables, scales or statistics that must stay consistent with other inputs; say "
                    "why in `source` or the problem's notes)")
    scale: float | None = Field(default=None, gt=0,
                                description="typical standard deviation of the values (what the typical rounds draw)")
    offset: float = Field(default=0.0, description="typical mean of the values")
    max_abs: float | None = Field(
        default=None, gt=0,
        description="the largest magnitude real models produce for this input: the 'large' round scales the "
                    "input so its largest |value| is this (default per dtype: 1e4, float16 1e3, FP8 the format's "
                    "maximum); cite the figure in `source`")
    max_offset: float | None = Field(
        default=None,
        description="the largest offset (shift of every value) real models produce: the 'offset' rounds add it, "
                    "and its negation, to the input (default: none, no offset round); the sign matters where "
                    "several inputs combine, e.g. q shifted by -c and k by +c make every attention logit very "
                    "negative")
    tiny: float | bool | None = Field(
        default=None,
        description="the 'tiny' round's magnitude: the input scaled so its largest |value| is this (default per "
                    "dtype: 1e-15 for float32/bfloat16, 1e-3 for float16); false: tiny values are not legal")
    zeros: bool = Field(default=True, description="whether zeros are legal: the 'zeros' round zeroes every other "
                                                  "slice along the input's first dimension larger than 1")
    specials: list[Special] = Field(
        default_factory=list,
        description="non-finite values real models put in this input (e.g. -inf in masked logits): the "
                    "'specials' round places each at a few random spots, and the output must be non-finite "
                    "exactly where the reference's is")
    layouts: list[Layout] = Field(
        default_factory=list,
        description="non-contiguous layouts real callers pass (default: contiguous only): permuted (the last two "
                    "dims swapped in memory, 2-D and up), strided (rows padded: the last dim's stride is larger "
                    "than its size), broadcast (the first dim expanded from size 1 with stride 0)")
    source: str = Field(default="", description="where the figures come from (paper, model card, measurement)")


def _is_scalable(dtype: str) -> bool:
    return dtype in FORMAT_MAX and dtype not in _OPAQUE


def default_role(dtype: str, is_scalar: bool) -> Role:
    if is_scalar:
        return "fixed"
    return "value" if _is_scalable(dtype) else ("fixed" if dtype in _OPAQUE else "index")


def effective_domain(declared: Domain | None, dtype: str, is_scalar: bool = False) -> Domain:
    """The declared domain with the dtype's defaults filled in (``role``, ``max_abs``, ``tiny``)."""
    d = declared or Domain()
    role = d.role or default_role(dtype, is_scalar)
    if role != "value":
        return d.model_copy(update={"role": role})
    tiny = DEFAULT_TINY[dtype] if d.tiny is None or d.tiny is True else d.tiny
    return d.model_copy(update={"role": role, "max_abs": d.max_abs or DEFAULT_MAX_ABS[dtype], "tiny": tiny})


def domain_errors(where: str, d: Domain, dtype: str, rank: int | None) -> list[str]:
    """Why a declared domain does not fit its input (``rank``: the shape's length, None for a scalar)."""
    if d.role == "value" and (rank is None or not _is_scalable(dtype)):
        what = "a scalar" if rank is None else f"dtype {dtype}"
        return [f"{where}.role: 'value' needs a float tensor, this input is {what} (use index or fixed)"]
    if (d.role or default_role(dtype, rank is None)) != "value":
        return _non_value_errors(where, d)
    return _range_errors(where, d, dtype) + _layout_errors(where, d.layouts, rank or 0)


def _non_value_errors(where: str, d: Domain) -> list[str]:
    """An index or fixed input is never transformed: value-only fields on it mean nothing."""
    given = [k for k in ("max_abs", "max_offset", "tiny", "specials", "layouts")
             if getattr(d, k) not in (None, [], False)]
    return [f"{where}.{k}: only a 'value' input is transformed by the edge rounds; remove it or set role: value"
            for k in given]


def _range_errors(where: str, d: Domain, dtype: str) -> list[str]:
    errs, top, low = [], FORMAT_MAX[dtype], FORMAT_MIN_NORMAL[dtype]
    for key in ("max_abs", "max_offset", "offset", "scale"):
        v = getattr(d, key)
        if v is not None and (not math.isfinite(v) or abs(v) > top):
            errs.append(f"{where}.{key}: {v:g} is beyond {dtype}'s largest finite value ({top:g})")
    if d.max_offset == 0:
        errs.append(f"{where}.max_offset: 0 gives no offset round; leave it out")
    if isinstance(d.tiny, float | int) and not isinstance(d.tiny, bool):
        if not low <= d.tiny < (d.max_abs or top):
            errs.append(f"{where}.tiny: {d.tiny:g} must be a normal {dtype} value ({low:g} or more) below max_abs")
    if d.scale is not None and d.max_abs is not None and d.max_abs < d.scale:
        errs.append(f"{where}.max_abs: {d.max_abs:g} is below the typical scale {d.scale:g}")
    if (d.max_abs is not None or d.max_offset is not None) and not d.source.strip():
        errs.append(f"{where}.source: say where max_abs / max_offset come from (paper, model, measurement)")
    if len(set(d.specials)) != len(d.specials):
        errs.append(f"{where}.specials: listed twice")
    return errs


def _layout_errors(where: str, layouts: list[str], rank: int) -> list[str]:
    errs = [f"{where}.layouts: listed twice"] if len(set(layouts)) != len(layouts) else []
    if "permuted" in layouts and rank < 2:
        errs.append(f"{where}.layouts: permuted needs 2 or more dims (this input has {rank})")
    if rank < 1 and layouts:
        errs.append(f"{where}.layouts: a 0-dim tensor has no layout")
    return errs


# --- layouts: the parent sends a contiguous buffer, the worker rebuilds the view -------------------

def layout_spec(kind: str, x: Any) -> dict[str, Any] | None:
    if kind == "permuted":
        return {"kind": "permuted"} if x.dim() >= 2 else None
    if kind == "strided":
        return {"kind": "strided", "size": int(x.shape[-1])} if x.dim() >= 1 else None
    return {"kind": "broadcast", "shape": [int(s) for s in x.shape]} if x.dim() >= 1 else None


def physical(x: Any, layout: dict[str, Any] | None) -> Any:
    """The contiguous buffer the worker turns into ``x``'s view by :func:`apply_layout`."""
    import torch

    if layout is None or not isinstance(x, torch.Tensor):
        return x
    if layout["kind"] == "permuted":
        return x.transpose(-1, -2).contiguous()
    if layout["kind"] == "strided":
        pad = torch.full((*x.shape[:-1], _STRIDE_PAD), math.nan if x.dtype.is_floating_point else 0,
                         dtype=x.dtype, device=x.device)
        return torch.cat([x, pad], dim=-1).contiguous()
    return x[:1].contiguous()


def apply_layout(v: Any, layout: Any) -> Any:
    """The worker's side of :func:`physical`: the view the candidate receives (a trusted header from
    the parent; anything malformed is the parent's bug, so it raises)."""
    if not isinstance(layout, dict):
        return v
    kind = layout.get("kind")
    if kind == "permuted":
        return v.transpose(-1, -2)
    if kind == "strided":
        return v.narrow(-1, 0, int(layout["size"]))
    if kind == "broadcast":
        return v.expand(*[int(s) for s in layout["shape"]])
    raise ValueError(f"unknown layout {kind!r}")
