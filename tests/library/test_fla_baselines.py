"""flash-linear-attention baselines (``lib_fla_*.py``) on the CPU through a stand-in ``fla`` with the real
signature (fla-core 0.6.0's fused_recurrent_gated_delta_rule) and fla's recurrence written out in plain torch:
the adapters' argument order, layouts and flags are checked against the problem's reference; fla's Triton
kernel itself runs on the GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, run_round

from solbench.data.problem import load_problem
from solbench.engine.correctness import compare_tensors
from solbench.engine.problem_code import load_module, load_reference, make_inputs

ROOT = Path(__file__).resolve().parents[2]
GATED_DELTA_RULE = ROOT / "problems" / "qwen3_next_80b_a3b" / "gated_delta_rule_decode"

# fla's kernel, step by step as its source states it (fla/ops/gated_delta_rule/fused_recurrent.py): per value head
# hv, key head hv // (HV // H); optional L2 norm of q and k (eps 1e-6 under the root), q * scale, h *= exp(g),
# v' = beta (v - k h), h += k v'^T, o = q h; o in v's dtype, the final state float32 and new.
_FAKE_FUSED_RECURRENT = '''
import torch


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False,
                                     use_gate_in_kernel=False, A_log=None, dt_bias=None,
                                     use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
                                     cu_seqlens=None, **kwargs):
    assert gk is None and gv is None and not use_gate_in_kernel and not use_beta_sigmoid_in_kernel  # not modelled
    assert not state_v_first and cu_seqlens is None and not kwargs
    batch, steps, heads, dk = k.shape
    hv, dv = v.shape[2], v.shape[3]
    assert q.shape == k.shape and v.shape[:2] == (batch, steps) and hv % heads == 0
    assert g.shape == beta.shape == (batch, steps, hv)  # head-wise beta (fla also takes one per value dim)
    scale = dk ** -0.5 if scale is None else scale
    h = torch.zeros(batch, hv, dk, dv) if initial_state is None else initial_state.float().clone()
    assert h.shape == (batch, hv, dk, dv)
    out = torch.empty_like(v)
    for t in range(steps):
        qt = q[:, t].float().repeat_interleave(hv // heads, dim=1)
        kt = k[:, t].float().repeat_interleave(hv // heads, dim=1)
        if use_qk_l2norm_in_kernel:
            qt = qt / torch.sqrt((qt * qt).sum(-1, keepdim=True) + 1e-6)
            kt = kt / torch.sqrt((kt * kt).sum(-1, keepdim=True) + 1e-6)
        h = h * g[:, t].float().exp()[..., None, None]
        delta = beta[:, t].float()[..., None] * (v[:, t].float() - torch.einsum("bhk,bhkv->bhv", kt, h))
        h = h + kt[..., :, None] * delta[..., None, :]
        out[:, t] = torch.einsum("bhk,bhkv->bhv", qt * scale, h).to(v.dtype)
    return out, (h if output_final_state else None)
'''


@pytest.fixture
def fake_fla(tmp_path, monkeypatch):
    """A stand-in ``fla`` package first on the path (the real one, Triton, needs a GPU)."""
    package = tmp_path / "fla" / "ops" / "gated_delta_rule"
    package.mkdir(parents=True)
    for folder in (tmp_path / "fla", tmp_path / "fla" / "ops"):
        (folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text(_FAKE_FUSED_RECURRENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
        monkeypatch.delitem(sys.modules, name)
    yield
    for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
        monkeypatch.delitem(sys.modules, name)


def _adapter_run():
    return load_module(GATED_DELTA_RULE / "solutions" / "lib_fla_gated_delta_rule.py", "fla_baseline").run


def test_fla_gated_delta_rule_matches_the_reference(fake_fla):
    """At the test axes (two value heads a key head): both outputs within tolerance, the inputs untouched."""
    problem = load_problem(GATED_DELTA_RULE / "problem.yaml")
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=1234, device="cpu")
    pristine = {k: v.clone() for k, v in inputs.items()}
    want = load_reference(problem)(*[v.clone() for v in inputs.values()])
    got = _adapter_run()(*inputs.values())
    tol = problem.tolerance_for(problem.workloads[0])
    for name, g, w in zip(problem.outputs, got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        verdict = compare_tensors(g, w, tol.atol, tol.rtol, tol.max_mismatch_ratio)
        assert verdict.passed, f"{name}: {verdict.reason}"
    assert all(torch.equal(inputs[k], v) for k, v in pristine.items())


def test_fla_gated_delta_rule_passes_the_edge_rounds(fake_fla):
    problem = load_problem(GATED_DELTA_RULE / "problem.yaml")
    run = _adapter_run()
    ran = [r for r in edge_rounds(problem) if r.skipped is None]
    assert ran
    failures = {r.name: why for r in ran if (why := run_round(problem, r, run)) is not None}
    assert not failures, failures
