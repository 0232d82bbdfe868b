"""PyTorch library baselines (``lib_torch_*.py``) on the CPU at each problem's test axes, against the problem's
reference within its tolerance: flex_attention runs uncompiled (its math path; the compiled kernel is the H200's),
and the SDPA backends that exist only on CUDA are swapped for the math backend (same call, same arguments)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from edge_check import first_failure

from solbench.data.problem import load_problem
from solbench.engine.correctness import compare_tensors
from solbench.engine.problem_code import load_module, load_reference, make_inputs

ROOT = Path(__file__).resolve().parents[2]
FLEX = ["gemma2_9b/attention_decode_softcap", "llama3_1_8b/varlen_prefill_attention",
        "gemma3_27b/sliding_window_attention_prefill", "llama4_scout/chunked_attention_prefill",
        "gpt_oss_20b/attention_sinks_prefill", "gpt_oss_20b/attention_sinks_decode"]


def _check_against_reference(folder: Path, run) -> None:
    """run() at the test axes equals the reference within the problem's tolerance and leaves its inputs intact."""
    problem = load_problem(folder / "problem.yaml")
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=1234, device="cpu")
    pristine = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    want = load_reference(problem)(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs.values()])
    got = run(*inputs.values())
    tol = problem.tolerance_for(problem.workloads[0])
    for name, g, w in zip(problem.outputs, *(x if isinstance(x, tuple) else (x,) for x in (got, want)), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        verdict = compare_tensors(g, w, tol.atol, tol.rtol, tol.max_mismatch_ratio)
        assert verdict.passed, f"{name}: {verdict.reason}"
    assert all(torch.equal(inputs[k], v) for k, v in pristine.items())


def _flex_baseline(op: str, monkeypatch):
    from torch.nn.attention.flex_attention import flex_attention

    module = load_module(ROOT / "problems" / op / "solutions" / "lib_torch_flex_attention.py", "flex_baseline")
    monkeypatch.setattr(module, "_compiled", flex_attention)  # eager flex: the same call, on its math path
    return module.run


@pytest.mark.parametrize("op", FLEX)
def test_flex_attention_baseline_matches_the_reference(op, monkeypatch):
    _check_against_reference(ROOT / "problems" / op, _flex_baseline(op, monkeypatch))


@pytest.mark.parametrize("op", FLEX)
def test_flex_attention_baseline_passes_the_edge_rounds(op, monkeypatch):
    """The engine's edge rounds (stressed value domains, strided layouts) at the problem's small shape."""
    problem = load_problem(ROOT / "problems" / op / "problem.yaml")
    run = _flex_baseline(op, monkeypatch)
    assert first_failure(problem, run) is None


def test_chunked_flex_mask_cuts_at_the_chunk_boundary(monkeypatch):
    """A chunk of 64 in a 256-token prompt (the test axes hold one chunk of 8192): the reference takes the chunk
    as an input too, so both see four chunks."""
    op = "llama4_scout/chunked_attention_prefill"
    problem = load_problem(ROOT / "problems" / op / "problem.yaml")
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=5, device="cpu")
    inputs["chunk"] = 64
    got = _flex_baseline(op, monkeypatch)(*inputs.values())
    want = load_reference(problem)(*inputs.values())
    assert compare_tensors(got, want, problem.tolerance.atol, problem.tolerance.rtol).passed
    inputs["chunk"] = 8192
    assert not compare_tensors(got, load_reference(problem)(*inputs.values()), problem.tolerance.atol,
                               problem.tolerance.rtol).passed  # the boundary matters at these inputs
