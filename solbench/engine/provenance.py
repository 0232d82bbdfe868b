"""Which commit of its git repository a candidate was run from: commit, dirty or not, commit time.

Read by the parent (trusted) with the ``git`` command, once per folder and run. The repository is
the candidate's, possibly someone else's, so git runs so that it cannot run their programs: no
system or global configuration, ``core.fsmonitor`` and hooks off, and the dirty check (the only
command that may read file contents) is skipped when the repository's own configuration names a
program git would run on them (a filter, a textconv, an fsmonitor), which the record then says.
No git, no repository, or a slow one: the record has no ``git`` (never a failed run).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from solbench.settings import GIT_TIMEOUT_S

# Configuration keys with which git would run a program while it compares the work tree.
# Read with --show-scope: our own overrides (scope "command", e.g. core.fsmonitor=false) do not count.
_RUNS_PROGRAMS = re.compile(r"^(?!command\t)\w+\t(filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|"
                            r"core\.fsmonitor|diff\.external)=", re.IGNORECASE | re.MULTILINE)
_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false")


def _git(folder: Path, *args: str) -> str | None:
    """stdout of ``git -C folder ARGS`` (stripped), or None when git fails or is absent."""
    exe = shutil.which("git")
    if exe is None:
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_OPTIONAL_LOCKS="0",
               GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    try:
        out = subprocess.run([exe, *_SAFE, "-C", str(folder), *args], capture_output=True, text=True,
                             timeout=GIT_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _dirty(folder: Path) -> tuple[bool | None, str | None]:
    """(uncommitted changes to tracked files?, why unknown)."""
    config = _git(folder, "config", "--list", "--show-scope")
    if config is None:
        return None, "not checked: git config failed"
    if _RUNS_PROGRAMS.search(config):
        return None, "not checked: the repository's configuration runs programs on its files"
    status = _git(folder, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules")
    if status is None:
        return None, "not checked: git status failed"
    return bool(status), None


@lru_cache(maxsize=64)
def _repo_info(folder: Path, run_id: str) -> dict[str, Any] | None:
    """Read once per folder and run (``run_id`` is only part of the cache key: a later run reads anew)."""
    commit = _git(folder, "rev-parse", "--verify", "HEAD")
    if not commit or not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return None
    info: dict[str, Any] = {"commit": commit}
    info["dirty"], why = _dirty(folder)
    if why:
        info["dirty_note"] = why
    when = _git(folder, "show", "-s", "--format=%cI", "HEAD")
    if when:
        info["committed_at"] = when
    branch = _git(folder, "rev-parse", "--abbrev-ref", "HEAD")
    if branch and branch != "HEAD":
        info["branch"] = branch
    return info


def candidate_git(path: str | Path, run_id: str = "") -> dict[str, Any] | None:
    """The git facts of the repository holding the candidate file ``path``, or None outside one.

    ``dirty`` is about the whole repository's tracked files (as ``git describe --dirty``); the
    candidate's own content is pinned by the record's ``solution_sha256`` anyway."""
    folder = Path(path).resolve().parent
    info = _repo_info(folder, run_id)
    return dict(info) if info else None
