"""Model roll-up: compose a model's per-op problems into one decoder layer.

The problems of a model family tagged ``decoder-layer`` together make one layer, each op counted
``runs_per_layer`` times. :func:`model_rollup` evaluates every such problem's FLOPs and bytes at one
scenario (a decode step or a prefill) and puts them on a hardware spec's roofline: what the layer
costs at the speed of light, which op dominates, and which roof binds each op.

Axis binding. Problems name their size axes by convention, and a scenario gives them values:

- ``T``: tokens processed (decode: one per sequence, so ``T = batch``).
- ``B``: sequences. An op with no ``S`` axis that still has ``B`` is a per-token op over sequences
  (the KV-cache append); in a prefill it runs once per token, so it gets ``B = tokens``, and its
  ``L`` is one page of a paged cache (``PAGE_SLOTS``, as vLLM's blocks): each token writes one slot
  of its own block, and no cache of ``tokens x prompt`` slots is allocated to measure it.
- ``S``: prompt length per sequence (prefill only).
- ``L``: KV positions per sequence: the context at decode, the prompt length at prefill (a
  per-token op's page at prefill).

A problem tagged ``decode`` and not ``prefill`` joins decode scenarios only (and vice versa);
problems with neither tag, or both, join both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from solbench.data.problem import Problem, Workload, find_problems, load_problem
from solbench.data.roofline import point
from solbench.errors import SolbenchError
from solbench.units import si

if TYPE_CHECKING:
    import pandas as pd

    from solbench.data.hardware import HardwareSpec

Phase = Literal["decode", "prefill"]
LAYER_TAG = "decoder-layer"
PAGE_SLOTS = 16  # slots per cache block of a per-token op at prefill (vLLM's default block size)
COLUMNS = ["op", "problem", "runs_per_layer", "flops", "bytes", "arithmetic_intensity", "t_ideal_s", "bound",
           "time_share"]


class RollupError(SolbenchError):
    """A roll-up cannot be built (no layer problems, an axis it cannot bind, a bad scenario)."""


@dataclass(frozen=True)
class Scenario:
    """One pass of the layer: a decode step of ``batch`` sequences, or a prefill of ``tokens`` tokens."""

    phase: Phase
    tokens: int
    batch: int
    context: int

    @property
    def name(self) -> str:
        if self.phase == "decode":
            return f"decode_b{self.batch}_kv{self.context}"
        return f"prefill_b{self.batch}_s{self.tokens // self.batch}"

    def axes_for(self, problem: Problem) -> dict[str, int]:
        """Values for the problem's var axes (see the module docstring)."""
        seq = 1 if self.phase == "decode" else self.tokens // self.batch
        per_token_rows = self.phase == "prefill" and "S" not in problem.axes
        known = {
            "T": self.tokens,
            "B": self.tokens if per_token_rows else self.batch,
            "S": seq,
            "L": self.context if self.phase == "decode" else (PAGE_SLOTS if per_token_rows else seq),
        }
        unknown = [a for a in problem.var_axes if a not in known]
        if unknown:
            raise RollupError(f"{problem.name}: the roll-up cannot bind var axes {unknown} (it binds "
                              f"{', '.join(known)}); rename them or leave the problem out of the '{LAYER_TAG}' tag")
        return {a: known[a] for a in problem.var_axes}


def workload_at(problem: Problem, sc: Scenario) -> Workload | None:
    """The problem's workload at the scenario (same resolved axes), or None when it has none."""
    wanted = problem.resolve_axes(sc.axes_for(problem))
    return next((w for w in problem.workloads if problem.resolve_axes(w) == wanted), None)


