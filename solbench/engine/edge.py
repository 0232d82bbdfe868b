"""Edge rounds: inputs from the edges of each input's value domain, checked like correctness rounds.

After the typical rounds and the timing, a candidate is called on inputs a numerically careless
kernel gets wrong while real models produce them: large magnitudes, large offsets (both signs),
tiny magnitudes, zeros, the non-finite values the domain allows, and the non-contiguous layouts it
allows (:mod:`solbench.data.domain`). Each round transforms a fresh typical case (the problem's own
inputs, its generator's included) at two shapes: the workload shrunk by the problem's ``test_axes``
("small", cheap: :func:`edge_shapes`) and, for the problem's smallest workload, the workload itself. Only ``value``
inputs change; indices, masks, scalars and ``fixed`` inputs stay as generated.

The reference decides what counts: a round whose reference output has more non-finite values than
the typical case's (it overflows too), underflows to all zeros, or vanishes within the problem's
atol (so zeros would pass), is skipped and says so. The tolerance's atol is scaled per output by the ratio of the round's largest finite reference
value to the typical case's (a GEMM on 1e3-sized inputs is judged on its own scale; never below the
problem's atol but in the tiny round); rtol is unchanged. Layout
rounds send the same values in another memory layout, so their expected outputs are the typical
case's.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from solbench.data import (
    FORMAT_MAX,
    Domain,
    Problem,
    Tolerance,
    Workload,
    effective_domain,
    layout_spec,
    make_inputs,
    physical,
)
from solbench.errors import ProblemError

_ROUND_KINDS = ("large", "offset", "offset_flipped", "tiny", "zeros", "specials", "permuted", "strided", "broadcast")
_SPECIAL_FRACTION = 0.01  # of an input's elements set to each legal special value
OFFSET_DRAWS = 3
"""Typical cases the offset rounds of a norm (tag ``norm``) run on at the small shape. Whether a
one-pass variance fails on bfloat16 rows shifted by 3000 depends on which rows land where few values
differ from the rest (measured: half the draws of vit_l16.layernorm's 9 rows, and of
flux1_dev.adaln_modulate's 16); three draws of both signs make it rare that none does. Other rounds,
and other families' offsets (a softmax's shift, attention's negative logits), fail or pass on any
draw, so they run once: the norms are cheap, the attention and GEMM rounds are not."""
_CACHE_ENTRIES = 4  # (problem, shape, seed) edge sets kept: every candidate of a problem sees the same ones


@dataclass
class EdgeRound:
    """One edge round at one shape: logical inputs and expected outputs, what is sent, or why skipped."""

    name: str  # e.g. "offset 3000", "permuted"
    shape: str  # "small" or the workload's name
    axes: dict[str, int]
    inputs: dict[str, Any] = field(default_factory=dict)  # logical values (what the reference saw)
    expected: dict[str, Any] = field(default_factory=dict)
    sent: list[Any] = field(default_factory=list)  # in memory layout order (what the worker receives)
    layouts: list[Any] | None = None  # per input: None or {"kind": ..., ...} for the worker to rebuild the view
    atol: dict[str, float] = field(default_factory=dict)  # per output
    skipped: str | None = None

    def entry(self, reason: str | None = None) -> dict[str, Any]:
        return {"name": self.name, "shape": self.shape, "axes": self.axes, "reason": reason or self.skipped}

    def sent_bytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in [*self.sent, *self.expected.values()]
                   if hasattr(v, "element_size"))


_cache: OrderedDict[tuple, list[EdgeRound]] = OrderedDict()
_cache_lock = threading.Lock()  # the runner's lanes prepare cases in threads of their own


def domains(problem: Problem) -> dict[str, Domain]:
    """Every input's effective domain (declared, with the dtype's defaults)."""
    return {n: effective_domain(t.domain, t.dtype, t.shape is None) for n, t in problem.inputs.items()}


def edge_shapes(problem: Problem, workload: Workload, axes: dict[str, int]) -> list[tuple[str, dict[str, int]]]:
    """(label, axes) of the shapes a workload's edge rounds run at: its small shape (the workload with
    the problem's test_axes applied; without test_axes, or where that breaks a constraint, the smallest
    workload's shape shrunk by them), and its own when it is the problem's smallest workload (one
    real workload per problem)."""
    small = problem.resolve_axes(workload, overrides=problem.test_axes)
    if not problem.test_axes or _violates(problem, small):
        small = problem.test_axes_resolved()
    shapes = [("small", small)]
    smallest = min(problem.workloads, key=lambda w: problem.auto_bytes(problem.resolve_axes(w)))
    if workload.name == smallest.name and axes != small:
        shapes.append((workload.name, dict(axes)))
    return shapes


def _violates(problem: Problem, axes: dict[str, int]) -> bool:
    from solbench.data import expr

    return not all(expr.holds(c, axes) for c in problem.constraints)


def prepare_edge(problem: Problem, workload: Workload, axes: dict[str, int], *, base_seed: int, device: str,
                 reference: Callable[[dict[str, int], dict[str, Any]], dict[str, Any]],
                 gen_fn: Callable[..., dict] | None, tolerance: Tolerance, derive: Callable[..., int]) -> list[EdgeRound]:
    """The edge rounds of a workload, at each of :func:`edge_shapes` (cached across candidates).

    ``reference(axes, inputs)``: the reference outputs, checked against the declaration
    (:func:`solbench.engine.cases.reference_outputs`); ``derive``: the run's seed derivation."""
    rounds: list[EdgeRound] = []
    scalars = problem.scalars_for(workload)
    for label, shape_axes in edge_shapes(problem, workload, axes):
        key = (problem.name, tuple(sorted(shape_axes.items())), hash(problem.model_dump_json()),
               tuple(sorted(scalars.items())), str(problem.path), base_seed, device, label)
        with _cache_lock:
            made = _cache.get(key)
        if made is None:  # two lanes may both make it; the same seeds give the same rounds
            seed = derive(base_seed, problem.name, "edge", *key[1])
            made = _rounds_at(problem, label, shape_axes, seed, device, reference, gen_fn, tolerance, scalars)
        with _cache_lock:
            _cache[key] = made
            _cache.move_to_end(key)
            while len(_cache) > _CACHE_ENTRIES:
                _cache.popitem(last=False)
        rounds.extend(made)
    return rounds


