"""The problem file (v1): pydantic models, loading, and every check that needs no execution.

A problem is ``problems/<family>/<op>/problem.yaml`` plus the reference module it names. Loading
never imports the reference: it is parsed with :mod:`ast` to check the function exists.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from solbench.data import expr as _expr
from solbench.data.domain import Domain, domain_errors
from solbench.data.dtypes import DTYPES, ITEMSIZE, PEAK_KEYS
from solbench.data.yamlio import checked_model, read_yaml_file
from solbench.errors import ExpressionError, ProblemError, did_you_mean

Scalar = int | float | bool
_NAME_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)+$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Workload names and tags reach terminals, file names and URLs: a letter or digit, then letters, digits, _ . -
_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_MAX_NAME = 128
MAX_TENSOR_BYTES = 1 << 40
"""The most one tensor, or one workload's inputs and outputs together, may hold: 1 TiB, several times
the memory of any GPU; a shape past it is a typo or an attack, refused before anything is allocated."""
_MAX_SOURCE_BYTES = 1 << 20  # a reference or generator file; the shipped ones are a few KB


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Axis(_Strict):
    """One named dimension. ``const``: fixed value; ``var``: set by each workload; ``expr``: computed."""

    type: Literal["const", "var", "expr"]
    value: int | None = None
    expr: str | None = None
    description: str = ""


class TensorSpec(_Strict):
    """An input or output. ``shape: null`` is a Python scalar (inputs only), given by ``value``."""

    shape: list[int | str] | None
    dtype: str
    value: Scalar | None = None
    description: str = ""
    inplace_of: str | None = Field(
        default=None,
        description="outputs only: the input this output is written into in place (e.g. a KV cache)",
    )
    domain: Domain | None = Field(
        default=None,
        description="inputs only: the values and layouts real models give it, which the edge rounds test "
                    "(solbench.data.domain; defaults per dtype when left out)",
    )

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        if v not in DTYPES:
            raise ValueError(f"unknown dtype {v!r} (known: {', '.join(DTYPES)})")
        return v


MISMATCH_WITHOUT_REASON = 0.01
"""The largest ``max_mismatch_ratio`` a problem may declare without a ``mismatch_reason``."""


class Tolerance(_Strict):
    """Elementwise check ``|out - ref| <= atol + rtol * |ref|``."""

    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    max_mismatch_ratio: float = Field(
        default=0.0, ge=0, le=0.5,
        description="fraction of elements allowed outside the bound (low-precision problems only); "
                    "above 0.01 it needs a mismatch_reason",
    )
    mismatch_reason: str = Field(default="", description="why more than 1% of elements may miss the bound")


class ToleranceOverride(_Strict):
    atol: float | None = Field(default=None, ge=0)
    rtol: float | None = Field(default=None, ge=0)
    max_mismatch_ratio: float | None = Field(default=None, ge=0, le=0.5)
    mismatch_reason: str | None = None


class Workload(_Strict):
    name: str
    axes: dict[str, int] = Field(default_factory=dict)
    inputs: dict[str, Scalar] = Field(
        default_factory=dict, description="this workload's values of scalar inputs (shape null), by name")
    tolerance: ToleranceOverride | None = None
    description: str = ""


class Source(_Strict):
    model: str
    module: str | None = None
    config: dict[str, Any] | None = None
    note: str | None = None


class Problem(_Strict):
    """A problem file, validated. Use :func:`load_problem` to read one."""

    name: str
    description: str
    source: Source
    tags: list[str] = Field(default_factory=list)
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    input_generator: str | None = Field(
        default=None,
        description="file.py:function returning some or all inputs; the rest are random normal",
    )
    flops: str | int | float | None = Field(default=None, description="expression over axes, or 'auto'; "
                                                                     "omitted when `cost` is given")
    bytes: str | int | float | None = Field(default=None, description="expression over axes, or 'auto'; "
                                                                     "omitted when `cost` is given")
    cost: str | None = Field(
        default=None,
        description="file.py:function, cost(axes, inputs) -> {'flops': int, 'bytes': int} on a workload's actual "
                    "inputs (data-dependent work: paged or ragged attention, MoE routing); replaces flops and bytes",
    )
    constraints: list[str] = Field(default_factory=list, description="relations between axes that every "
                                                                      "workload must satisfy, e.g. 'P >= B * 2'")
    compute_dtype: str
    tolerance: Tolerance
    workloads: list[Workload] = Field(min_length=1)
    runs_per_layer: int | None = Field(default=None, ge=1, description="times this op runs per model layer")
    test_axes: dict[str, int] = Field(
        default_factory=dict,
        description="axis values (var or const) that shrink the problem for quick CPU tests",
    )
    measured: dict[Literal["flops", "bytes"], str] = Field(
        default_factory=dict,
        description="why the counters of a profiled run (`solbench profile`) differ from `flops` or `bytes` by more "
                    "than 10%, per quantity: `validate --measured` shows it and counts that disagreement as explained",
    )
    notes: str = ""

    _path: Path | None = PrivateAttr(default=None)

    # --- locations -------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        """The problem.yaml this was loaded from (None when built in memory)."""
        return self._path

    @property
    def folder(self) -> Path:
        return self._path.parent if self._path else Path.cwd()

    def _split_ref(self, ref: str) -> tuple[Path, str]:
        file, _, func = ref.rpartition(":")
        return self.folder / file, func

    @property
    def reference_file(self) -> Path:
        return self._split_ref(self.reference)[0]

    @property
    def reference_function(self) -> str:
        return self._split_ref(self.reference)[1]

    @property
    def generator_file(self) -> Path | None:
        return self._split_ref(self.input_generator)[0] if self.input_generator else None

    @property
    def generator_function(self) -> str | None:
        return self._split_ref(self.input_generator)[1] if self.input_generator else None

    @property
    def cost_file(self) -> Path | None:
        return self._split_ref(self.cost)[0] if self.cost else None

    @property
    def cost_function(self) -> str | None:
        return self._split_ref(self.cost)[1] if self.cost else None

    # --- shapes and sizes ------------------------------------------------------------------
    @cached_property
    def var_axes(self) -> list[str]:
        return [n for n, a in self.axes.items() if a.type == "var"]

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        names = [w.name for w in self.workloads]
        raise ProblemError([f"{self.name}: no workload {name!r}{did_you_mean(name, names)} (workloads: "
                            f"{', '.join(names)})"])

    def resolve_axes(self, values: dict[str, int] | Workload, overrides: dict[str, int] | None = None) -> dict[str, int]:
        """All axis values (const, var, expr) for a workload or a dict of var values.

        ``overrides`` replaces const or var values (used to shrink problems for tests).
        """
        var_values = values.axes if isinstance(values, Workload) else dict(values)
        overrides = overrides or {}
        env: dict[str, int] = {}
        for n, a in self.axes.items():
            if n in overrides and a.type != "expr":
                env[n] = int(overrides[n])
            elif a.type == "const":
                env[n] = int(a.value)  # type: ignore[arg-type]
            elif a.type == "var":
                if n not in var_values:
                    raise ProblemError([f"{self.name}: axis {n!r} needs a value"])
                env[n] = int(var_values[n])
        pending = {n: a.expr for n, a in self.axes.items() if a.type == "expr"}
        while pending:
            progressed = False
            for n, e in list(pending.items()):
                if _expr.names(e) <= env.keys():  # type: ignore[arg-type]
                    env[n] = _as_size(_expr.evaluate(e, env), f"axis {n!r} = {e!r}")  # type: ignore[arg-type]
                    del pending[n]
                    progressed = True
            if not progressed:
                raise ProblemError([f"{self.name}: expr axes {sorted(pending)} depend on each other or on unknown names"])
        return env

    def test_axes_resolved(self) -> dict[str, int]:
        """Small axis values for quick tests: the smallest workload, shrunk by ``test_axes``."""
        smallest = min(self.workloads, key=lambda w: self.auto_bytes(self.resolve_axes(w)))
        return self.resolve_axes(smallest, overrides=self.test_axes)

    def shape(self, tensor: str, axes: dict[str, int]) -> tuple[int, ...] | None:
        spec = self.inputs.get(tensor) or self.outputs[tensor]
        if spec.shape is None:
            return None
        return tuple(_as_size(_expr.evaluate(d, axes), f"{tensor} shape {d!r}") for d in spec.shape)

    def auto_bytes(self, axes: dict[str, int]) -> int:
        """Each input read once plus each output written once, at its own dtype; scalars 0."""
        return self.declared_bytes(self.inputs, axes) + self.declared_bytes(self.outputs, axes)

    def declared_bytes(self, tensors: dict[str, Any], axes: dict[str, int]) -> int:
        """The bytes of these declared tensors (``self.inputs``, ``self.outputs`` or part of them) at
        ``axes``, each at its own dtype; scalars 0."""
        total = 0
        for name, spec in tensors.items():
            shp = self.shape(name, axes)
            if shp is not None:
                total += math.prod(shp) * ITEMSIZE[spec.dtype]
        return total

    def scalars_for(self, workload: Workload | str | None) -> dict[str, Scalar]:
        """Every scalar input's value for a workload: the workload's own, else the declared one."""
        w = self.workload(workload) if isinstance(workload, str) else workload
        own = w.inputs if w is not None else {}
        return {n: own.get(n, t.value) for n, t in self.inputs.items() if t.shape is None}  # type: ignore[misc]

    @property
    def work_runs_code(self) -> bool:
        """Whether FLOPs or bytes come from the problem's own code (a cost hook, ``flops: auto``): then
        they are computed in its sandboxed host (:mod:`solbench.engine.work`), never in this layer."""
        return self.cost is not None or self.flops == "auto"

    def formula_work(self, axes: dict[str, int]) -> tuple[int, int]:
        """(FLOPs, bytes) from the formulas; ProblemError for a problem whose work its code computes."""
        return self.flops_for(axes), self.bytes_for(axes)

    def bytes_for(self, axes: dict[str, int]) -> int:
        """Bytes from the ``bytes`` formula (or ``auto``); a cost hook's problem: ProblemError."""
        if self.cost is not None:
            raise self._needs_code("bytes", f"its cost hook {self.cost}")
        if self.bytes == "auto":
            return self.auto_bytes(axes)
        return int(_expr.evaluate(self.bytes, axes))  # type: ignore[arg-type]

    def flops_for(self, axes: dict[str, int]) -> int:
        """FLOPs from the ``flops`` formula; a cost hook's or ``flops: auto`` problem: ProblemError."""
        if self.work_runs_code:
            raise self._needs_code("flops", f"its cost hook {self.cost}" if self.cost else "`flops: auto` (its "
                                   "reference under FlopCounterMode)")
        return int(_expr.evaluate(self.flops, axes))  # type: ignore[arg-type]

    def _needs_code(self, key: str, source: str) -> ProblemError:
        return ProblemError([f"{self.path or self.name}: {key} come from {source}, which runs only in the problem's "
                             "sandboxed host: use solbench.engine.work (solbench.workload_point)"])

    def tolerance_for(self, workload: Workload | str) -> Tolerance:
        w = self.workload(workload) if isinstance(workload, str) else workload
        if w.tolerance is None:
            return self.tolerance
        upd = {k: v for k, v in w.tolerance.model_dump().items() if v is not None}
        return self.tolerance.model_copy(update=upd)


