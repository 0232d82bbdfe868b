"""The parent's checks of the timed calls: what the worker is asked to do, and what each output must be.

Drawn per workload from a seed derived from the run's secret base seed (``WorkloadCases.verify_seed``),
so neither the worker nor the candidate can predict it (though the worker reads it once it arrives:
it is sent with the timing request):

* **kept samples**: a few timed samples (some among the first ``min_samples``, which always run,
  some later, log-uniform) whose outputs the worker copies outside the timed window and returns;
  so any timed output may be checked, not only the last one of each set;
* **edits**: before a few samples, some elements of one floating input of the set that sample
  runs are overwritten in place (same tensors, same addresses) with values from data the candidate
  has not seen; an output cached for a set, or a check of a few elements that the inputs did not
  change, then gives a stale answer. Integer inputs (indices, lengths) and inputs an output is
  written into (``inplace_of``) are never edited: they could break validity;
* **refresh**: after the last sample, every tensor input of one set is overwritten in place with a
  fresh case's data and the timed construct runs once more (a graph replay in graph mode); its
  output must match the reference for the new data.

Each output is checked against the reference for the inputs as they were when it was computed:
the set's case with the edits applied before that sample (references computed here, on demand).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from solbench.data import effective_domain
from solbench.engine.cases import (
    Case,
    WorkloadCases,
    batch_calls,
    derive_seed,
    make_case,
    reference_outputs,
    reference_outputs_many,
)
from solbench.engine.correctness import MalformedReply
from solbench.timing import bit_view

KEEP_EARLY, KEEP_LATE = 2, 2  # kept samples among the first min_samples, and later
EDITS_EARLY, EDITS_LATE = 3, 2
LATE_SPAN = 16  # later samples are drawn log-uniform in [min_samples, LATE_SPAN x min_samples)
EDIT_ELEMENTS = 4  # elements per edit, at least; more where the tolerance admits a mismatch ratio


@dataclass
class PlannedEdit:
    sample: int  # applied just before this timed sample
    set: int  # the set that sample runs (sample % sets)
    input: str
    index: Any  # flat indices (int64, CPU)
    values: Any  # the input's dtype, on the parent's device


@dataclass
class TimedPlan:
    keep: list[int]
    edits: list[PlannedEdit]
    refresh_set: int
    refresh: Case
    _state: dict[tuple[int, int], Case] = field(default_factory=dict)  # the last edited state computed


def _late(rng: random.Random, m: int) -> int:
    return int(m * LATE_SPAN ** rng.random())


def editable_inputs(cases: WorkloadCases) -> list[str]:
    """Inputs an edit may touch: floating tensors of the ``value`` role with elements that no output is
    written into. A ``fixed`` input (a table, a scale, a saved statistic: consistent with the others by
    declaration) is never edited: elements of another case there make inputs no model produces, on which
    an honest kernel that relies on the consistency (one that recomputes the forward instead of reading
    the saved log-sum-exp) and the reference disagree (H200 2026-12-02: FLUX's attention backward)."""
    problem = cases.problem
    inplace = {spec.inplace_of for spec in problem.outputs.values() if spec.inplace_of}
    first = cases.sets[0].inputs
    return [n for n, v in first.items()
            if n not in inplace and hasattr(v, "is_floating_point") and v.is_floating_point() and v.dim() and v.numel()
            and effective_domain(problem.inputs[n].domain, problem.inputs[n].dtype).role == "value"]


def _refresh_case(cases: WorkloadCases, k: int) -> Case:
    """A fresh case in place of set ``k``: new tensors, the set's own scalars (they cannot change in place)."""
    seed = derive_seed(cases.verify_seed, "refresh")
    fresh = make_case(cases.problem, cases.axes, seed, cases.device, cases.reference, cases.generator,
                      cases.problem.scalars_for(cases.workload))
    base = cases.sets[k].inputs
    if all(hasattr(fresh.inputs[n], "shape") or fresh.inputs[n] == v for n, v in base.items()):
        return fresh
    inputs = {n: fresh.inputs[n] if hasattr(v, "shape") else v for n, v in base.items()}
    return Case(seed, inputs, reference_outputs(cases.problem, cases.axes, cases.reference, inputs))


def edit_count(cases: WorkloadCases, name: str) -> int:
    """Elements an edit of input ``name`` overwrites: ``EDIT_ELEMENTS``, or 3 x the mismatches the
    tolerance admits (so an edit cannot hide among them), at most all."""
    numel = cases.sets[0].inputs[name].numel()
    ratio = cases.tolerance.max_mismatch_ratio or 0.0
    return min(numel, max(EDIT_ELEMENTS, math.ceil(3 * ratio * numel)))


def _edit(cases: WorkloadCases, refresh: Case, sample: int, name: str, gen: Any) -> PlannedEdit:
    import torch

    i = sample % len(cases.sets)
    numel = cases.sets[i].inputs[name].numel()
    index = torch.randint(numel, (edit_count(cases, name),), generator=gen, dtype=torch.int64)
    fresh = refresh.inputs[name]
    values = bit_view(fresh).reshape(-1)[index.to(fresh.device)].view(fresh.dtype)  # through the bits: float8 too
    return PlannedEdit(sample, i, name, index, values)


def draw_plan(cases: WorkloadCases, min_samples: int) -> TimedPlan:
    """The kept samples, edits and refresh of one workload's timing (module docstring)."""
    import torch

    rng = random.Random(cases.verify_seed)
    gen = torch.Generator().manual_seed(derive_seed(cases.verify_seed, "indices"))
    m = max(1, min_samples)
    keep = sorted({*rng.sample(range(m), min(KEEP_EARLY, m)), *(_late(rng, m) for _ in range(KEEP_LATE))})
    k = rng.randrange(len(cases.sets))
    refresh = _refresh_case(cases, k)
    names = editable_inputs(cases)
    at = sorted({*rng.sample(range(m), min(EDITS_EARLY, m)), *(_late(rng, m) for _ in range(EDITS_LATE))})
    edits = [_edit(cases, refresh, s, rng.choice(names), gen) for s in at] if names else []
    return TimedPlan(keep, edits, k, refresh)


def request(plan: TimedPlan, cases: WorkloadCases) -> dict[str, Any]:
    """The ``verify`` part of the timing request (solbench.worker.main)."""
    names = list(cases.sets[0].inputs)
    return {"keep": plan.keep,
            "edits": [{"sample": e.sample, "set": e.set, "input": names.index(e.input), "index": e.index,
                       "values": e.values} for e in plan.edits],
            "refresh": {"set": plan.refresh_set, "inputs": list(plan.refresh.inputs.values())}}


def reply_bytes(plan: TimedPlan) -> int:
    """Tensor bytes the kept and refresh outputs add to the timing reply, at most."""
    out = sum(v.numel() * v.element_size() for v in plan.refresh.expected.values())
    return (len(plan.keep) + 1) * (out + 4096)


def state(cases: WorkloadCases, plan: TimedPlan, i: int, sample: int) -> tuple[Case, int]:
    """Set ``i`` as timed sample ``sample`` saw it (the edits applied before it), with its
    reference; and how many edits that is."""

    edits = [e for e in plan.edits if e.set == i and e.sample <= sample]
    if not edits:
        return cases.sets[i], 0
    key = (i, len(edits))
    if key not in plan._state:
        base = cases.sets[i]
        inputs = apply_edits(base.inputs, [(e.input, e.index, e.values) for e in edits])
        plan._state.clear()  # one edited state at a time: the checks come sorted by set
        plan._state[key] = Case(base.seed, inputs, reference_outputs(cases.problem, cases.axes, cases.reference, inputs))
    return plan._state[key], len(edits)


def _prefetch_states(cases: WorkloadCases, plan: TimedPlan, wanted: list[tuple[int, int]]) -> None:
    """The edited states that ``wanted`` (set, sample) pairs saw, with their references made in one request to
    the problem host, where they fit one (:func:`solbench.engine.cases.batch_calls`); else :func:`state` makes
    them one at a time, as the record's memory reservation counts."""
    keys: dict[tuple[int, int], list[PlannedEdit]] = {}
    for i, sample in wanted:
        edits = [e for e in plan.edits if e.set == i and e.sample <= sample]
        if edits:
            keys[(i, len(edits))] = edits
    if len(keys) < 2 or batch_calls(cases.problem, cases.axes) < len(keys):
        return
    inputs = [apply_edits(cases.sets[i].inputs, [(e.input, e.index, e.values) for e in edits])
              for (i, _), edits in keys.items()]
    references = reference_outputs_many(cases.problem, cases.axes, cases.reference, inputs)
    plan._state.clear()
    for (key, _), made, expected in zip(keys.items(), inputs, references, strict=True):
        plan._state[key] = Case(cases.sets[key[0]].seed, made, expected)


def apply_edits(base: dict[str, Any], edits: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    """``base`` with the edits ``(input, flat index, values)`` written in order, exactly as the worker
    writes them (through the bits); an edited input is copied first, ``base`` is left as it is."""
    import torch

    inputs = dict(base)
    for name, index, values in edits:
        if inputs[name] is base[name]:
            inputs[name] = inputs[name].clone(memory_format=torch.contiguous_format)
        t = inputs[name]
        bit_view(t).view(-1)[index.to(t.device)] = bit_view(values.to(t.device))
    return inputs


def after_timing(cases: WorkloadCases, plan: TimedPlan, samples: int, i: int) -> dict[str, Any]:
    """The inputs of set ``i`` as a timing of ``samples`` samples left them: its edits applied, or the
    refresh data in the refresh set (every tensor input overwritten, its scalars kept)."""
    if i == plan.refresh_set:
        return dict(plan.refresh.inputs)
    edits = [(e.input, e.index, e.values) for e in plan.edits if e.set == i and e.sample < samples]
    return apply_edits(cases.sets[i].inputs, edits)


def _edited(n: int) -> str:
    return f", after {n} edit{'s' if n > 1 else ''} of its inputs in place" if n else ""


def _where(i: int, n: int, sample: int | None, edits: int) -> str:
    which = "its last" if sample is None else f"sample {sample + 1}, one of those checked at random"
    return f"timed call on set {i + 1} of {n} ({which}{_edited(edits)})"


def _kept(plan: TimedPlan, n_sets: int, samples: int, kept: Any) -> list[tuple[int, int, Any]]:
    """(sample, set, outputs) of the kept samples; every planned one that ran must be there."""
    if not isinstance(kept, list) or not all(isinstance(e, dict) for e in kept):
        raise MalformedReply("kept must be a list of objects")
    out = []
    for e in kept:
        s, i = e.get("sample"), e.get("set")
        if not isinstance(s, int) or s not in plan.keep or s >= samples or i != s % n_sets:
            raise MalformedReply(f"kept sample {s!r} of set {i!r} was not asked for")
        out.append((s, i, e.get("outputs")))
    if sorted(s for s, _, _ in out) != [s for s in plan.keep if s < samples]:
        raise MalformedReply("kept samples missing or repeated")
    return out


def _refresh_outputs(plan: TimedPlan, refresh: Any) -> Any:
    if not isinstance(refresh, dict) or refresh.get("set") != plan.refresh_set:
        raise MalformedReply("the refresh run's outputs are missing")
    return refresh.get("outputs")


def _same(a: Any, b: Any) -> bool:
    """Two output descriptions alike in every field, their values bitwise equal."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (type(a) is type(b) is torch.Tensor and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(bit_view(a), bit_view(b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def already_checked(done: list[tuple[Case, Any]], case: Case, outputs: Any) -> bool:
    """Whether these outputs, bitwise, were already checked against this very case (a kept sample
    equal to its set's last output: the verdict is the same, the float64 comparison is not redone)."""
    return any(c is case and _same(o, outputs) for c, o in done)


def sample_count(reply: dict[str, Any]) -> int:
    """How many timed samples a timing reply says ran (MalformedReply if that is not a count)."""
    samples = reply.get("samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise MalformedReply(f"samples is {samples!r}, not a count")
    return samples


def timed_checks(cases: WorkloadCases, plan: TimedPlan, reply: dict[str, Any]) -> list[tuple[str, Case, dict]]:
    """Every check of a timing reply: (where, expected case, ``{"outputs"?, "inputs_after"?}``), by set."""
    n = len(cases.sets)
    last, after, samples = reply.get("last_outputs"), reply.get("sets_after"), reply.get("samples")
    if not isinstance(last, list) or not isinstance(after, list) or len(last) != n or len(after) != n:
        raise MalformedReply("last_outputs and sets_after must have one entry per set")
    samples = sample_count(reply)
    kept = _kept(plan, n, samples, reply.get("kept"))
    k = plan.refresh_set
    checks: list[tuple[int, int, bool, dict]] = []  # (set, sample, the set's last?, what to check)
    for i in range(n):
        part = {} if last[i] is None else {"outputs": last[i]}
        if i != k:
            part["inputs_after"] = after[i]
        if part:
            checks.append((i, samples - 1, True, part))  # every applied edit is in the set's last output
    checks += [(i, s, False, {"outputs": o}) for s, i, o in kept]
    out = []
    _prefetch_states(cases, plan, [(i, s) for i, s, _, _ in checks])
    for i, s, is_last, part in sorted(checks, key=lambda c: (c[0], c[1])):
        case, edits = state(cases, plan, i, s)
        out.append((_where(i, n, None if is_last else s, edits), case, part))
    out.append((f"refresh check (set {k + 1} of {n} overwritten in place with new data after the timed samples, "
                "then run once more)", plan.refresh, {"outputs": _refresh_outputs(plan, reply.get("refresh")),
                                                      "inputs_after": after[k]}))
    return out
