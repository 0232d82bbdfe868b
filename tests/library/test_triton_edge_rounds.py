"""The shipped Triton kernels that ``test_triton_kernels.py`` runs in Triton's interpreter, on their
problems' edge rounds (large, offset, tiny, zeros, strided where legal) at the small shape.

Their ``run()`` autotunes, which needs a GPU, so on the CPU the kernels' launchers are called with
the small interpreter configurations of ``test_triton_kernels.py``, exactly as there; on a GPU the
same launchers run compiled. Cross-entropy's rows are independent: its rounds keep 8 rows (the
interpreter is slow)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, run_round

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: it reads it then
kernels = pytest.importorskip("library.test_triton_kernels")  # patches the interpreter as its tests need

from solbench.data.problem import load_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "problems" / "llama3_1_8b"
ROW = kernels.ROW_LOOP


def _launchers():
    rms = kernels.candidate("rmsnorm", "triton_rmsnorm.py")
    fused = kernels.candidate("fused_add_rmsnorm", "triton_fused_add_rmsnorm.py")
    swiglu = kernels.candidate("swiglu", "triton_swiglu.py")
    rope = kernels.candidate("rope", "triton_rope.py")
    ce = kernels.candidate("cross_entropy", "triton_cross_entropy.py")
    return {
        "rmsnorm": lambda x, w, eps: rms.rmsnorm(x, w, eps, config=ROW),
        "fused_add_rmsnorm": lambda x, r, w, eps: fused.fused_add_rmsnorm(x, r, w, eps, config=ROW),
        "swiglu": lambda gu: swiglu.swiglu(gu, config={"BLOCK": 2048, "num_warps": 4}),
        "rope": lambda q, k, cos, sin: rope.rope(q, k, cos, sin, num_warps=4),
        "cross_entropy": lambda logits, targets: ce.cross_entropy(
            logits, targets, config={"BLOCK_V": 1024, "STAGES": 2, "num_warps": 4}, splits=(2, 2048)),
    }


def _rows(r, n: int):
    """The round cut to its first ``n`` rows (cross-entropy: each row's loss is its own)."""
    r.sent = [v[:n] if isinstance(v, torch.Tensor) else v for v in r.sent]
    r.expected = {k: v[:n] for k, v in r.expected.items()}
    return r


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU runs run() itself (test_triton_kernels)")
@pytest.mark.parametrize("op", ["rmsnorm", "fused_add_rmsnorm", "swiglu", "rope", "cross_entropy"])
def test_triton_kernel_passes_its_problems_edge_rounds(op):
    problem = load_problem(PROBLEMS / op)
    launch = _launchers()[op]
    rounds = [r for r in edge_rounds(problem) if r.skipped is None]
    if op == "cross_entropy":
        rounds = [_rows(r, 8) for r in rounds]
    assert rounds
    failures = {r.name: why for r in rounds if (why := run_round(problem, r, launch)) is not None}
    assert not failures, failures
