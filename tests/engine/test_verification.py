"""The parent's checks of timed calls (solbench.engine.verification): the plan drawn from the secret
seed, the expected outputs of edited sets, and the re-check of a timing reply, on fake replies."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.engine.cases import prepare_cases
from solbench.engine.correctness import MalformedReply
from solbench.engine.evaluation import EvaluationContext, _recheck_timed, _Stop
from solbench.engine.problem_code import load_reference
from solbench.engine.verification import KEEP_EARLY, draw_plan, request, state
from solbench.timing.config import TimingConfig

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"


def _cases(name: str = "scaled_add", workload: str = "n4", seed: int = 5):
    problem = load_problem(TINY / name)
    w = next(w for w in problem.workloads if w.name == workload)
    return prepare_cases(problem, w, base_seed=seed, device="cpu", rounds=3, ref_fn=load_reference(problem),
                         gen_fn=None)


def test_the_plan_is_secret_seeded_and_touches_floating_inputs_only():
    cases = _cases()
    plan, again = draw_plan(cases, 10), draw_plan(cases, 10)
    assert plan.keep == again.keep and [(e.sample, e.input) for e in plan.edits] == \
        [(e.sample, e.input) for e in again.edits]
    other = draw_plan(_cases(seed=6), 10)  # another run's secret seed, another plan
    assert (plan.keep, [e.sample for e in plan.edits]) != (other.keep, [e.sample for e in other.edits])
    assert sum(s < 10 for s in plan.keep) == KEEP_EARLY  # always reached: min_samples always run
    n = len(cases.sets)
    for e in plan.edits:
        assert e.set == e.sample % n and e.input in ("x", "y") and e.index.dtype == torch.int64
        fresh = plan.refresh.inputs[e.input].reshape(-1)[e.index]
        assert torch.equal(e.values, fresh)  # values from data the candidate has not seen
    assert torch.equal(plan.refresh.expected["out"], plan.refresh.inputs["x"] * 2 + plan.refresh.inputs["y"])
    edits = request(plan, cases)["edits"]
    assert all(e["input"] in (0, 1) for e in edits)


def test_inputs_an_output_is_written_into_are_never_edited():
    cases = _cases("row_write", "s8")
    assert {e.input for e in draw_plan(cases, 10).edits} == {"x"}  # never "cache" (inplace_of)


def test_the_state_of_a_set_applies_the_edits_due_and_its_reference():
    cases = _cases()
    plan = draw_plan(cases, 10)
    e = plan.edits[0]
    before, n0 = state(cases, plan, e.set, e.sample - 1)
    after, n1 = state(cases, plan, e.set, e.sample)
    assert (before is cases.sets[e.set] or n0 > 0) and n1 == n0 + 1
    x = after.inputs[e.input].reshape(-1)
    assert torch.equal(x[e.index], e.values)
    assert torch.equal(after.expected["out"], after.inputs["x"] * 2 + after.inputs["y"])
    assert not torch.equal(cases.sets[e.set].inputs[e.input].reshape(-1)[e.index], e.values)  # the set is untouched


def _desc(t: torch.Tensor) -> dict:
    return {"kind": "tensor", "type": "torch.Tensor", "exact": True, "shape": list(t.shape),
            "dtype": str(t.dtype).removeprefix("torch."), "device": "cpu", "contiguous": True, "aliases": [], "data": t}


def _reply(cases, plan, samples: int = 20) -> dict:
    """What an honest worker returns for this plan after ``samples`` timed samples."""
    n = len(cases.sets)
    last = [[_desc(state(cases, plan, i, samples - 1)[0].expected["out"])] for i in range(n)]
    kept = [{"sample": s, "set": s % n, "outputs": [_desc(state(cases, plan, s % n, s)[0].expected["out"])]}
            for s in plan.keep if s < samples]
    unchanged = [[{"kind": "unchanged"}] * 2 for _ in range(n)]
    return {"last_outputs": last, "sets_after": unchanged, "samples": samples, "kept": kept,
            "refresh": {"set": plan.refresh_set, "outputs": [_desc(plan.refresh.expected["out"])]}}


def test_an_honest_reply_passes_and_a_stale_one_names_its_check():
    cases = _cases()
    ctx = EvaluationContext(cases, "cpu", 60, 60, TimingConfig())
    plan = draw_plan(cases, 10)
    summary = _recheck_timed(ctx, _reply(cases, plan), plan)
    assert summary["passed"] and summary["kept_samples"] == sum(s < 20 for s in plan.keep)
    assert summary["edits_applied"] == sum(e.sample < 20 for e in plan.edits)
    # The refresh run answered with the output of the set's old data.
    stale = _reply(cases, plan)
    stale["refresh"]["outputs"] = [_desc(cases.sets[plan.refresh_set].expected["out"])]
    with pytest.raises(_Stop) as info:
        _recheck_timed(ctx, stale, plan)
    assert info.value.evaluation.status == Status.INCORRECT and "refresh check" in info.value.evaluation.reason
    # A kept sample's output from before an edit of its set (a cache).
    edit = plan.edits[0]
    s = min(k for k in range(edit.sample, 20) if k % len(cases.sets) == edit.set)
    plan.keep = sorted({*plan.keep, s})
    stale = _reply(cases, plan)
    entry = next(k for k in stale["kept"] if k["sample"] == s)
    entry["outputs"] = [_desc(cases.sets[edit.set].expected["out"])]
    with pytest.raises(_Stop) as info:
        _recheck_timed(ctx, stale, plan)
    assert f"sample {s + 1}, one of those checked at random, after" in info.value.evaluation.reason


@pytest.mark.parametrize("damage", ["unasked", "missing", "refresh", "samples"])
def test_a_reply_that_does_not_follow_the_plan_is_malformed(damage):
    cases = _cases()
    ctx = EvaluationContext(cases, "cpu", 60, 60, TimingConfig())
    plan = draw_plan(cases, 10)
    reply = _reply(cases, plan)
    if damage == "unasked":
        s = next(k for k in range(20) if k not in plan.keep)
        reply["kept"].append({"sample": s, "set": s % len(cases.sets), "outputs": reply["kept"][0]["outputs"]})
    elif damage == "missing":
        reply["kept"].pop()
    elif damage == "refresh":
        reply["refresh"] = None
    else:
        reply["samples"] = 0
    with pytest.raises(MalformedReply):
        _recheck_timed(ctx, reply, plan)


def test_edits_never_touch_an_input_declared_fixed():
    """FLUX's attention backward reads q, k, v and the forward's saved out and lse, all declared fixed
    (consistent with each other): the timing's and the burst's edits go to grad_out only, so an honest
    kernel that recomputes the forward agrees with the reference, which reads the saved statistics."""
    from solbench.data.library import problems_root
    from solbench.engine import burst
    from solbench.engine.problem_code import load_generator
    from solbench.engine.verification import editable_inputs

    problem = load_problem(problems_root(None) / "flux1_dev" / "attention_backward")
    workload = problem.workloads[0]
    cases = prepare_cases(problem, workload, base_seed=3, device="cpu", rounds=1, ref_fn=load_reference(problem),
                          gen_fn=load_generator(problem), axes=dict(problem.resolve_axes(workload), **problem.test_axes))
    assert editable_inputs(cases) == ["grad_out"]
    plan = draw_plan(cases, 10)
    assert plan.edits and {e.input for e in plan.edits} == {"grad_out"}
    assert set(burst.draw_burst(cases, 20, 0).edits) == {"grad_out"}
