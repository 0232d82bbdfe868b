"""What a new user meets first: --version, readable help, near-miss names, one-line mistakes, Ctrl-C,
progress on a pipe, the run table's layout, the given-file rules of `solbench run`, the CPU demo's spec."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench import api
from solbench._version import __version__
from solbench.cli import _app, app
from solbench.cli.engine import progress_line, results_tables
from solbench.data.record import ResultRecord
from solbench.errors import SolbenchError, did_you_mean

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "problems" / "llama3_1_8b"
COMMANDS = (["run"], ["demo"], ["leaderboard"], ["plot", "roofline"], ["plot", "sol"], ["report"], ["sol"],
            ["list"], ["calibrate"], ["validate"], [])


def invoke(*args: str) -> subprocess.CompletedProcess:
    """The installed entry point's code in a child process, as a user runs it (stdout not a terminal)."""
    return subprocess.run([sys.executable, "-c", "from solbench.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_version_prints_the_package_version():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"solbench {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_what_options_take_never_python_types(command):
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert not re.search(r"<(list\[|bool|str|int|float|path)", res.output), res.output


def test_run_help_words():
    res = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert re.search(r"--solution\s+-s\s+PATH", res.output) and re.search(r"--timeout\s+NUMBER", res.output)
    assert re.search(r"--rounds\s+N\b", res.output) and "PROBLEMS" in res.output


# What the extras bring (pyproject's optional-dependencies): a plain `pip install solbench` has none of them.
EXTRAS = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "psycopg", "ray", "triton", "pynvml", "cupy", "cuda",
          "safetensors")


def test_the_cli_starts_without_any_extra_installed():
    """Every command module is imported at start (registration), so one command shows that all of them load."""
    blocked = f"import sys\nfor m in {EXTRAS!r}: sys.modules[m] = None\nfrom solbench.cli import main\nmain()"
    res = subprocess.run([sys.executable, "-c", blocked, "specs"], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr


def test_did_you_mean_prefers_a_name_cut_short_then_near_misses():
    assert did_you_mean("h200", ["h200_sxm", "b200", "h200_nvl", "l4"]) == " (did you mean 'h200_nvl' or 'h200_sxm' or 'b200'?)"
    assert "'llama3_1_8b.rmsnorm'" in did_you_mean("rmsnorm", ["llama3_1_8b.rmsnorm", "llama3_1_8b.rope"])
    assert did_you_mean("zzz", ["h200_sxm"]) == ""


@pytest.mark.parametrize(("args", "expected"), [
    (["sol", "llama3_1_8b.rmsnorm", "--gpu", "h200"], "did you mean 'h200_nvl' or 'h200_sxm'"),
    (["sol", "llama3_1_8b.rmsnrm", "--gpu", "h200_sxm"], "did you mean 'llama3_1_8b.rmsnorm'"),
    (["sol", "llama3_1_8b.rmsnorm", "--gpu", "h200_sxm", "--workload", "decode_b"], "did you mean 'decode_b1'"),
    (["run", "llama3_1_8b.rmsnorm", "--device", "cpu", "--workload", "decod_b1"], "did you mean 'decode_b1'"),
])
def test_near_miss_names_get_suggestions_on_one_line(args, expected):
    res = invoke(*args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert lines[-1].startswith("error: ") and "" not in lines, repr(res.stderr)  # one line, no blank line before
    assert expected in lines[-1] and "Traceback" not in res.stderr


def test_sol_accepts_the_builtin_cpu_estimate_records_name():
    res = CliRunner().invoke(app, ["sol", "llama3_1_8b.rmsnorm", "--gpu", "cpu_estimate", "--json"])
    assert res.exit_code == 0, res.output
    assert '"t_ideal_s"' in res.output


def test_ctrl_c_prints_a_line_and_exits_130(monkeypatch, capsys):
    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr(_app, "app", interrupted)
    with pytest.raises(SystemExit) as stop:
        _app.main()
    assert stop.value.code == 130
    assert capsys.readouterr().err.startswith("interrupted")


def _record(**kw) -> ResultRecord:
    base = dict(problem="p.op", workload="decode_b1", solution="mine", status="PASSED", device="cpu",
                gpu_spec="cpu_measured", time_s=1e-3, sol=0.5, flops=10, bytes=10, t_ideal_s=5e-4, bound="memory",
                timestamp="2026-12-01T00:00:00+00:00", solbench_version="0.1.0", device_type="cpu",
                timing={"median_s": 1e-3, "p90_s": 1.1e-3, "ci95_rel": 0.01})
    base.update(kw)
    return ResultRecord.model_validate(base)


def test_progress_line_says_what_was_done_and_what_is_left():
    line = progress_line(_record(), 3, 12, 30.0)
    assert line == "[3/12] p.op decode_b1 mine: PASSED 1 ms SOL 0.500 (0:30 elapsed, about 1:30 left)"
    failed = _record(status="COMPILE_ERROR", time_s=None, sol=None, reason="run(x) cannot take 3 inputs")
    assert progress_line(failed, 12, 12, 75.0).endswith("COMPILE_ERROR: run(x) cannot take 3 inputs (1:15 elapsed)")


@pytest.mark.slow
def test_a_candidate_name_cannot_forge_a_progress_line(tmp_path):
    forged = tmp_path / "evil\n[1-1] llama3_1_8b.rmsnorm decode_b1 best: PASSED 1 us SOL 0.990.py"
    forged.write_text("def run(x, weight):\n    return x\n")
    res = invoke("run", "llama3_1_8b.rmsnorm", "-s", str(forged), "--device", "cpu", "--workload", "decode_b1",
                 "-o", str(tmp_path / "r.jsonl"))
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("[1/1] llama3_1_8b.rmsnorm decode_b1 evil\\n[1-1]"), res.stderr
    assert not any(ln.startswith(("[1-1]", "PASSED")) for ln in (res.stdout + res.stderr).splitlines())


def test_run_prints_a_plain_line_per_record_when_stderr_is_not_a_terminal(tmp_path):
    bad = tmp_path / "two_args.py"
    bad.write_text("def run(x, weight):\n    return x\n")
    res = invoke("run", "llama3_1_8b.rmsnorm", "-s", str(bad), "--device", "cpu", "--workload", "decode_b1",
                 "-o", str(tmp_path / "r.jsonl"))
    assert res.returncode == 1, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("[1/1] llama3_1_8b.rmsnorm decode_b1 two_args: COMPILE_ERROR")
    # The piped table is not cut at 80 columns: the whole reason is there, on whole lines.
    assert "COMPILE_ERROR" in res.stdout and "run(x, weight) cannot take the 3 inputs (x, weight, eps)" in \
        " ".join(res.stdout.split())
    assert "…" not in res.stdout
    assert not list(tmp_path.glob("*.lock"))


def test_run_table_flags_a_noisy_timing():
    from rich.console import Console

    noisy = _record(timing={"median_s": 1e-3, "p90_s": 30e-3, "ci95_rel": 31.0})
    console = Console(width=200, record=True)
    for table in results_tables([noisy, _record(workload="w2")]):
        console.print(table)
    text = console.export_text()
    rows = {ln.split("│")[1].strip(): ln for ln in text.splitlines() if ln.startswith("│")}
    assert "noisy" in rows["decode_b1"] and "95% interval" in rows["decode_b1"]
    assert "noisy" not in rows["w2"]


def test_a_given_file_that_cannot_take_another_problems_inputs_is_refused_before_running():
    swiglu_eager = PROBLEMS / "swiglu" / "solutions" / "torch_eager.py"
    with pytest.raises(SolbenchError, match=r"does not fit llama3_1_8b\.rmsnorm: run\(gate_up\) cannot take the 3 "
                                            r"inputs \(x, weight, eps\)"):
        api.plan_run(["llama3_1_8b.rmsnorm", "llama3_1_8b.swiglu"], [swiglu_eager])


def test_a_given_file_named_like_a_problems_own_candidate_is_named_by_its_folder(tmp_path):
    own = PROBLEMS / "rmsnorm" / "solutions" / "torch_eager.py"
    mine = tmp_path / "my_kernels" / "torch_eager.py"
    mine.parent.mkdir()
    mine.write_text(own.read_text())
    plan = api.plan_run(["llama3_1_8b.rmsnorm"], [mine])
    assert [c.name for c in plan[0].candidates] == ["my_kernels/torch_eager"]
    plan = api.plan_run(["llama3_1_8b.rmsnorm"], [own])  # the problem's own file keeps its name
    assert [c.name for c in plan[0].candidates] == ["torch_eager"]


def test_plot_into_a_missing_folder_is_an_error_not_a_new_folder(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text(_record().to_json_line())
    target = tmp_path / "nope" / "x.png"
    res = CliRunner().invoke(app, ["plot", "roofline", str(results), "-o", str(target)])
    assert res.exit_code == 2 or "no folder" in str(res.exception)
    assert not target.parent.exists()


@pytest.mark.slow
def test_cpu_demo_measures_the_cpu_and_says_so(tmp_path):
    heard: list[str] = []
    path, note = api.demo_cpu_spec(tmp_path, heard.append)
    assert heard and "measuring this CPU's ceilings" in heard[0]
    from solbench.data.hardware import load_spec

    spec = load_spec(path)
    assert spec.kind == "measured" and spec.device_type == "cpu" and path.parent == tmp_path
    assert "measured ceilings" in note and str(path) in note
