"""Input generation: seeded, on the target device, shaped and typed as the problem declares.

Floating inputs are standard normal by default, integer inputs uniform in [-64, 64), bools fair coins.
A problem that needs structure (token ids in range, routing indices, positive scales, cos/sin
tables) names ``input_generator: reference.py:make_inputs``; that function receives
``(axes, generator, device)`` and returns a dict with some or all of the inputs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench.errors import ProblemError

if TYPE_CHECKING:  # a type only: problem.py imports this module for `flops: auto`
    from solbench.data.problem import Problem


def module_name(prefix: str, path: Path) -> str:
    """A module name unique to a file: ``prefix`` + a digest of its path."""
    return f"{prefix}{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"


def import_file(path: Path, mod_name: str) -> Any:
    """Import a Python file as module ``mod_name`` (registered in sys.modules); ImportError if it is
    not a Python module. What the file itself raises propagates."""
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path.name} cannot be imported as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_module(path: Path, name_hint: str = "ref") -> Any:
    """Import a problem's Python file (reference, generator) under a unique module name."""
    try:
        return import_file(path, module_name(f"_solbench_{name_hint}_", path.resolve()))
    except ImportError as err:
        if err.name is not None:  # an import inside the file failed: the file's own error
            raise
        raise ProblemError([f"{path}: cannot be imported"]) from None


def _real_file(problem: Problem, key: str, ref: str) -> Path:
    """The real path of a reference or generator, checked again at import (validation checked it at load)."""
    from solbench.data.problem import inside_folder

    file = ref.rpartition(":")[0]
    real = inside_folder(problem, file)
    if real is None:
        raise ProblemError([f"{problem.path or problem.name}: {key}: {file!r} resolves outside the problem's folder"])
    return real


def load_reference(problem: Problem) -> Callable[..., Any]:
    mod = load_module(_real_file(problem, "reference", problem.reference), "ref")
    return getattr(mod, problem.reference_function)


def load_generator(problem: Problem) -> Callable[..., dict] | None:
    if not problem.input_generator:
        return None
    mod = load_module(_real_file(problem, "input_generator", problem.input_generator), "gen")
    return getattr(mod, problem.generator_function)  # type: ignore[arg-type]


def _seed_for(seed: int, name: str) -> int:
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

    ``scalars``: the workload's values of scalar inputs (``Problem.scalars_for``), else the declared ones.
    ``placeholders``: inputs the generator does not make are ``meta`` tensors (shape and dtype, no
    values, nothing allocated): what a cost hook sees in ``sol`` and ``list``.
    """
    import torch

    from solbench.data.dtypes import torch_dtype

    scalars = scalars or {}
    custom: dict[str, Any] = {}
    fn = generator_fn if generator_fn is not None else load_generator(problem)
    if fn is not None:
        g = torch.Generator(device=device)
        g.manual_seed(_seed_for(seed, "__generator__"))
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
            out[name] = default_tensor(shape, spec.dtype, _seed_for(seed, name), device)
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