def _size_error(value: object) -> str | None:
    """Why a declared size (axis value, shape entry) is not one; None when it is."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return f"{_value_text(value)} must be a positive integer"
    if value >= _expr.LIMIT:
        return f"{_value_text(value)} is too large (sizes must be below 2^63)"
    return None


def _value_text(value: object) -> str:
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"{'-' if value < 0 else ''}2^{abs(value).bit_length() - 1}-ish"  # str() of a huge int raises
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_size(value: float, what: str) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise ExpressionError(f"{what}: evaluates to {value}, not an integer")
        value = int(value)
    if value <= 0:
        raise ExpressionError(f"{what}: evaluates to {value}, must be a positive integer")
    return int(value)


# --- loading and validation -----------------------------------------------------------------

def _check_semantics(p: Problem) -> list[str]:
    """Checks that need more than one field. Returns 'key: reason' lines."""
    errs = _check_form(p)
    # Shapes and formulas are evaluated once what they read is well-formed (a bad name or reference does not stop it).
    return errs + (_check_evaluation(p) if all(line.startswith(_BESIDE_EVALUATION) for line in errs) else [])


def _check_form(p: Problem) -> list[str]:
    """The well-formedness rules alone (what can still run on a file with schema errors)."""
    return [line for check in _FORM_CHECKS for line in check(p)]


# Keys whose errors leave the evaluation of axes, shapes and formulas meaningful.
_BESIDE_EVALUATION = ("name:", "tags", "description", "tolerance", "reference:", "input_generator:", "cost:",
                      "compute_dtype:")


def _unknown_names(where: str, text: str | int | float, known: set[str],
                   describe: Callable[[list[str]], str] = lambda names: f"unknown names {names}") -> list[str]:
    """An expression that does not parse, or that refers to names not in ``known``."""
    try:
        unknown = _expr.names(text) - known
    except ExpressionError as e:
        return [f"{where}: {e}"]
    return [f"{where}: {describe(sorted(unknown))}"] if unknown else []


def _check_name(p: Problem) -> list[str]:
    errs = [] if _NAME_RE.match(p.name) and len(p.name) <= _MAX_NAME else [
        f"name: {_value_text(p.name)} must look like <family>.<op> (letters, digits, _ - .; at most {_MAX_NAME})"]
    return errs + [f"tags[{i}]: {_value_text(t)} must be a letter or digit, then letters, digits, _ . - (at most 64)"
                   for i, t in enumerate(p.tags) if not _LABEL_RE.match(t)]


def _check_axes(p: Problem) -> list[str]:
    errs = []
    for n, a in p.axes.items():
        if not _IDENT_RE.match(n):
            errs.append(f"axes.{n}: axis names must be identifiers")
        errs.extend(_AXIS_CHECKS[a.type](n, a, set(p.axes)))
    return errs


def _check_const_axis(n: str, a: Axis, axis_names: set[str]) -> list[str]:
    errs = []
    if a.value is None:
        errs.append(f"axes.{n}: a const axis needs a value")
    elif _size_error(a.value):
        errs.append(f"axes.{n}.value: {_size_error(a.value)}")
    if a.expr is not None:
        errs.append(f"axes.{n}.expr: only expr axes have an expr")
    return errs


def _check_var_axis(n: str, a: Axis, axis_names: set[str]) -> list[str]:
    if a.value is not None or a.expr is not None:
        return [f"axes.{n}: a var axis takes its value from each workload, not value/expr"]
    return []


def _check_expr_axis(n: str, a: Axis, axis_names: set[str]) -> list[str]:
    if a.expr is None:
        return [f"axes.{n}: an expr axis needs an expr"]
    return _unknown_names(f"axes.{n}.expr", a.expr, axis_names)


_AXIS_CHECKS: dict[str, Callable[[str, Axis, set[str]], list[str]]] = {
    "const": _check_const_axis, "var": _check_var_axis, "expr": _check_expr_axis,
}


def _check_test_axes(p: Problem) -> list[str]:
    errs = []
    for a, v in p.test_axes.items():
        if a not in p.axes or p.axes[a].type == "expr":
            errs.append(f"test_axes.{a}: not a const or var axis")
        elif _size_error(v):
            errs.append(f"test_axes.{a}: {_size_error(v)}")
    return errs


def _check_unique_tensor_names(p: Problem) -> list[str]:
    in_out = set(p.inputs) & set(p.outputs)
    return [f"outputs: names {sorted(in_out)} are also inputs; names must be unique"] if in_out else []


def _check_tensors(p: Problem) -> list[str]:
    return [line for section, tensors in (("inputs", p.inputs), ("outputs", p.outputs))
            for tn, t in tensors.items() for line in _check_tensor(p, section, tn, t)]


def _check_tensor(p: Problem, section: str, tn: str, t: TensorSpec) -> list[str]:
    errs = []
    if not _IDENT_RE.match(tn):
        errs.append(f"{section}.{tn}: names must be Python identifiers (they are run()'s arguments)")
    if t.domain is not None:
        errs += ([f"outputs.{tn}.domain: only inputs have a value domain"] if section == "outputs" else
                 domain_errors(f"inputs.{tn}.domain", t.domain, t.dtype, None if t.shape is None else len(t.shape)))
    if t.shape is None:
        return errs + _check_scalar(section, tn, t)
    if t.value is not None:
        errs.append(f"{section}.{tn}.value: only scalars (shape null) have a value")
    for i, d in enumerate(t.shape):
        errs.extend(_check_dim(f"{section}.{tn}.shape[{i}]", d, set(p.axes)))
    return errs + _check_inplace(p, section, tn, t)


def _check_scalar(section: str, tn: str, t: TensorSpec) -> list[str]:
    if section == "outputs":
        return [f"outputs.{tn}.shape: outputs must be tensors (shape null is for scalar inputs)"]
    if t.value is None:
        return [f"inputs.{tn}.value: a scalar input (shape null) needs a value"]
    why = _scalar_kind_error(t.dtype, t.value)  # .nan would make every NaN answer match its reference
    return [f"inputs.{tn}.value: {why}"] if why else []


def _check_dim(where: str, d: int | str, axis_names: set[str]) -> list[str]:
    if isinstance(d, bool):
        return [f"{where}: {d!r} is not a size"]
    if isinstance(d, int):
        return [f"{where}: {_size_error(d)}"] if _size_error(d) else []
    return _unknown_names(where, d, axis_names,
                          lambda names: f"unknown axis {', '.join(names)} (declare it under axes)")


def _check_inplace(p: Problem, section: str, tn: str, t: TensorSpec) -> list[str]:
    if t.inplace_of is None:
        return []
    if section != "outputs":
        return [f"inputs.{tn}.inplace_of: only outputs can be written in place"]
    if t.inplace_of not in p.inputs:
        return [f"outputs.{tn}.inplace_of: {t.inplace_of!r} is not an input"]
    return []


def _check_compute_dtype(p: Problem) -> list[str]:
    if p.compute_dtype in PEAK_KEYS:
        return []
    return [f"compute_dtype: {p.compute_dtype!r} is not a peak key ({', '.join(PEAK_KEYS)})"]


def _check_formulas(p: Problem) -> list[str]:
    """``flops`` and ``bytes``: 'auto' or an expression over the axes; or neither, with a ``cost`` hook."""
    if p.cost is not None:
        given = [key for key in ("flops", "bytes") if getattr(p, key) is not None]
        return [f"{key}: the cost hook replaces flops and bytes; remove {key}" for key in given]
    missing = [f"{key}: required (an expression over axes, or 'auto'), unless a cost hook is given"
               for key in ("flops", "bytes") if getattr(p, key) is None]
    return missing or [line for key in ("flops", "bytes") if getattr(p, key) != "auto"
                       for line in _unknown_names(key, getattr(p, key), set(p.axes))]


def _check_constraints(p: Problem) -> list[str]:
    errs = []
    for i, text in enumerate(p.constraints):
        try:
            unknown = _expr.relation_names(text) - set(p.axes)
        except ExpressionError as e:
            errs.append(f"constraints[{i}]: {e}")
            continue
        if unknown:
            errs.append(f"constraints[{i}]: unknown axes {sorted(unknown)} (declare them under axes)")
    return errs


def _check_tolerances(p: Problem) -> list[str]:
    """A mismatch allowance above 1% says why (the workload's own reason, or the problem's)."""
    errs = _mismatch_errors("tolerance", p.tolerance.max_mismatch_ratio, p.tolerance.mismatch_reason)
    for i, w in enumerate(p.workloads):
        if w.tolerance is not None and w.tolerance.max_mismatch_ratio is not None:
            reason = w.tolerance.mismatch_reason or p.tolerance.mismatch_reason
            errs += _mismatch_errors(f"{_workload_where(i, w)}.tolerance", w.tolerance.max_mismatch_ratio, reason)
    return errs


def _mismatch_errors(where: str, ratio: float, reason: str) -> list[str]:
    if ratio > MISMATCH_WITHOUT_REASON and not reason.strip():
        return [f"{where}.max_mismatch_ratio: {ratio:g} is above {MISMATCH_WITHOUT_REASON:g}; "
                "say why in mismatch_reason"]
    return []


def _check_workloads(p: Problem) -> list[str]:
    errs: list[str] = []
    seen: set[str] = set()
    for i, w in enumerate(p.workloads):
        where = _workload_where(i, w)
        if not _LABEL_RE.match(w.name):
            errs.append(f"{where}.name: a workload name is a letter or digit, then letters, digits, _ . - "
                        "(at most 64)")
        elif w.name in seen:
            errs.append(f"{where}.name: duplicate workload name")
        seen.add(w.name)
        errs.extend(_check_workload_axes(p, where, w))
        errs.extend(_check_workload_scalars(p, where, w))
    return errs


def _check_workload_scalars(p: Problem, where: str, w: Workload) -> list[str]:
    errs = []
    for name, value in w.inputs.items():
        spec = p.inputs.get(name)
        if spec is None or spec.shape is not None:
            errs.append(f"{where}.inputs.{name}: not a scalar input (shape null); workloads set scalar values only")
        elif _scalar_kind_error(spec.dtype, value):
            errs.append(f"{where}.inputs.{name}: {_scalar_kind_error(spec.dtype, value)}")
    return errs


def _scalar_kind_error(dtype: str, value: Scalar) -> str | None:
    """Why ``value`` cannot be a scalar of ``dtype`` (an int dtype takes integers, bool takes booleans)."""
    if dtype == "bool":
        return None if isinstance(value, bool) else f"{_value_text(value)} is not a boolean (dtype bool)"
    if isinstance(value, bool):
        return f"{value!r} is a boolean, not a number of dtype {dtype}"
    if dtype.startswith(("int", "uint")) and not isinstance(value, int):
        return f"{_value_text(value)} is not an integer (dtype {dtype})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    return None


def _check_workload_axes(p: Problem, where: str, w: Workload) -> list[str]:
    var = set(p.var_axes)
    errs = [f"{where}.axes: var axis {a!r} has no value" for a in sorted(var - w.axes.keys())]
    for a, v in w.axes.items():
        if a not in var:
            kind = p.axes[a].type if a in p.axes else "unknown"
            errs.append(f"{where}.axes.{a}: not a var axis ({kind}); workloads set var axes only")
        elif _size_error(v):
            errs.append(f"{where}.axes.{a}: {_size_error(v)}")
    return errs


def _check_references(p: Problem) -> list[str]:
    refs = (("reference", p.reference), ("input_generator", p.input_generator), ("cost", p.cost))
    return [line for key, ref in refs if ref is not None for line in _check_reference(p, key, ref)]


# The well-formedness rules, in the order their errors are reported.
_FORM_CHECKS: tuple[Callable[[Problem], list[str]], ...] = (
    _check_name, _check_axes, _check_test_axes, _check_unique_tensor_names, _check_tensors,
    _check_compute_dtype, _check_formulas, _check_constraints, _check_tolerances, _check_workloads,
    _check_references,
)


def _workload_where(i: int, w: Workload) -> str:
    return f"workloads[{i}] ({w.name if _LABEL_RE.match(w.name) else _value_text(w.name)})"


def _check_evaluation(p: Problem) -> list[str]:
    """Every workload's axes, shapes and formulas evaluate (sizes positive and below 2^63, flops and bytes
    not negative), its axes meet the constraints, and its tensors could exist (:data:`MAX_TENSOR_BYTES`).
    The test axes meet the constraints too."""
    errs = [line for i, w in enumerate(p.workloads) for line in _evaluate_workload(p, _workload_where(i, w), w)]
    if errs or not p.test_axes:
        return errs
    try:
        return [f"test_axes: {e}" for e in _constraint_errors(p, p.test_axes_resolved())]
    except (ExpressionError, ProblemError) as e:
        return [f"test_axes: {e}"]


def _constraint_errors(p: Problem, env: dict[str, int]) -> list[str]:
    errs = []
    for i, text in enumerate(p.constraints):
        try:
            holds = _expr.holds(text, env)
        except ExpressionError as e:
            errs.append(f"constraints[{i}]: {e}")
            continue
        if not holds:
            values = ", ".join(f"{n}={env[n]}" for n in sorted(_expr.relation_names(text)))
            errs.append(f"constraints[{i}]: {text!r} does not hold ({values})")
    return errs


def _evaluate_workload(p: Problem, where: str, w: Workload) -> list[str]:
    try:
        env = p.resolve_axes(w)
        errs = _tensor_size_errors(p, env)
    except (ExpressionError, ProblemError) as e:
        errs, env = [str(e)], None
    if env is not None:
        errs += _constraint_errors(p, env)
        errs += [line for key in ("flops", "bytes") for line in _formula_errors(p, key, env)]
    return [f"{where}: {e}" for e in errs]


def _formula_errors(p: Problem, key: str, env: dict[str, int]) -> list[str]:
    formula = getattr(p, key)
    try:
        negative = formula not in ("auto", None) and _expr.evaluate(formula, env) < 0
    except ExpressionError as e:
        return [f"{key}: {e}"]
    return [f"{key} is negative"] if negative else []


def _tensor_size_errors(p: Problem, env: dict[str, int]) -> list[str]:
    """Tensors larger than MAX_TENSOR_BYTES, then the workload's total if only that is."""
    errs, total = [], 0
    for section, tensors in (("inputs", p.inputs), ("outputs", p.outputs)):
        for tn, t in tensors.items():
            shape = p.shape(tn, env)
            nbytes = 0 if shape is None else math.prod(shape) * ITEMSIZE[t.dtype]
            total += nbytes
            if nbytes > MAX_TENSOR_BYTES:
                errs.append(f"{section}.{tn}: shape {shape} of {t.dtype} takes {_bytes_text(nbytes)}, more than "
                            "the 1 TiB (2^40 bytes) a tensor may take")
    if total > MAX_TENSOR_BYTES and not errs:
        errs.append(f"inputs and outputs: {_bytes_text(total)} together, more than the 1 TiB (2^40 bytes) "
                    "a workload's tensors may take")
    return errs


