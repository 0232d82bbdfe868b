"""The numbers a problem's code hands back (cost hooks, input generators' scalars), checked.

A hook's value must be what it says: a real integer, or a finite float. Text (``"4096"``), booleans,
NaN and infinities are refused, and a float is never truncated into an integer (``tensor(4096.7)`` or
``numpy.float32(4096.7)`` as a FLOP count is an error, not 4096). Python numbers, numpy scalars and
0-d tensors are taken. Every refusal is a :class:`ValueError` with one line that names the value;
callers add which hook and problem it came from.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

LIMIT = 2**63
_TEXT = 40


def _show(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= _TEXT else text[:_TEXT] + "..."


def _unwrap(value: Any) -> Any:
    """A 0-d tensor as its Python number (``item()``); anything else as it is."""
    if type(value).__module__.startswith("torch") and hasattr(value, "dim") and hasattr(value, "item"):
        if value.dim() != 0 or value.is_complex() or value.device.type == "meta":
            raise ValueError(f"{_show(value)} is not a number (a tensor of shape {tuple(value.shape)})")
        return value.item()
    return value


def whole_number(value: Any, low: int = 0, high: int = LIMIT) -> int:
    """``value`` as an int in [low, high): an integer (Python, numpy, 0-d integer tensor), nothing else."""
    number = _unwrap(value)
    if isinstance(number, bool) or not isinstance(number, numbers.Integral):
        raise ValueError(f"{_show(value)} is not an integer")
    number = int(number)
    if not low <= number < high:
        raise ValueError(f"{_show(value)} is outside [{low}, 2^63)" if high == LIMIT
                         else f"{_show(value)} is outside [{low}, {high})")
    return number


def real_number(value: Any) -> int | float:
    """``value`` as a finite Python int or float (a float stays a float, exactly)."""
    number = _unwrap(value)
    if isinstance(number, bool) or not isinstance(number, numbers.Real):
        raise ValueError(f"{_show(value)} is not a number")
    if isinstance(number, numbers.Integral):
        return int(number)
    number = float(number)
    if not math.isfinite(number):
        raise ValueError(f"{_show(value)} is not a finite number")
    return number


def scalar_value(value: Any, dtype: str) -> bool | int | float:
    """A scalar input's value for its declared dtype: a bool for ``bool``, an integer for integer
    dtypes, a finite number otherwise."""
    if dtype == "bool":
        number = _unwrap(value)
        if not isinstance(number, bool):
            raise ValueError(f"{_show(value)} is not a boolean (dtype bool)")
        return number
    if dtype.startswith(("int", "uint")):
        return whole_number(value, -LIMIT, LIMIT)
    return real_number(value)


def hook_cost(result: Any) -> tuple[int, int]:
    """A cost hook's ``{"flops": n, "bytes": n}``: integers in [0, 2^63), not both 0 (no work at all
    would give an ideal time of 0 and a SOL of 0/0)."""
    if not isinstance(result, dict) or set(result) != {"flops", "bytes"}:
        raise ValueError(f"must return {{'flops': int, 'bytes': int}}, got {_show(result)}")
    counts = []
    for key in ("flops", "bytes"):
        try:
            counts.append(whole_number(result[key]))
        except ValueError as err:
            raise ValueError(f"{key} = {err}") from None
    if counts == [0, 0]:
        raise ValueError("flops and bytes are both 0: a workload must have some work to score against")
    return counts[0], counts[1]
