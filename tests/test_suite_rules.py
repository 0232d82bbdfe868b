"""The test suite's own rules: SIGTERM stops a run whatever handler an earlier test installed; the
default run leaves out what is marked slow, and `pytest -m slow` runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_sigterm_stops_the_run_after_a_test_installed_a_handler(tmp_path):
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/_sigterm_probe.py"],
                            cwd=ROOT, env={**os.environ, "SIGTERM_PROBE_READY": str(ready)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert ready.exists(), proc.communicate()[0]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM, out  # killed by it, not a SystemExit failure and on to the next test


def test_the_default_run_leaves_out_slow_tests_and_ci_runs_them():
    addopts = [ln for ln in (ROOT / "pyproject.toml").read_text().splitlines() if ln.startswith("addopts")]
    assert len(addopts) == 1 and "-m 'not slow'" in addopts[0], addopts
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pytest -m slow" in ci
