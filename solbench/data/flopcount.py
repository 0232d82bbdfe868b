"""Count a reference's FLOPs with torch.utils.flop_counter.FlopCounterMode.

Used for ``flops: auto`` and by ``solbench validate --deep`` to cross-check analytic formulas.
FlopCounterMode counts matmuls, convolutions and SDPA at 2 FLOPs per multiply-add; elementwise
ops count 0, and causal attention is counted as the full square.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solbench.errors import ProblemError

if TYPE_CHECKING:  # a type only: problem.py imports this module for `flops: auto`
    from solbench.data.problem import Problem


def _meta_inputs(problem: Problem, axes: dict[str, int]) -> list[Any]:
    import torch

    from solbench.data.dtypes import torch_dtype

    args = []
    for name, spec in problem.inputs.items():
        shape = problem.shape(name, axes)
        if shape is None:
            args.append(spec.value)
        else:
            args.append(torch.zeros(shape, dtype=torch_dtype(spec.dtype), device="meta"))
    return args


def count_reference_flops(problem: Problem, axes: dict[str, int], device: str = "meta") -> int:
    """FLOPs FlopCounterMode sees when the reference runs at these axes.

    On ``meta`` nothing is computed, so any size is cheap. ``device='cpu'`` runs it for real
    (with generated inputs), for references that do not run on meta tensors.
    """
    from torch.utils.flop_counter import FlopCounterMode

    from solbench.data.inputs import load_reference, make_inputs

    ref = load_reference(problem)
    if device == "meta":
        args = _meta_inputs(problem, axes)
    else:
        args = list(make_inputs(problem, axes, seed=0, device=device).values())
    try:
        with FlopCounterMode(display=False) as counter:
            ref(*args)
    except Exception as err:  # noqa: BLE001 - any failure means "cannot count here"
        raise ProblemError([f"{problem.name}: flops could not be counted on {device} tensors "
                            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                            "write an analytic flops expression"]) from None
    return int(counter.get_total_flops())
