"""FLOP and byte formulas per FlashInfer-Trace ``op_type``, where the op's shape says them.

Each template is a function of the definition (its axes and tensors) that returns ``(flops,
bytes)`` as solbench expressions, or None when the definition does not have the shape the
template expects (then the importer writes ``auto`` and a note to review). Bytes are ``auto``
(every input read once, every output written once) for all the ops here: that is their minimum
traffic. FLOPs count multiply-adds as 2 and elementwise arithmetic per output element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Template = Callable[[dict[str, Any]], "tuple[str, str] | None"]


def _shape(defn: dict[str, Any], section: str, name: str) -> list[str] | None:
    spec = defn.get(section, {}).get(name)
    return spec.get("shape") if isinstance(spec, dict) else None


def _gemm(defn: dict[str, Any]) -> tuple[str, str] | None:
    """C[M, N] = A[M, K] @ B[N, K].T: 2 M N K."""
    a, b = _shape(defn, "inputs", "A"), _shape(defn, "inputs", "B")
    if not (a and b and len(a) == 2 and len(b) == 2 and a[1] == b[1]):
        return None
    return f"2 * {a[0]} * {b[0]} * {a[1]}", "auto"


def _rmsnorm(defn: dict[str, Any]) -> tuple[str, str] | None:
    """Square, sum, scale by the inverse RMS and the weight: 4 per element (+ the add when fused)."""
    first = next(iter(defn.get("inputs", {}).values()), {}).get("shape")
    if not first or len(first) != 2:
        return None
    per = 5 if defn.get("op_type") == "fused_add_rmsnorm" or "residual" in defn.get("inputs", {}) else 4
    return f"{per} * {first[0]} * {first[1]}", "auto"


def _rope(defn: dict[str, Any]) -> tuple[str, str] | None:
    """x * cos + rotate_half(x) * sin: 3 per element of q and k."""
    q, k = _shape(defn, "inputs", "q"), _shape(defn, "inputs", "k")
    if not (q and k):
        return None
    return f"3 * ({' * '.join(q)} + {' * '.join(k)})", "auto"


def _silu_and_mul(defn: dict[str, Any]) -> tuple[str, str] | None:
    """silu(gate) * up per output element: x / (1 + exp(-x)) then a product, 4 operations."""
    out = next(iter(defn.get("outputs", {}).values()), {}).get("shape")
    return (f"4 * {' * '.join(out)}", "auto") if out else None


TEMPLATES: dict[str, Template] = {
    "gemm": _gemm,
    "rmsnorm": _rmsnorm,
    "fused_add_rmsnorm": _rmsnorm,
    "rope": _rope,
    "silu_and_mul": _silu_and_mul,
    "activation": _silu_and_mul,
}


def costs_for(defn: dict[str, Any]) -> tuple[str, str, str]:
    """``(flops, bytes, note)``: the op_type's template, or ``auto`` with a note asking for review."""
    op = str(defn.get("op_type", ""))
    template = TEMPLATES.get(op)
    found = template(defn) if template else None
    if found is None:
        return "auto", "auto", (f"op_type {op!r} has no cost template (known: {', '.join(sorted(TEMPLATES))}): flops "
                                "counted from the reference (FlopCounterMode), bytes = inputs + outputs; review both")
    return found[0], found[1], f"flops from the {op} template (solbench.data.interop.op_costs); bytes = inputs + outputs"
