"""Fuzzing (hypothesis) of what anyone can write: problem and spec YAML, and the expressions in them.

Properties: reading, validating and evaluating never raise anything but the project's errors, each
message one line; what loads evaluates to finite sizes below 2^63 for every workload.

The budget is fixed, as in tests/present/test_fuzz_result_lines.py: 150 examples per test, no deadline,
derandomised (the same examples every run), no example database; about 10 s on 2 cores.
``SOLBENCH_FUZZ_SCALE=20`` runs twenty times as many examples (3,000 per test ran clean, about 4 minutes).
"""

from __future__ import annotations

import copy
import math
import os
import sys
from pathlib import Path

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from solbench.data.expr import LIMIT, evaluate, names  # noqa: E402
from solbench.data.hardware import load_spec  # noqa: E402
from solbench.data.problem import load_problem  # noqa: E402
from solbench.data.roofline import problem_points  # noqa: E402
from solbench.data.validate import validate_paths  # noqa: E402
from solbench.data.yamlio import YamlError, read_yaml_mapping  # noqa: E402
from solbench.errors import ExpressionError, SolbenchError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_problem_file import GOOD, REF  # noqa: E402

FUZZ = settings(
    max_examples=150 * int(os.environ.get("SOLBENCH_FUZZ_SCALE", "1")),
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),  # slow, large and module-fixture examples are the point here
)
AXES = ["T", "H", "H2"]


# --- strategies ------------------------------------------------------------------------------------------

_NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0", "1", "2", "0.5", "2**62", "2**63", "9223372036854775807", "1e308", "1e-308", "1e400",
                     "10**18", "123456789"]),
)
_LEAF = st.one_of(_NUMBER_TEXT, st.sampled_from([*AXES, "Q", "min", "__import__", "x.y", "'s'", "True", "[1]"]))
_BINOP = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<<", "&", "<", "and"])
_FUNC = st.sampled_from(["min", "max", "ceil", "floor", "abs", "pow", "open", "T"])


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, _BINOP, children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["-", "+", "~", "not "]), children).map("".join),
        st.tuples(_FUNC, st.lists(children, max_size=4)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.tuples(st.integers(1, 150), children).map(lambda t: "(" * t[0] + t[1] + ")" * t[0]),
        st.tuples(st.integers(2, 90), children, _BINOP).map(lambda t: f" {t[2]} ".join([t[1]] * t[0])),
    )


EXPRESSIONS = st.recursive(_LEAF, _extend, max_leaves=25)
ENVS = st.fixed_dictionaries({a: st.one_of(st.integers(1, 4096), st.integers(1, 2**70)) for a in AXES})

_CONTROL_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
_SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.sampled_from([0, -1, 2**63 - 1, 2**63, 10**18, 10**400, -(10**30)]),
    st.floats(), _CONTROL_TEXT, EXPRESSIONS, st.sampled_from(["auto", "reference.py:run", "../x.py:run", "var"]),
)
_KEYS = st.one_of(st.sampled_from(["name", "type", "value", "expr", "shape", "dtype", "axes", "T", "H"]), _CONTROL_TEXT)
VALUES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_KEYS, children, max_size=4)),
    max_leaves=20,
)
DEEP = st.integers(1, 80).map(lambda n: {"a": [[]] if n == 1 else [DEEP_VALUE(n)]})


def DEEP_VALUE(n: int) -> object:  # noqa: N802 - a constant-like builder
    value: object = 1
    for i in range(n):
        value = [value] if i % 2 else {"k": value}
    return value


