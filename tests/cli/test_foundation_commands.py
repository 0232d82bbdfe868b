"""The file-only commands, through the real console script: output contracts and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = "problems/llama3_1_8b/attn_o_proj_residual"


def solbench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solbench", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_sol_json_contract():
    r = solbench("sol", SEED, "--gpu", "h200_sxm", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    keys = {"workload", "flops", "bytes", "arithmetic_intensity", "t_compute_s", "t_memory_s", "t_ideal_s", "bound"}
    assert rows and all(set(row) == keys for row in rows)
    decode = next(row for row in rows if row["workload"] == "decode_b1")
    # Hand arithmetic: 2*1*4096*4096 FLOPs; weight + 3 vectors in bf16
    assert decode["flops"] == 2 * 4096 * 4096
    assert decode["bytes"] == (4096 * 4096 + 3 * 4096) * 2
    assert decode["bound"] == "memory"
    assert decode["t_ideal_s"] == pytest.approx(decode["bytes"] / 4.8e12)
    big = max(rows, key=lambda row: row["flops"])
    assert big["bound"] == "compute" and big["t_ideal_s"] == pytest.approx(big["flops"] / 989.4e12)


def test_sol_by_name_and_one_workload():
    r = solbench("sol", "llama3_1_8b.attn_o_proj_residual", "--gpu", "h100_sxm", "--workload", "decode_b1", "--json")
    assert r.returncode == 0, r.stderr
    assert [row["workload"] for row in json.loads(r.stdout)] == ["decode_b1"]


def test_sol_table_is_readable():
    r = solbench("sol", SEED, "--gpu", "h200_sxm")
    assert r.returncode == 0 and "compute" in r.stdout and "memory" in r.stdout


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["sol", SEED, "--gpu", "h900"], "unknown GPU 'h900'"),
        (["sol", "no.such_problem", "--gpu", "h200_sxm"], "problem 'no.such_problem' not found"),
        (["sol", SEED, "--gpu", "h200_sxm", "--workload", "nope"], "no workload 'nope'"),
    ],
)
def test_user_errors_are_one_line(args, expect):
    r = solbench(*args)
    assert r.returncode == 2
    assert expect in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_validate_reports_every_error_and_exits_1(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    (good / "problem.yaml").write_text((ROOT / SEED / "problem.yaml").read_text())
    (good / "reference.py").write_text((ROOT / SEED / "reference.py").read_text())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "problem.yaml").write_text("name: [oops\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "problem.yaml").write_text("")
    r = solbench("validate", str(tmp_path))
    assert r.returncode == 1
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert any("bad/problem.yaml: YAML syntax error" in line for line in lines)
    assert any("empty/problem.yaml: file is empty" in line for line in lines)
    assert not any("good" in line for line in lines)
    assert "Traceback" not in r.stderr


def test_validate_shipped_files():
    r = solbench("validate", "problems", "hardware_specs")
    assert r.returncode == 0, r.stderr


def test_list_and_specs_and_schema():
    r = solbench("list", "--format", "json")
    assert r.returncode == 0, r.stderr
    names = [p["name"] for p in json.loads(r.stdout)]
    assert "llama3_1_8b.attn_o_proj_residual" in names
    r = solbench("list", "--format", "markdown")
    assert r.stdout.startswith("| problem |")
    r = solbench("specs", "--format", "json")
    assert {"h200_sxm", "mi300x"} <= {s["id"] for s in json.loads(r.stdout)}
    r = solbench("schema", "problem")
    assert "workloads" in json.loads(r.stdout)["properties"]
