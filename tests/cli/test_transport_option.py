"""`solbench run --transport`: a route that cannot be used here is one line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
PROBLEM, HONEST = HERE / "fixtures" / "tiny" / "scaled_add", HERE / "candidates" / "honest.py"


@pytest.mark.parametrize("route, says", [("device", "--transport device shares GPU memory"),
                                         ("pcie", "--transport pcie: use auto, device, memfd")])
def test_bad_transport_is_one_line(route, says):
    done = subprocess.run([sys.executable, "-m", "solbench", "run", str(PROBLEM), "-s", str(HONEST), "--device", "cpu",
                           "--transport", route, "-q"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0]