def _rounds_at(problem: Problem, label: str, axes: dict[str, int], seed: int, device: str,
               reference: Callable[..., dict[str, Any]], gen_fn: Callable[..., dict] | None, tolerance: Tolerance,
               scalars: dict[str, Any]) -> list[EdgeRound]:
    """Every round kind on one typical case; for a norm (tag ``norm``) at the small shape, the offset
    rounds on more cases (:data:`OFFSET_DRAWS`)."""
    out = []
    offsets = any(d.role == "value" and d.max_offset for d in domains(problem).values())
    for draw in range(OFFSET_DRAWS if label == "small" and offsets and "norm" in problem.tags else 1):
        kinds = _ROUND_KINDS if draw == 0 else ("offset", "offset_flipped")
        base = make_inputs(problem, axes, seed + 1000 * draw, device=device, generator_fn=gen_fn, scalars=scalars)
        out += _rounds_on(problem, label, axes, base, kinds, seed + 1000 * draw, reference, tolerance,
                          f" (draw {draw + 1})" if draw else "")
    return out


def _rounds_on(problem: Problem, label: str, axes: dict[str, int], base: dict[str, Any], kinds: tuple[str, ...],
               seed: int, reference: Callable[..., dict[str, Any]], tolerance: Tolerance, suffix: str
               ) -> list[EdgeRound]:
    base_ref = reference(axes, base)
    base_stats = {n: _stats(t) for n, t in base_ref.items() if t.dtype.is_floating_point}
    doms = domains(problem)
    out = []
    for i, kind in enumerate(kinds):
        made = _make_round(kind, problem, doms, base, seed + i)
        if made is None:
            continue
        name, inputs, layouts = made
        r = EdgeRound(name + suffix, label, dict(axes), inputs=inputs, layouts=layouts)
        if kind in ("permuted", "strided"):  # the same values in another layout: the typical outputs hold
            r.expected, r.atol = base_ref, {n: tolerance.atol for n in base_ref}
        else:
            _judge(r, axes, reference, base_stats, tolerance, special=kind == "specials", zeros=kind == "zeros")
        r.sent = [physical(v, lay) for v, lay in zip(inputs.values(), layouts or [None] * len(inputs), strict=True)]
        if r.skipped:
            r.inputs, r.expected, r.sent = {}, {}, []
        out.append(r)
    return out