def _bytes_text(n: int) -> str:
    return f"{n / 2**40:.3g} TiB" if n.bit_length() < 1000 else f"about 2^{n.bit_length() - 1} bytes"


def inside_folder(p: Problem, file: str) -> Path | None:
    """The real path of ``file`` (relative to the problem's folder) if it lies inside that folder, else None.

    By real path, so a link inside the folder that points out of it is refused like ``../x.py`` is.
    """
    folder = p.folder.resolve()
    real = (folder / file).resolve()
    return real if real.is_relative_to(folder) and real != folder else None


def _reference_source(p: Problem, file: str) -> tuple[Path | None, str]:
    """(path, source) of a reference or generator file, or (None, why it cannot be used)."""
    if "\x00" in file or Path(file).is_absolute() or ".." in Path(file).parts:
        return None, f"{file!r} must be a path inside the problem's folder"
    path = p.folder / file
    if not path.is_file():
        return None, f"file {file!r} not found next to the problem file"
    if inside_folder(p, file) is None:
        return None, f"{file!r} is a link to {path.resolve()}, outside the problem's folder"
    try:
        if path.stat().st_size > _MAX_SOURCE_BYTES:
            return None, f"{file} is larger than {_MAX_SOURCE_BYTES >> 20} MiB"
        return path, path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read {file} ({type(e).__name__})"


