"""Numbers from a problem's code (cost hooks, input generators' scalars): real integers or finite
floats, never text, booleans, NaN, infinities, or a float truncated into a count; each refusal one
line naming the hook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from solbench.data.hookvalues import hook_cost, real_number, scalar_value, whole_number
from solbench.data.problem import load_problem
from solbench.engine.problem_code import make_inputs, workload_cost
from solbench.errors import ProblemError

ROOT = Path(__file__).resolve().parents[2]
RAGGED = ROOT / "tests" / "fixtures" / "tiny" / "ragged_sum"


@pytest.mark.parametrize("value", ["4096", 4096.0, 4096.7, torch.tensor(4096.7), np.float32(4096.7), float("inf"),
                                   float("nan"), True, None, torch.tensor([1, 2]), -1, 2**63, 1j])
def test_what_is_not_a_count_is_refused(value):
    with pytest.raises(ValueError) as info:
        whole_number(value)
    assert "\n" not in str(info.value)


def test_counts_and_reals_that_are_taken():
    assert [whole_number(v) for v in (4096, np.int64(4096), torch.tensor(4096), torch.tensor(7, dtype=torch.int8))] \
        == [4096, 4096, 4096, 7]
    assert real_number(np.float32(0.5)) == 0.5 and type(real_number(np.float32(0.5))) is float
    assert real_number(torch.tensor(2.5)) == 2.5 and real_number(3) == 3
    for bad in (float("nan"), float("-inf"), "1.0", False, torch.tensor(float("nan"))):
        with pytest.raises(ValueError):
            real_number(bad)
    assert scalar_value(True, "bool") is True and scalar_value(np.int32(3), "int32") == 3
    with pytest.raises(ValueError, match="not a boolean"):
        scalar_value(1, "bool")
    with pytest.raises(ValueError, match="not an integer"):
        scalar_value(2.5, "int64")


def test_a_cost_of_no_work_at_all_is_refused():
    assert hook_cost({"flops": 0, "bytes": 8}) == (0, 8)
    with pytest.raises(ValueError, match="both 0"):
        hook_cost({"flops": 0, "bytes": 0})


def _ragged(tmp_path: Path, cost_line: str = "", generator_line: str = "") -> Path:
    """The ragged_sum fixture with its cost hook's return line, or its generator's, replaced."""
    folder = tmp_path / "ragged"
    shutil.copytree(RAGGED, folder)
    ref = folder / "reference.py"
    text = ref.read_text()
    if cost_line:
        start = text.index('    return {"flops"')
        text = text[:start] + f"    return {cost_line}\n"
    if generator_line:
        text = text.replace('    return {"indptr": indptr}', f"    {generator_line}")
    ref.write_text(text)
    return folder


@pytest.mark.parametrize(("cost", "expect"), [
    ('{"flops": "4096", "bytes": 64}', "flops = '4096' is not an integer"),
    ('{"flops": torch.tensor(4096.7), "bytes": 64}', "flops = tensor(4096.70"),
    ('{"flops": __import__("numpy").float32(4096.7), "bytes": 64}', "is not an integer"),
    ('{"flops": float("inf"), "bytes": 64}', "flops = inf is not an integer"),
    ('{"flops": 0, "bytes": 0}', "flops and bytes are both 0"),
    ('{"flops": 1, "bytes": -5}', "bytes = -5 is outside [0, 2^63)"),
])
def test_a_cost_hook_value_that_is_not_a_count_is_one_line(tmp_path, cost, expect):
    p = load_problem(_ragged(tmp_path, cost_line=cost))
    with pytest.raises(ProblemError) as info:
        workload_cost(p, p.resolve_axes(p.workloads[0]))
    assert len(info.value.errors) == 1 and expect in info.value.errors[0] and "reference.py:cost" in info.value.errors[0]


@pytest.mark.slow
def test_sol_with_a_bad_hook_is_one_line_and_json_stays_json(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    bad = _ragged(tmp_path / "inf", cost_line='{"flops": float("inf"), "bytes": 64}')
    cli = subprocess.run([sys.executable, "-m", "solbench", "sol", str(bad), "--gpu", "h200_sxm", "--json"],
                         capture_output=True, text=True, env=env)
    assert cli.returncode != 0 and "Traceback" not in cli.stderr and len(cli.stderr.strip().splitlines()) == 1
    no_bytes = _ragged(tmp_path / "nobytes", cost_line='{"flops": 64, "bytes": 0}')  # intensity 64/0
    cli = subprocess.run([sys.executable, "-m", "solbench", "sol", str(no_bytes), "--gpu", "h200_sxm", "--json"],
                         capture_output=True, text=True, env=env)
    assert cli.returncode == 0, cli.stderr
    rows = json.loads(cli.stdout, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert rows[0]["arithmetic_intensity"] is None and rows[0]["flops"] == 64


@pytest.mark.slow
def test_a_megabyte_message_from_a_hook_is_cut(tmp_path):
    folder = _ragged(tmp_path)
    ref = folder / "reference.py"
    ref.write_text(ref.read_text().replace('    rows = int(inputs["indptr"][-1])', '    raise ValueError("A" * 5_000_000)'))
    cli = subprocess.run([sys.executable, "-m", "solbench", "sol", str(folder), "--gpu", "h200_sxm"],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert cli.returncode != 0 and "cost hook reference.py:cost raised ValueError: AAAA" in cli.stderr
    assert len(cli.stdout + cli.stderr) < 3000 and len(cli.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("line", "expect"), [
    ('return {"indptr": indptr, "scale": "0.5"}', "scalar input scale: '0.5' is not a number"),
    ('return {"indptr": indptr, "scale": float("nan")}', "scalar input scale: nan is not a finite number"),
    ('return {"indptr": indptr, "scale": torch.tensor(0.5)}', None),
    ('return [indptr]', "must return a dict of inputs, not list"),
    ('return {"indptr": torch.randn(3, generator=torch.Generator("meta"))}', "input generator reference.py:make_inputs raised"),
    ('raise RuntimeError("Expected a \'cpu\' device type for generator\\nbut found \'cuda\'")',
     "raised RuntimeError: Expected a 'cpu' device type for generator but found 'cuda'"),
])
def test_input_generator_failures_and_scalars_are_one_line(tmp_path, line, expect):
    p = load_problem(_ragged(tmp_path, generator_line=line))
    axes = p.resolve_axes(p.workloads[0])
    if expect is None:
        assert make_inputs(p, axes, 1)["scale"] == 0.5 and type(make_inputs(p, axes, 1)["scale"]) is float
        return
    with pytest.raises(ProblemError) as info:
        make_inputs(p, axes, 1)
    assert len(info.value.errors) == 1 and "\n" not in info.value.errors[0]
    assert expect in info.value.errors[0]