def _judge(r: EdgeRound, axes: dict[str, int], reference: Callable[..., dict[str, Any]],
           base: dict[str, tuple[float, float, float]], tolerance: Tolerance, special: bool, zeros: bool) -> None:
    """Run the reference on the round's inputs; skip the round where its own output is not meaningful."""
    try:
        r.expected = reference(axes, r.inputs)
    except ProblemError as err:
        r.skipped = f"the reference fails on these inputs: {err}"[:300]
        return
    for name, ref in r.expected.items():
        if not ref.dtype.is_floating_point:
            r.atol[name] = tolerance.atol
            continue
        stats, typical = _stats(ref), base[name]
        why = _not_meaningful(stats, typical, ref.numel(), special, zeros)
        if why is None and not r.name.startswith("tiny") and stats[2] <= tolerance.atol < typical[2]:
            why = f"the reference's own output vanishes (largest |value| {stats[2]:.3g} within atol {tolerance.atol:g})"
        if why:
            r.skipped = f"output {name!r}: {why} at {str(ref.dtype).removeprefix('torch.')}"
            return
        ratio = stats[2] / typical[2] if stats[2] > 0 and typical[2] > 0 and math.isfinite(stats[2] / typical[2]) else 1.0
        # The problem's atol is its noise floor for typical outputs: an edge round keeps at least that,
        # but the tiny round, whose outputs are tiny, is judged at its own scale.
        r.atol[name] = tolerance.atol * (ratio if r.name.startswith("tiny") else max(ratio, 1.0))


def _stats(t: Any) -> tuple[float, float, float]:
    """(fraction of non-finite values, fraction of non-zero finite values, largest finite |value|)."""
    import torch

    v = t.detach() if t.dtype in (torch.float32, torch.float64) else t.detach().float()
    finite = torch.isfinite(v)
    n = max(v.numel(), 1)
    count = int(finite.sum())
    clean = torch.where(finite, v, torch.zeros((), dtype=v.dtype, device=v.device))
    return (n - count) / n, int((clean != 0).sum()) / n, float(clean.abs().max()) if v.numel() else 0.0


def _not_meaningful(stats: tuple[float, float, float], base: tuple[float, float, float], numel: int,
                    special: bool, zeros: bool) -> str | None:
    bad, nonzero = stats[0], stats[1]
    if special:
        return "the reference's output is all non-finite" if numel and bad == 1.0 else None
    if bad > base[0]:
        return f"the reference's own output overflows ({bad:.2%} of its values non-finite)"
    if not zeros and nonzero == 0 and base[1] > 0:
        return "the reference's own output underflows to zero"
    return None


def _broadcast_values(x: Any) -> Any:
    """The values a stride-0 first dim carries: the first slice, repeated."""
    return x[:1].expand(x.shape).contiguous() if x.dim() else x.clone()


# --- the transforms ------------------------------------------------------------------------

def _value_names(problem: Problem, doms: dict[str, Domain], base: dict[str, Any], want: Callable[[Domain], Any]
                 ) -> list[str]:
    import torch

    return [n for n, d in doms.items() if d.role == "value" and isinstance(base[n], torch.Tensor)
            and base[n].numel() and want(d)]


