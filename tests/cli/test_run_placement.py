"""`solbench run --gpus/--jobs/--cluster`: a placement that does not fit is one line and a non-zero exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "scaled_add"


@pytest.mark.parametrize("flags, expected", [
    (["--device", "cpu", "--gpus", "all"], "--gpus runs one executor per GPU: use it with --device cuda, not cpu"),
    (["--device", "cpu", "--gpus", "0;1"], "--gpus 0;1: give all, or GPU indices like 0,1"),
    (["--device", "cpu", "--cluster", "spark://x"], "--cluster spark://x: use ray"),
    (["--device", "cpu", "--jobs", "2", "--interleave", "2"], "--interleave runs on one device"),
])
def test_placement_mistakes_are_one_line(flags, expected, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "solbench", "run", str(TINY), "-o", str(tmp_path / "r.jsonl"), *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and expected in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()
