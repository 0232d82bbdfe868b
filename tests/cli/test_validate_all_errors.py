"""`solbench validate` reports every error of a file in one pass: schema errors and the checks that
can still run on what the schema accepted, one 'file: key: why' line each."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RMSNORM = ROOT / "problems" / "llama3_1_8b" / "rmsnorm"


def _broken_problem(tmp_path: Path, edits: dict[str, str]) -> Path:
    folder = tmp_path / "p"
    shutil.copytree(RMSNORM, folder, ignore=shutil.ignore_patterns("solutions"))
    text = (folder / "problem.yaml").read_text()
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    (folder / "problem.yaml").write_text(text)
    return folder


def _validate(path: Path) -> list[str]:
    res = subprocess.run([sys.executable, "-m", "solbench", "validate", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    return [line for line in res.stderr.splitlines() if line.startswith(str(path))]


def test_schema_and_semantic_errors_come_together(tmp_path):
    folder = _broken_problem(tmp_path, {
        "runs_per_layer: 2": "runs_per_layer: 2\nbogus_key: 1",  # schema: unknown key
        "dtype: float32, value": "dtype: floatxx, value",  # schema: bad dtype
        "reference: reference.py:run": "reference: reference.py:nothere",  # checked on what is left
        "flops: 4 * T * H": "flops: 4 * T * Q",  # likewise
    })
    lines = _validate(folder)
    keys = sorted(line.split(": ")[1] for line in lines)
    assert keys == ["bogus_key", "flops", "inputs.eps.dtype", "reference"], lines


def test_a_bad_name_does_not_hide_a_workload_whose_shapes_do_not_evaluate(tmp_path):
    folder = _broken_problem(tmp_path, {"name: llama3_1_8b.rmsnorm": "name: 'no spaces allowed'",
                                        "{name: decode_b16, axes: {T: 16}}": "{name: decode_b16, axes: {T: 0}}"})
    keys = [line.split(": ")[1] for line in _validate(folder)]
    assert "name" in keys and any(k.startswith("workloads[1] (decode_b16)") for k in keys), keys


def test_a_removed_tensor_is_not_blamed_twice(tmp_path):
    """The schema refuses input `eps`: no check may then complain that the reference's signature lacks it."""
    folder = _broken_problem(tmp_path, {"dtype: float32, value": "dtype: floatxx, value"})
    lines = _validate(folder)
    assert len(lines) == 1 and "inputs.eps.dtype" in lines[0], lines