def _make_round(kind: str, problem: Problem, doms: dict[str, Domain], base: dict[str, Any], seed: int
                ) -> tuple[str, dict[str, Any], list[Any] | None] | None:
    """(name, logical inputs, layouts or None) of one round kind, or None where no input allows it."""
    select, transform, label = _KINDS[kind]
    names = _value_names(problem, doms, base, select)
    if not names:
        return None
    inputs = dict(base)
    for n in names:
        inputs[n] = transform(base[n], doms[n], seed)
    if kind in ("permuted", "strided", "broadcast"):
        layouts = [layout_spec(kind, base[n]) if n in names else None for n in base]
        return kind, inputs, layouts
    return label(names, doms), inputs, None


def _cast(values: Any, like: Any) -> Any:
    """float32 values as ``like``'s dtype, clamped to the format's range (FP8 casts overflow to NaN)."""
    top = FORMAT_MAX.get(str(like.dtype).removeprefix("torch."))
    if top is not None and top < 1e38:
        values = values.clamp(-top, top)
    return values.to(like.dtype)


def _scaled_to(x: Any, target: float) -> Any:
    peak = float(x.float().abs().max())
    return x.clone() if peak == 0 or not math.isfinite(peak) else _cast(x.float() * (target / peak), x)


def _zeroed(x: Any) -> Any:
    """Every other slice along the first dim larger than 1 set to zero (the whole tensor if none is)."""
    y = x.clone()
    dim = next((i for i, s in enumerate(x.shape) if s > 1), None)
    if dim is None:
        return y.zero_()
    y.narrow(dim, 0, x.shape[dim]).unfold(dim, 1, 2).zero_()
    return y


def _with_specials(x: Any, d: Domain, seed: int) -> Any:
    import torch

    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    y = x.clone().reshape(-1)
    count = max(1, int(y.numel() * _SPECIAL_FRACTION))
    values = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
    for s in d.specials:
        spots = torch.randint(0, y.numel(), (count,), generator=g).to(y.device)
        y[spots] = values[s]
    return y.reshape(x.shape)


def _name_by_value(prefix: str, values: dict[str, float]) -> str:
    """'offset 3000' when every input gets the same figure, else 'offset q -30, k 30'."""
    distinct = set(values.values())
    if len(distinct) == 1:
        return f"{prefix} {distinct.pop():g}"
    return f"{prefix} " + ", ".join(f"{n} {v:g}" for n, v in values.items())


_KINDS: dict[str, tuple[Callable[[Domain], Any], Callable[[Any, Domain, int], Any], Callable[..., str]]] = {
    "large": (lambda d: d.max_abs, lambda x, d, s: _scaled_to(x, d.max_abs),
              lambda ns, ds: _name_by_value("large", {n: ds[n].max_abs for n in ns})),
    "offset": (lambda d: d.max_offset, lambda x, d, s: _cast(x.float() + d.max_offset, x),
               lambda ns, ds: _name_by_value("offset", {n: ds[n].max_offset for n in ns})),
    "offset_flipped": (lambda d: d.max_offset, lambda x, d, s: _cast(x.float() - d.max_offset, x),
                       lambda ns, ds: _name_by_value("offset", {n: -ds[n].max_offset for n in ns})),
    "tiny": (lambda d: d.tiny, lambda x, d, s: _scaled_to(x, float(d.tiny)),
             lambda ns, ds: _name_by_value("tiny", {n: float(ds[n].tiny) for n in ns})),
    "zeros": (lambda d: d.zeros, lambda x, d, s: _zeroed(x), lambda ns, ds: "zeros"),
    "specials": (lambda d: d.specials, _with_specials,
                 lambda ns, ds: "specials " + ", ".join(sorted({s for n in ns for s in ds[n].specials}))),
    "permuted": (lambda d: "permuted" in d.layouts, lambda x, d, s: x, lambda ns, ds: "permuted"),
    "strided": (lambda d: "strided" in d.layouts, lambda x, d, s: x, lambda ns, ds: "strided"),
    "broadcast": (lambda d: "broadcast" in d.layouts, lambda x, d, s: _broadcast_values(x), lambda ns, ds: "broadcast"),
}
