"""The parent writes the bytecode caches its sandboxed processes cannot write (once, honouring PYTHONDONTWRITEBYTECODE)."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

import pytest

from solbench.engine import bytecode


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``primed_pkg`` on sys.path, without bytecode: two modules and one that does not compile."""
    folder = tmp_path / "primed_pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("X = 1\n")
    (folder / "good.py").write_text("def f():\n    return 2\n")
    (folder / "bad.py").write_text("def (:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(bytecode, "_DONE", {})
    return folder


def _valid_cache(source) -> bool:
    """The cached file exists and its header matches this Python and the source's mtime and size (PEP 552)."""
    try:
        data = open(importlib.util.cache_from_source(str(source)), "rb").read(16)
    except OSError:
        return False
    flags, mtime, size = struct.unpack("<III", data[4:16])
    st = os.stat(source)
    return data[:4] == importlib.util.MAGIC_NUMBER and flags == 0 and mtime == int(st.st_mtime) and size == st.st_size


def test_missing_caches_are_written_once(package, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert sorted(os.path.basename(p) for p in bytecode.missing_bytecode(str(package))) == [
        "__init__.py", "bad.py", "good.py"]
    done = bytecode.prime_bytecode(("primed_pkg", "no_such_package_here"), cores=1)
    assert done["missing"] == 3 and done["written_s"] > 0
    assert _valid_cache(package / "__init__.py") and _valid_cache(package / "good.py")
    assert not _valid_cache(package / "bad.py")  # left as it is: its import fails as it would have
    assert bytecode.missing_bytecode(str(package)) == [str(package / "bad.py")]
    assert bytecode.prime_bytecode(("primed_pkg",)) is done  # once per process


def test_nothing_is_written_under_pythondontwritebytecode(package, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode.prime_bytecode(("primed_pkg",), cores=1) == {"skipped": "PYTHONDONTWRITEBYTECODE"}
    assert not (package / "__pycache__").exists()
