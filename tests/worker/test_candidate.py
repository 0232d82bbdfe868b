"""solbench.worker.candidate: describing candidate files (parent) and loading them (worker side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from solbench.worker.candidate import (
    CandidateError,
    CandidateLoadError,
    describe_candidates,
    load_candidate,
    shipped_candidates,
)

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def test_describe_gives_stem_names_and_hashes(tmp_path):
    import hashlib

    files = describe_candidates([CANDIDATES / "honest.py", CANDIDATES / "raises.py"])
    assert [f.name for f in files] == ["honest", "raises"]
    assert files[0].sha256 == hashlib.sha256((CANDIDATES / "honest.py").read_bytes()).hexdigest()


def test_describe_disambiguates_equal_stems(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "kernel.py").write_text("def run(x):\n    return x\n")
    files = describe_candidates([tmp_path / "a" / "kernel.py", tmp_path / "b" / "kernel.py"])
    assert [f.name for f in files] == ["a/kernel", "b/kernel"]


def test_describe_rejects_missing_and_other_files(tmp_path):
    with pytest.raises(CandidateError, match="not found"):
        describe_candidates([tmp_path / "nope.py"])
    (tmp_path / "k.txt").write_text("")
    with pytest.raises(CandidateError, match="neither a .py nor a .cu file"):
        describe_candidates([tmp_path / "k.txt"])
    (tmp_path / "k.cu").write_text("")  # CUDA C++ candidates are built by the worker (worker/cuda_source.py)
    assert [f.name for f in describe_candidates([tmp_path / "k.cu"])] == ["k"]


def test_shipped_candidates_lists_solutions(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "b.py").write_text("")
    (tmp_path / "solutions" / "a.py").write_text("")
    (tmp_path / "solutions" / "_helper.py").write_text("")
    assert [p.name for p in shipped_candidates(tmp_path)] == ["a.py", "b.py"]
    assert shipped_candidates(tmp_path / "missing") == []


def test_load_returns_run():
    run = load_candidate(CANDIDATES / "honest.py")
    import torch

    assert torch.equal(run(torch.ones(2), torch.ones(2)), torch.full((2,), 3.0))


@pytest.mark.parametrize("source, fragment", [
    ("def run(x)\n    return x\n", "SyntaxError at line 1"),
    ("import solbench_no_such_module\n", "ModuleNotFoundError while importing"),
    ("raise RuntimeError('bad at import')\n", "RuntimeError while importing: bad at import"),
    ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
    ("def forward(x):\n    return x\n", "defines no run()"),
    ("run = 42\n", "not a function"),
])
def test_load_failures_are_compile_errors(tmp_path, source, fragment):
    f = tmp_path / "cand.py"
    f.write_text(source)
    with pytest.raises(CandidateLoadError) as info:
        load_candidate(f)
    assert fragment in info.value.message


def test_helper_modules_next_to_the_candidate_import(tmp_path):
    (tmp_path / "solbench_test_helper_mod.py").write_text("SCALE = 3\n")
    (tmp_path / "cand.py").write_text("from solbench_test_helper_mod import SCALE\n\ndef run(x):\n    return x * SCALE\n")
    assert load_candidate(tmp_path / "cand.py")(2) == 6
