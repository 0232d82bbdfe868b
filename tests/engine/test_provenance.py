"""Records carry the candidate repository's commit and dirty flag, read without running its programs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from solbench.engine.provenance import candidate_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git")


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "cand.py").write_text("def run(x):\n    return x\n")
    git(tmp_path, "add", "cand.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_commit_and_dirty(repo):
    info = candidate_git(repo / "cand.py", "run1")
    assert info["commit"] == git(repo, "rev-parse", "HEAD") and info["dirty"] is False
    assert info["committed_at"].startswith("20")
    (repo / "cand.py").write_text("def run(x):\n    return x + 0\n")
    assert candidate_git(repo / "cand.py", "run1")["dirty"] is False  # read once per run
    assert candidate_git(repo / "cand.py", "run2")["dirty"] is True


def test_outside_a_repository(tmp_path):
    (tmp_path / "c.py").write_text("")
    assert candidate_git(tmp_path / "c.py", "r") is None


def test_repository_programs_never_run(repo, tmp_path):
    marker = tmp_path.parent / f"{tmp_path.name}_ran"
    (repo / ".gitattributes").write_text("*.py filter=evil\n")
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    git(repo, "config", "core.fsmonitor", f"touch {marker}; true")
    (repo / "cand.py").write_text("changed\n")
    info = candidate_git(repo / "cand.py", "r3")
    assert info["commit"] and info["dirty"] is None and "runs programs" in info["dirty_note"]
    assert not marker.exists()