def _paths(data: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path into GOOD (where a mutation may land)."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


GOOD_PATHS = [p for p in _paths(GOOD) if p]


def _mutate(data: dict, path: tuple, value: object) -> dict:
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


# Where sizes and formulas are evaluated: half the mutations land there, with a number or an expression.
FORMULA_PATHS = [("flops",), ("bytes",), ("axes", "H2", "expr"), ("axes", "H", "value"), ("inputs", "x", "shape", 0),
                 ("inputs", "x", "shape", 1), ("outputs", "out", "shape", 1), ("workloads", 0, "axes", "T"),
                 ("workloads", 1, "axes", "T"), ("test_axes",)]
_SIZES = st.one_of(st.integers(1, 2**64), st.sampled_from([10**12, 10**18, 2**40, 2**62, 2**63 - 1]))
_MUTATION = st.one_of(
    st.tuples(st.sampled_from(FORMULA_PATHS), st.one_of(EXPRESSIONS, _SIZES, st.dictionaries(st.just("T"), _SIZES))),
    st.tuples(st.sampled_from(GOOD_PATHS), st.one_of(VALUES, EXPRESSIONS, DEEP)),
)
MUTATED_PROBLEMS = st.lists(_MUTATION, min_size=1, max_size=4).map(lambda muts: _apply(muts))


def _apply(mutations: list[tuple[tuple, object]]) -> dict:
    return _apply_to(GOOD, mutations)


def _apply_to(data: object, mutations: list[tuple[tuple, object]]) -> object:
    """``data`` with each (path, value) set in turn (a copy; a path an earlier one cut off is skipped)."""
    for path, value in mutations:
        try:
            data = _mutate(data, path, value)
        except (KeyError, IndexError, TypeError):  # an earlier mutation replaced the parent
            pass
    return data


YAML_CHARS = st.text(st.sampled_from(list("{}[]:,-&*!|>'\"#%@`? \n\t\\abcT0123456789.e+") + ["\u202e", "\x1b"]),
                     max_size=200)


# --- helpers --------------------------------------------------------------------------------------------

def _one_line(err: BaseException) -> None:
    text = str(err)
    assert "\n" not in text and "Traceback" not in text, text


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """One problem folder for all examples (each overwrites problem.yaml), with the reference."""
    path = tmp_path_factory.mktemp("fuzz")
    (path / "reference.py").write_text(REF)
    (path / "hardware_specs").mkdir()
    return path


def _check_loaded(path: Path) -> None:
    """Load; what loads must evaluate in every workload the way `sol` and `run` will evaluate it."""
    try:
        problem = load_problem(path)
    except SolbenchError as err:
        _one_line(err)
        return
    if not problem.work_runs_code:  # a fuzzed file's code is never run here
        assert all(math.isfinite(pt.t_ideal_s) for pt in problem_points(problem, H200))
    for w in problem.workloads:
        axes = problem.resolve_axes(w)
        assert all(0 < v < LIMIT for v in axes.values())
        for tn in [*problem.inputs, *problem.outputs]:
            shape = problem.shape(tn, axes)
            assert shape is None or all(0 < d < LIMIT for d in shape)
        if not problem.work_runs_code:
            assert 0 <= problem.flops_for(axes) < LIMIT
        if problem.cost is None:
            assert 0 <= problem.bytes_for(axes) < LIMIT
    try:
        problem.test_axes_resolved()  # test_axes may shrink or grow a workload: still only one-line errors
    except SolbenchError as err:
        _one_line(err)


H200 = load_spec("h200_sxm")


# --- expressions ----------------------------------------------------------------------------------------

@FUZZ
@given(EXPRESSIONS, ENVS)
def test_expressions_evaluate_to_a_bounded_number_or_one_error(src, env):
    try:
        value = evaluate(src, env)
    except ExpressionError as err:
        _one_line(err)
        return
    assert isinstance(value, (int, float)) and not isinstance(value, bool)
    assert abs(value) < LIMIT  # finite too


@FUZZ
@given(st.one_of(st.text(max_size=300), EXPRESSIONS, st.integers(), st.floats(), st.booleans(), st.none()))
def test_any_text_parses_or_is_refused_with_one_error(src):
    try:
        found = names(src)
    except ExpressionError as err:
        _one_line(err)
        return
    assert isinstance(found, set)


# --- YAML -----------------------------------------------------------------------------------------------

@FUZZ
@given(st.one_of(YAML_CHARS, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_any_text_reads_as_a_mapping_or_one_yaml_error(folder, text):
    f = folder / "problem.yaml"
    f.write_text(text, encoding="utf-8")
    try:
        read_yaml_mapping(f)
    except YamlError as err:
        _one_line(err)
    n, errs = validate_paths([f])
    assert n == 1 and all("\n" not in e for e in errs)


@FUZZ
@given(st.dictionaries(_KEYS, VALUES, max_size=6) | DEEP)
def test_random_structures_are_refused_with_one_line(folder, data):
    f = folder / "problem.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    _check_loaded(f)
    spec = folder / "hardware_specs" / "h999.yaml"
    spec.write_text(yaml.safe_dump({"id": "h999", "peak_flops": data}), encoding="utf-8")
    n, errs = validate_paths([spec])
    assert n == 1 and errs and all("\n" not in e for e in errs)


@FUZZ
@given(MUTATED_PROBLEMS)
def test_mutated_problems_load_and_evaluate_or_give_one_line_errors(folder, data):
    f = folder / "problem.yaml"
    try:
        f.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    except (RecursionError, yaml.YAMLError):
        return
    _check_loaded(f)
