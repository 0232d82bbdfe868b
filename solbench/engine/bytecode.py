"""Bytecode caches for what the sandboxed processes import, written once by the trusted parent.

A worker or problem host runs as another user under Landlock: it reads the Python installation but
writes only its own folder, so a module without a cached ``.pyc`` is compiled from source at every
start of every one of them (seconds for torch's compiler stack, which the parent itself never
imports: an installer that writes no bytecode, as ``uv`` does by default, leaves all of it so). The
parent writes the missing caches of the packages they import, where it may write, before it starts
them: the same files Python writes on import, from the same trusted sources; no sandboxed process
can write them. ``PYTHONDONTWRITEBYTECODE`` is honoured (nothing written).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from typing import Any

from solbench.settings import BYTECODE_TIMEOUT_S

PACKAGES = ("torch", "triton", "solbench")  # what the sandboxed processes import (the candidates: torch's compilers)

_DONE: dict[str, Any] = {}  # once per process


def missing_bytecode(folder: str) -> list[str]:
    """The ``.py`` files below ``folder`` whose cached bytecode is missing or older than the source."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                try:
                    cached = importlib.util.cache_from_source(path)
                    if os.stat(cached).st_mtime < os.stat(path).st_mtime:
                        out.append(path)
                except (OSError, ValueError, NotImplementedError):
                    out.append(path)
    return out


def _folder(package: str) -> str | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return locations[0] if locations else None


def prime_bytecode(packages: tuple[str, ...] = PACKAGES, cores: int | None = None) -> dict[str, Any]:
    """Write the missing bytecode caches of ``packages`` (those installed, in folders this process may
    write), once per process; what was found and done: ``{"missing", "written_s"}`` or ``{"skipped"}``."""
    if _DONE:
        return _DONE
    if sys.dont_write_bytecode:
        _DONE.update(skipped="PYTHONDONTWRITEBYTECODE")
        return _DONE
    folders = [f for f in (_folder(p) for p in packages) if f is not None and os.access(f, os.W_OK)]
    files = [path for folder in folders for path in missing_bytecode(folder)]
    _DONE.update(missing=len(files), written_s=0.0)
    if files:
        began = time.monotonic()
        jobs = str(cores or os.cpu_count() or 1)
        try:  # a process of its own: no fork of this threaded one; a file that does not compile is left as it is
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", jobs, "-i", "-"],
                           input="\n".join(files), text=True, capture_output=True, timeout=BYTECODE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        _DONE["written_s"] = round(time.monotonic() - began, 3)
    return _DONE
