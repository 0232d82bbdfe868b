"""A candidate whose run() cannot take the problem's inputs: refused at load, before any call."""

from __future__ import annotations

import functools
import textwrap

import pytest

from solbench.worker.candidate import CandidateLoadError, check_entry_points, signature_mismatch, source_run_mismatch

INPUTS = ["x", "weight", "eps"]


def three(x, weight, eps): ...
def two(x, weight): ...
def star(*args): ...
def defaults(x, weight, eps=1e-5, extra=None): ...
def kw_only(x, weight, eps, *, scale): ...


@pytest.mark.parametrize(("fn", "fits"), [
    (three, True), (star, True), (defaults, True), (functools.partial(three, 1), False), (two, False),
    (kw_only, False), (lambda: None, False),
])
def test_signature_mismatch_against_a_positional_call(fn, fits):
    # The independent check: calling with three positional placeholders raises TypeError or not.
    try:
        fn(1, 2, 3) if fn is not kw_only else kw_only(1, 2, 3)
        callable_with_three = True
    except TypeError:
        callable_with_three = False
    assert callable_with_three is fits
    why = signature_mismatch(fn, INPUTS, "llama3_1_8b.rmsnorm")
    assert (why is None) is fits
    if not fits:
        assert "cannot take the 3 inputs (x, weight, eps) that llama3_1_8b.rmsnorm passes" in why


def test_unreadable_signatures_are_left_to_the_call():
    assert signature_mismatch(print, INPUTS) is None  # a builtin: no signature to read


def test_load_check_names_the_file_and_the_entry_point():
    with pytest.raises(CandidateLoadError, match=r"^k\.py: setup\(x, weight\) cannot take the 3 inputs"):
        check_entry_points("dir/k.py", three, two, INPUTS)
    check_entry_points("dir/k.py", two, None, None)  # no inputs sent: nothing checked


@pytest.mark.parametrize(("source", "fits"), [
    ("def run(x, weight, eps):\n    pass\n", True),
    ("def run(x, weight):\n    pass\n", False),
    ("def run(x, weight, eps, *, scale):\n    pass\n", False),
    ("def run(*args):\n    pass\n", True),
    ("def run(x, w, eps=1e-6, y=2):\n    pass\n", True),
    ("def run(a, b, c, d):\n    pass\n", False),
    # Not certain from the source: left to the worker's check.
    ("import torch\ndef _f(x): pass\nrun = torch.compile(_f)\n", True),
    ("def run(x):\n    pass\nrun = other\n", True),
    ("@wrap\ndef run(x):\n    pass\n", True),
    ("def run(:\n", True),
])
def test_source_check_is_certain_or_silent(tmp_path, source, fits):
    f = tmp_path / "cand.py"
    f.write_text(textwrap.dedent(source))
    assert (source_run_mismatch(f, INPUTS, "p") is None) is fits
