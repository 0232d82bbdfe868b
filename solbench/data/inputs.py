"""Input generation: seeded, on the target device, shaped and typed as the problem declares.

Floating inputs are standard normal by default, integer inputs uniform in [-64, 64), bools fair coins.
A problem that needs structure (token ids in range, routing indices, positive scales, cos/sin
tables) names ``input_generator: reference.py:make_inputs``; that function receives
``(axes, generator, device)`` and returns a dict with some or all of the inputs. This module never
loads or calls it by itself: :func:`make_inputs` takes it as ``generator_fn``, which the engine
gives (a call into the problem's sandboxed host, :mod:`solbench.engine.problem_host`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from solbench.data.problem import Problem
from solbench.errors import ProblemError


def input_seed(seed: int, name: str) -> int:
    """The seed of one input's stream (``__generator__``: the generator's) from a case's seed."""
    # Independent stream per input, so adding an input does not change the others.
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") & ((1 << 63) - 1)


# fp4 pairs: any byte is two finite e2m1 values; e8m0 scales: exponents 2^-8 .. 2^7 (no NaN byte 255).
_RANDOM_BYTE_DTYPES = {"float4_e2m1fn_x2": (0, 256), "float8_e8m0fnu": (119, 135)}


def default_tensor(shape: tuple[int, ...], dtype_name: str, seed: int, device: str) -> Any:
    import torch

    from solbench.data.dtypes import torch_dtype

    g = torch.Generator(device=device)
    g.manual_seed(seed)
    dt = torch_dtype(dtype_name)
    if dtype_name in _RANDOM_BYTE_DTYPES:  # no arithmetic in torch: random bytes, viewed
        low, high = _RANDOM_BYTE_DTYPES[dtype_name]
        return torch.randint(low, high, shape, generator=g, device=device, dtype=torch.uint8).view(dt)
    if dtype_name.startswith("float8"):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dt)
    if dt.is_floating_point:
        return torch.randn(shape, generator=g, device=device, dtype=dt)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g, device=device).bool()
    low, high = (0, 64) if dtype_name == "uint8" else (-64, 64)
    return torch.randint(low, high, shape, generator=g, device=device, dtype=dt)


def make_inputs(
    problem: Problem,
    axes: dict[str, int],
    seed: int,
    device: str = "cpu",
    generator_fn: Callable[..., dict] | None = None,
    scalars: dict[str, Any] | None = None,
    placeholders: bool = False,
) -> dict[str, Any]:
    """All inputs of a workload, in run() order. Deterministic in (problem, axes, seed, device).

    ``generator_fn``: the problem's input generator (required when it names one: ProblemError without
    it); called as ``generator_fn(axes, generator, device)`` with a generator seeded from ``seed``.

    ``scalars``: the workload's values of scalar inputs (``Problem.scalars_for``), else the declared ones.
    ``placeholders``: inputs the generator does not make are ``meta`` tensors (shape and dtype, no
    values, nothing allocated): what a cost hook sees in ``sol`` and ``list``.
    """
    import torch

    from solbench.data.dtypes import torch_dtype

    scalars = scalars or {}
    custom: dict[str, Any] = {}
    fn = generator_fn
    if fn is None and problem.input_generator is not None:
        raise ProblemError([f"{problem.name}: its inputs need its input generator {problem.input_generator}, run by "
                            "the engine in the problem's sandboxed host (solbench.engine.problem_host)"])
    if fn is not None:
        g = torch.Generator(device=device)
        g.manual_seed(input_seed(seed, "__generator__"))
        custom = _generated(problem, fn, axes, g, device)
        unknown = set(custom) - set(problem.inputs)
        if unknown:
            raise ProblemError([f"{problem.name}: input generator returned unknown inputs {sorted(unknown)}"])
    out: dict[str, Any] = {}
    for name, spec in problem.inputs.items():
        shape = problem.shape(name, axes)
        if name in custom:
            val = custom[name]
            if shape is not None:
                if not isinstance(val, torch.Tensor):
                    raise ProblemError([f"{problem.name}: generator gave {name} as {type(val).__name__}, not a tensor"])
                if tuple(val.shape) != shape or val.dtype != torch_dtype(spec.dtype):
                    raise ProblemError([f"{problem.name}: generator gave {name} {tuple(val.shape)} {val.dtype}, "
                                        f"declared {shape} {spec.dtype}"])
                val = val.to(device).contiguous()
            else:
                val = _generated_scalar(problem, name, val, spec.dtype)
            out[name] = val
        elif shape is None:
            out[name] = scalars.get(name, spec.value)
        elif placeholders:
            out[name] = torch.empty(shape, dtype=torch_dtype(spec.dtype), device="meta")
        else:
            out[name] = default_tensor(shape, spec.dtype, input_seed(seed, name), device)
    return out


def _generated(problem: Problem, fn: Callable[..., dict], axes: dict[str, int], g: Any, device: str) -> dict:
    """What the problem's input generator returns, a dict; its failure is one line naming it."""
    try:
        custom = fn(dict(axes), g, device) or {}
    except Exception as err:  # noqa: BLE001 - the problem's own code: one line naming it
        first = " ".join(str(err).split())[:300]
        raise ProblemError([f"{problem.path or problem.name}: input generator {problem.input_generator} raised "
                            f"{type(err).__name__}: {first}"]) from None
    if not isinstance(custom, dict):
        raise ProblemError([f"{problem.name}: input generator {problem.input_generator} must return a dict of inputs, "
                            f"not {type(custom).__name__}"])
    return custom


def _generated_scalar(problem: Problem, name: str, value: Any, dtype: str) -> Any:
    from solbench.data.hookvalues import scalar_value

    try:
        return scalar_value(value, dtype)
    except ValueError as err:
        raise ProblemError([f"{problem.name}: input generator gave scalar input {name}: {err}"]) from None
