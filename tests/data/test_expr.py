"""The expression evaluator accepts arithmetic over axis names and nothing else."""

import math

import pytest

from solbench.data.expr import evaluate, names
from solbench.errors import ExpressionError


@pytest.mark.parametrize(
    ("src", "env", "expected"),
    [
        ("2 * T * H * H", {"T": 3, "H": 5}, 2 * 3 * 5 * 5),
        ("T // 4 + T % 4", {"T": 11}, 11 // 4 + 11 % 4),
        ("(A + B) ** 2", {"A": 2, "B": 3}, 25),
        ("-A + 10", {"A": 4}, 6),
        ("min(A, B) * max(A, B, 7)", {"A": 2, "B": 3}, 2 * 7),
        ("ceil(S / 128) * floor(7 / 2)", {"S": 300}, math.ceil(300 / 128) * 3),
        ("S * (S + 1) / 2", {"S": 4096}, 4096 * 4097 / 2),
        (4096, {}, 4096),
        ("1.5e3", {}, 1500.0),
    ],
)
def test_evaluates_arithmetic(src, env, expected):
    assert evaluate(src, env) == expected


@pytest.mark.parametrize(
    "src",
    [
        "__import__('os').system('echo pwned')",
        "T.__class__",
        "open('x')",
        "x[0]",
        "'abc'",
        "lambda: 1",
        "[1, 2]",
        "T if T else 1",
        "T < 3",
        "exec('1')",
        "min.__call__(1)",
        "(lambda x: x)(1)",
        "T and H",
        "~T",
        "f'{T}'",
    ],
)
def test_refuses_everything_else(src):
    with pytest.raises(ExpressionError) as info:
        evaluate(src, {"T": 1, "H": 2, "x": 3})
    assert repr(src) in str(info.value)  # the message names the expression


def test_no_side_effect_from_refused_expression(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExpressionError):
        evaluate("__import__('pathlib').Path('pwned').touch()", {})
    assert not (tmp_path / "pwned").exists()


def test_unknown_name_lists_known_axes():
    with pytest.raises(ExpressionError, match="unknown name 'Q'.*known axes: H, T"):
        evaluate("Q * 2", {"T": 1, "H": 2})


def test_syntax_and_division_errors_are_clear():
    with pytest.raises(ExpressionError, match="syntax error"):
        evaluate("2 * * T", {"T": 1})
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate("T / (T - T)", {"T": 1})
    with pytest.raises(ExpressionError, match="exponent"):
        evaluate("2 ** 100000", {})


def test_names_excludes_functions():
    assert names("min(T, H) * ceil(S / 2)") == {"T", "H", "S"}
    assert names("2 * 3") == set()
