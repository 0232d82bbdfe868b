"""solbench.load_sibling: how a candidate loads another file next to it (its torch_eager.py, a helper)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import solbench
from solbench.worker.candidate import load_candidate

PROBLEMS = Path(__file__).resolve().parents[2] / "problems"
COMPILE_CANDIDATE = 'import solbench\n\n_eager = solbench.load_sibling(__file__, "torch_eager.py").run\n\n\ndef run(x):\n    return _eager(x)\n'


def test_equal_file_names_in_two_folders_never_collide(tmp_path):
    """Two problems' torch_eager.py in one worker: each candidate gets its own folder's."""
    runs = []
    for scale in (2, 3):
        folder = tmp_path / f"p{scale}" / "solutions"
        folder.mkdir(parents=True)
        (folder / "torch_eager.py").write_text(f"def run(x):\n    return x * {scale}\n")
        (folder / "torch_compile.py").write_text(COMPILE_CANDIDATE)
        runs.append(load_candidate(folder / "torch_compile.py"))
    assert [run(5) for run in runs] == [10, 15]


def test_the_sibling_counts_as_candidate_code(tmp_path):
    (tmp_path / "helper.py").write_text("X = 1\n")
    mod = solbench.load_sibling(tmp_path / "cand.py", "helper.py")
    assert mod.X == 1
    assert mod.__name__.startswith("solbench_candidate_")  # the guards' test for candidate code
    assert Path(mod.__file__) == (tmp_path / "helper.py").resolve()


def test_a_missing_sibling_is_an_import_time_failure(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file 'torch_eager.py' next to cand.py"):
        solbench.load_sibling(tmp_path / "cand.py", "torch_eager.py")


def test_a_sibling_outside_the_folder_is_refused(tmp_path):
    """The JIT-cache key covers the candidate's folder: a sibling is a file below it, nothing else."""
    (tmp_path / "outside.py").write_text("X = 1\n")
    (tmp_path / "c").mkdir()
    for name in ("../outside.py", str(tmp_path / "outside.py")):
        with pytest.raises(ValueError, match="is not a file below the folder of cand.py"):
            solbench.load_sibling(tmp_path / "c" / "cand.py", name)


def _solbench_imports(tree: ast.Module) -> set[str]:
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return {n for n in names if n.split(".")[0] == "solbench"}


def test_shipped_candidates_use_only_the_public_package():
    """Candidates are examples for authors: they import ``solbench`` itself, never an internal module."""
    files = sorted(PROBLEMS.glob("*/*/solutions/*.py"))
    internal = {f"{f.relative_to(PROBLEMS)}: {sorted(names)}" for f in files
                if (names := _solbench_imports(ast.parse(f.read_text()))) - {"solbench"}}
    assert len(files) > 100 and not internal