def scenario(tokens: int, phase: Phase = "prefill", batch: int | None = None, context: int | None = None) -> Scenario:
    """Build a scenario. Decode: ``tokens`` new tokens, one per sequence, each over ``context`` cached
    positions. Prefill: ``batch`` prompts of ``tokens / batch`` tokens each."""
    if phase not in ("decode", "prefill"):
        raise RollupError(f"phase {phase!r}: use 'decode' or 'prefill'")
    if tokens < 1:
        raise RollupError(f"tokens={tokens}: must be at least 1")
    if phase == "decode":
        batch = tokens if batch is None else batch
        if batch != tokens:
            raise RollupError(f"decode with tokens={tokens}, batch={batch}: a decode step has one token per sequence")
        if context is None or context < 1:
            raise RollupError("decode needs context (the KV positions each sequence attends), e.g. context=8192")
        return Scenario("decode", tokens, batch, context)
    batch = 1 if batch is None else batch
    if batch < 1 or tokens % batch:
        raise RollupError(f"prefill with tokens={tokens}, batch={batch}: tokens must be a multiple of batch")
    if context is not None and context != tokens // batch:
        raise RollupError(f"prefill context is the prompt length ({tokens // batch}); leave context out")
    return Scenario("prefill", tokens, batch, tokens // batch)


def _family(problem: Problem) -> str:
    return problem.name.split(".", 1)[0]


def _op(problem: Problem) -> str:
    return problem.name.split(".", 1)[1]


def _load_all(problems: Iterable[Problem] | str | Path) -> list[Problem]:
    if isinstance(problems, (str, Path)):
        return [load_problem(p) for p in find_problems(problems)]
    return list(problems)


def layer_problems(problems: Iterable[Problem] | str | Path, model: str) -> list[Problem]:
    """The problems of ``model`` (family name, e.g. ``llama3_1_8b``, or Hugging Face id) in its layer."""
    chosen = [p for p in _load_all(problems)
              if model in (_family(p), p.source.model) and LAYER_TAG in p.tags]
    if not chosen:
        raise RollupError(f"no problem of model {model!r} is tagged '{LAYER_TAG}': pass the family name "
                          "(e.g. llama3_1_8b) or the Hugging Face id of problems that have that tag")
    missing = [p.name for p in chosen if p.runs_per_layer is None]
    if missing:
        raise RollupError(f"{', '.join(missing)}: tagged '{LAYER_TAG}' but no runs_per_layer; add it to the problem")
    return sorted(chosen, key=lambda p: p.name)


def in_phase(problem: Problem, phase: Phase) -> bool:
    """Whether the problem runs in this phase (decode-only and prefill-only ops are tagged so)."""
    other = "prefill" if phase == "decode" else "decode"
    return not (other in problem.tags and phase not in problem.tags)


def model_rollup(
    problems: Iterable[Problem] | str | Path,
    model: str,
    tokens: int,
    *,
    phase: Phase = "prefill",
    batch: int | None = None,
    context: int | None = None,
    spec: HardwareSpec | str = "h200_sxm",
    order: Iterable[str] = (),
) -> pd.DataFrame:
    """One decoder layer of ``model`` at a scenario, one row per op: the ops named in ``order``
    first (e.g. the layer's data flow), then the rest by name.

    Columns: ``op`` (the problem name after the family), ``problem``, ``runs_per_layer``, and for
    the whole layer (one run times runs_per_layer) ``flops``, ``bytes``, ``arithmetic_intensity``,
    ``t_ideal_s`` (each op at its own roofline on ``spec``), ``bound`` and ``time_share`` (of the
    layer's summed ideal time). ``df.attrs`` holds the scenario, the spec id and the compute peak.
    """
    import pandas as pd

    from solbench.data.hardware import load_spec

    hw = load_spec(spec) if isinstance(spec, str) else spec
    sc = scenario(tokens, phase, batch, context)
    rank = {op: i for i, op in enumerate(order)}
    chosen = sorted(layer_problems(problems, model), key=lambda p: (rank.get(_op(p), len(rank)), p.name))
    rows = []
    for p in chosen:
        if not in_phase(p, sc.phase):
            continue
        axes = p.resolve_axes(sc.axes_for(p))
        runs = p.runs_per_layer or 1
        pt = point(p.flops_for(axes) * runs, p.bytes_for(axes) * runs, p.compute_dtype, hw, sc.name)
        rows.append({"op": _op(p), "problem": p.name, "runs_per_layer": runs, "flops": pt.flops,
                     "bytes": pt.bytes, "arithmetic_intensity": pt.arithmetic_intensity,
                     "t_ideal_s": pt.t_ideal_s, "bound": pt.bound})
    df = pd.DataFrame(rows, columns=COLUMNS[:-1])
    df["time_share"] = df["t_ideal_s"] / df["t_ideal_s"].sum()
    df.attrs.update({"model": model, "scenario": sc.name, "phase": sc.phase, "tokens": sc.tokens,
                     "spec": hw.id, "peak_flops": hw.peak("bfloat16"), "memory_bandwidth": hw.memory_bandwidth})
    return df


def ideal_mfu(df: pd.DataFrame) -> float:
    """Model FLOP utilisation if every op ran exactly at its roofline: layer FLOPs / (time * bf16 peak)."""
    return float(df["flops"].sum() / (df["t_ideal_s"].sum() * df.attrs["peak_flops"]))


# --- markdown ---------------------------------------------------------------------------------

def _intensity(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def rollup_markdown(df: pd.DataFrame) -> str:
    """The roll-up as a markdown table with a layer total row and a summary line."""
    head = ["op", "problem", "runs/layer", "FLOPs", "bytes", "FLOP/B", "T_ideal", "bound", "share"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in df.itertuples(index=False):
        lines.append(f"| {r.op} | `{r.problem}` | {r.runs_per_layer} | {si(r.flops, 'FLOP')} | {si(r.bytes, 'B')} | "
                     f"{_intensity(r.arithmetic_intensity)} | {si(r.t_ideal_s, 's')} | {r.bound} | {r.time_share:.1%} |")
    flops, nbytes, t = df["flops"].sum(), df["bytes"].sum(), df["t_ideal_s"].sum()
    lines.append(f"| **layer** | | | **{si(flops, 'FLOP')}** | **{si(nbytes, 'B')}** | {_intensity(flops / nbytes)} | "
                 f"**{si(t, 's')}** | | 100% |")
    a = df.attrs
    lines.append("")
    tokens = f"{a['tokens']} token" + ("s" if a["tokens"] > 1 else "")
    lines.append(f"{a['scenario']} ({tokens}) on `{a['spec']}`: every op at its own roofline gives "
                 f"{si(t, 's')} per layer, an ideal MFU of {ideal_mfu(df):.1%} of the bf16 peak.")
    return "\n".join(lines)


_BLOCK = re.compile(r"(<!-- rollup (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /rollup -->)", re.S)


def _block_rollup(args: str, problems: list[Problem]) -> pd.DataFrame:
    kv = dict(item.split("=", 1) for item in args.split())
    try:
        return model_rollup(problems, kv["model"], int(kv["tokens"]), phase=kv.get("phase", "prefill"),  # type: ignore[arg-type]
                            batch=int(kv["batch"]) if "batch" in kv else None,
                            context=int(kv["context"]) if "context" in kv else None, spec=kv.get("spec", "h200_sxm"),
                            order=kv["order"].split(",") if "order" in kv else ())
    except (KeyError, ValueError) as err:
        raise RollupError(f"rollup marker '{args}': needs model=... tokens=N [phase= batch= context= spec= order=op,op,...] "
                          f"({err})") from None


def render_markdown(text: str, problems: Iterable[Problem] | str | Path) -> str:
    """Regenerate every ``<!-- rollup model=... tokens=... -->`` ... ``<!-- /rollup -->`` block."""
    loaded = _load_all(problems)
    return _BLOCK.sub(lambda m: f"{m.group(1)}{rollup_markdown(_block_rollup(m.group('args'), loaded))}\n"
                                f"{m.group(4)}", text)


def update_markdown(path: str | Path, problems: Iterable[Problem] | str | Path, check: bool = False) -> bool:
    """Rewrite the roll-up blocks of a markdown file; returns whether anything changed (check: write nothing)."""
    path = Path(path)
    if not path.is_file():
        raise RollupError(f"{path}: not found; pass a markdown file with <!-- rollup ... --> blocks")
    old = path.read_text(encoding="utf-8")
    new = render_markdown(old, problems)
    if new != old and not check:
        path.write_text(new, encoding="utf-8")
    return new != old