def _parse_source(path: Path, source: str) -> tuple[ast.Module | None, str]:
    try:
        return ast.parse(source, filename=str(path)), ""
    except SyntaxError as e:
        return None, f"{path.name} has a syntax error at line {e.lineno}: {e.msg}"
    except (ValueError, RecursionError, MemoryError) as e:  # a NUL byte (3.11), nesting the parser gives up on
        return None, f"{path.name} cannot be parsed ({type(e).__name__})"


def _check_reference(p: Problem, key: str, ref: str) -> list[str]:
    file, sep, func = ref.rpartition(":")
    if not sep or not file.endswith(".py") or not _IDENT_RE.match(func):
        return [f"{key}: {_value_text(ref)} must be 'file.py:function'"]
    path, source = _reference_source(p, file)
    tree, why = _parse_source(path, source) if path is not None else (None, source)
    if tree is None:
        return [f"{key}: {why}"]
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if func not in defs:
        return [f"{key}: {file} defines no top-level function {func!r}"]
    if key == "reference":
        args = defs[func].args
        params = [a.arg for a in args.posonlyargs + args.args]
        expected = list(p.inputs)
        if args.vararg is None and params != expected:
            return [f"reference: {func}({', '.join(params)}) must take the inputs in order: "
                    f"{func}({', '.join(expected)})"]
    return []


def problem_from_dict(data: dict[str, Any], path: Path | None = None) -> Problem:
    """Build and fully check a problem from a mapping. Raises ProblemError with 'file: key: why' lines."""
    return checked_model(Problem, data, path, "problem", ProblemError, _check_semantics, _check_form)


def load_problem(path: str | Path) -> Problem:
    """Load a problem from its problem.yaml (or the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "problem.yaml"
    return problem_from_dict(read_yaml_file(path, ProblemError), path)


def find_problems(root: str | Path) -> list[Path]:
    """Every problem.yaml under ``root`` (or ``root`` itself if it is a file), sorted."""
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(root.rglob("problem.yaml"))


def problem_json_schema() -> dict[str, Any]:
    return Problem.model_json_schema()
