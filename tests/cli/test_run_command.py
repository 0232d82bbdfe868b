"""`solbench run` end to end on the CPU: every kind of candidate gets its status, the others' records
stay intact, timeouts kill whole process groups, and user errors are one line with exit code 2."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from solbench.data.results import read_records

HERE = Path(__file__).resolve().parents[1]  # tests/
ROOT = HERE.parent
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"

EXPECTED = {
    "honest": {"PASSED"},
    "noisy": {"PASSED"},
    "wrong_values": {"INCORRECT"},
    "wrong_shape": {"INCORRECT"},
    "wrong_dtype": {"INCORRECT"},
    "mutates_input": {"INCORRECT"},
    "honest_only_when_watched": {"INCORRECT"},
    "tensor_subclass": {"INCORRECT", "REWARD_HACK"},  # the guards, when present, call it a hack
    "raises": {"RUNTIME_ERROR"},
    "segfaults": {"RUNTIME_ERROR"},
    "exits_os": {"RUNTIME_ERROR"},
    "exits_sys": {"RUNTIME_ERROR"},
    "forges_channel": {"RUNTIME_ERROR"},
    "hangs": {"TIMEOUT"},
    "spawns_and_hangs": {"TIMEOUT"},
    "syntax_error": {"COMPILE_ERROR"},
    "import_error": {"COMPILE_ERROR"},
    "no_run": {"COMPILE_ERROR"},
}
REASONS = {
    "wrong_values": "outside atol=1e-05",
    "wrong_shape": "has shape (3, 64), expected (4, 64)",
    "wrong_dtype": "has dtype float64, expected float32",
    "mutates_input": "mutated input y",
    # honest while watched, wrong while timed: the burst (timed calls checked after its reply) or the
    # re-check of the timed outputs, whichever sees it first, names it
    "honest_only_when_watched": ("timed call on set", "burst call"),
    "tensor_subclass": "subclass",
    "raises": "ValueError: candidate exploded on purpose (at raises.py:5)",  # the file and line of the raise
    "segfaults": "SIGSEGV",
    "exits_os": "exited with code 0",
    "exits_sys": "sys.exit(0)",
    "forges_channel": "invalid message from the worker",
    "hangs": "the compile timeout (20 s) ran out during round 1",
    "syntax_error": "SyntaxError at line 4",
    "import_error": "No module named 'solbench_no_such_module'",
    "no_run": "defines no run()",
}


def _solbench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


@pytest.fixture(scope="module")
def every_candidate(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    syntax = tmp / "syntax_error.py"
    syntax.write_text('"""Does not parse."""\n\n\ndef run(x, y)\n    return x\n')
    files = [CANDIDATES / f"{n}.py" for n in EXPECTED if n != "syntax_error"] + [syntax]
    out = tmp / "results.jsonl"
    args = ["run", str(TINY / "scaled_add"), "--workload", "n4", "--device", "cpu", "-o", str(out), "--json",
            "--timeout", "5", "--compile-timeout", "20", "--budget", "0.05", "--workers-ahead", "2", "-q"]
    for f in files:
        args += ["-s", str(f)]
    proc = _solbench(*args)
    return proc, out


def test_exit_code_and_json_match_the_file(every_candidate):
    proc, out = every_candidate
    assert proc.returncode == 1, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)
    rows, warnings = read_records([out])
    assert not warnings
    assert [r["solution"] for r in rows] == [r["solution"] for r in printed]
    assert sorted(r["solution"] for r in rows) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_candidate_gets_its_status(every_candidate, name):
    _, out = every_candidate
    rows, _ = read_records([out])
    (rec,) = [r for r in rows if r["solution"] == name]
    assert rec["status"] in EXPECTED[name], rec["reason"]
    if name in REASONS:
        expected = REASONS[name] if isinstance(REASONS[name], tuple) else (REASONS[name],)
        assert any(e in rec["reason"] for e in expected), rec["reason"]
    if rec["status"] == "PASSED":
        assert rec["time_s"] > 0 and rec["sol"] > 0 and rec["timing"]["n"] >= 10
        assert rec["sol"] == pytest.approx(rec["t_ideal_s"] / rec["time_s"])
    else:
        assert rec["time_s"] is None and rec["sol"] is None and rec["reason"]


def test_log_is_kept_size_limited(every_candidate):
    _, out = every_candidate
    rows, _ = read_records([out])
    noisy = next(r for r in rows if r["solution"] == "noisy")
    assert noisy["log"].rstrip().endswith("LAST_LINE_MARKER") and len(noisy["log"]) < 8300
    assert "earlier bytes cut" in noisy["log"]
    segv = next(r for r in rows if r["solution"] == "segfaults")
    assert "Fatal Python error: Segmentation fault" in segv["log"]  # faulthandler's dump


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def test_timeout_kills_the_whole_process_group(every_candidate):
    _, out = every_candidate
    rows, _ = read_records([out])
    rec = next(r for r in rows if r["solution"] == "spawns_and_hangs")
    match = re.search(r"CHILD_PID=(\d+)", rec["log"])
    assert match, rec["log"]
    deadline = time.monotonic() + 5
    while _alive(int(match.group(1))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(match.group(1))), "the candidate's child outlived the timeout"


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """The CLI in this process (no interpreter start-up): its exit code and stderr."""
    from solbench.cli import main

    monkeypatch.setattr(sys, "argv", ["solbench", *args])
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as info:
        main()
    return info.value.code, capsys.readouterr().err


def test_inplace_outputs(monkeypatch, capsys, tmp_path):
    out = tmp_path / "r.jsonl"
    code, _ = _main(monkeypatch, capsys, "run", str(TINY / "row_write"), "--device", "cpu", "-o", str(out),
                    "--budget", "0.05", "-q", "-s", str(CANDIDATES / "row_write_inplace.py"),
                    "-s", str(CANDIDATES / "row_write_copy.py"))
    assert code == 1
    rows, _ = read_records([out])
    status = {r["solution"]: (r["status"], r["reason"]) for r in rows}
    assert status["row_write_inplace"][0] == "PASSED"
    assert status["row_write_copy"][0] == "INCORRECT" and "declared in place of input 'cache'" in status["row_write_copy"][1]


def test_faster_than_the_roofline_is_a_reward_hack(monkeypatch, capsys, tmp_path):
    # A problem that claims 10 TB move per call: any honest time is below what physics allows.
    src = (TINY / "scaled_add" / "problem.yaml").read_text()
    (tmp_path / "problem.yaml").write_text(src.replace("name: tiny.scaled_add", "name: tiny.impossible")
                                           .replace("bytes: auto", "bytes: 10000000000000"))
    (tmp_path / "reference.py").write_text((TINY / "scaled_add" / "reference.py").read_text())
    out = tmp_path / "r.jsonl"
    code, _ = _main(monkeypatch, capsys, "run", str(tmp_path), "--workload", "n4", "--device", "cpu", "-o", str(out),
                    "--budget", "0.05", "-q", "-s", str(CANDIDATES / "honest.py"))
    assert code == 1
    (rec,) = read_records([out])[0]
    assert rec["status"] == "REWARD_HACK" and "faster than the device allows" in rec["reason"]
    assert rec["time_s"] is None and rec["timing"]["median_s"] > 0


def test_kill_mid_run_keeps_earlier_records_and_takes_workers_down(tmp_path):
    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "solbench", "run", str(TINY / "scaled_add"), "--workload", "n4", "--device", "cpu",
           "-o", str(out), "--budget", "0.05", "--timeout", "600", "--compile-timeout", "600", "-q",
           "-s", str(CANDIDATES / "honest.py"), "-s", str(CANDIDATES / "spawns_and_hangs.py")]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        child = None
        while time.monotonic() < deadline and child is None:
            time.sleep(0.5)
            child = _hanging_child(proc.pid)
        assert child is not None, "the hanging candidate never started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    rows, warnings = read_records([out])
    assert not warnings and [r["solution"] for r in rows] == ["honest"]
    end = time.monotonic() + 10
    while (_alive(child) or _workers_of(proc.pid)) and time.monotonic() < end:
        time.sleep(0.2)
    assert not _workers_of(proc.pid), "a worker outlived its parent"
    assert not _alive(child), "the candidate's child outlived the parent"


def _workers_of(parent: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"solbench.worker" in cmd and str(parent).encode() in cmd and _alive(int(d.name)):
                found.append(int(d.name))
    return found


def _hanging_child(parent: int) -> int | None:
    for w in _workers_of(parent):
        try:
            log = next(Path(f"/proc/{w}/cwd").glob("worker.log")).read_text()
        except (OSError, StopIteration):
            continue
        m = re.search(r"CHILD_PID=(\d+)", log)
        if m:
            return int(m.group(1))
    return None


def test_no_guards_warns_and_flags_every_record(monkeypatch, capsys, tmp_path):
    out = tmp_path / "r.jsonl"
    code, err = _main(monkeypatch, capsys, "run", str(TINY / "scaled_add"), "--device", "cpu", "-o", str(out),
                      "--budget", "0.05", "--workload", "n4", "-q", "--no-guards",
                      "-s", str(CANDIDATES / "honest.py"), "-s", str(CANDIDATES / "replaces_findings_hook.py"))
    assert code == 0, err  # the cheat the guards reject passes without them
    assert "warning: guards off (--no-guards)" in err and "never use this for untrusted code" in err
    rows, _ = read_records([out])
    assert [r["status"] for r in rows] == ["PASSED", "PASSED"] and all("guards-off" in r["flags"] for r in rows)


# --- user errors: one line, exit 2, no traceback ------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (["run", str(TINY / "scaled_add"), "-s", "missing.py"], "candidate missing.py not found"),
    (["run", "no_such.problem", "-s", str(CANDIDATES / "honest.py")], "problem 'no_such.problem' not found"),
    (["run", str(TINY / "scaled_add"), "-s", str(CANDIDATES / "honest.py"), "--rounds", "1"], "at least 3"),
    (["run", str(TINY / "scaled_add"), "-s", str(CANDIDATES / "honest.py"), "--workload", "big"], "no workload named"),
    (["run", str(TINY / "scaled_add"), "-s", str(CANDIDATES / "honest.py"), "--device", "cpu", "--gpu", "h999"],
     "unknown GPU 'h999'"),
    (["run", str(TINY / "scaled_add"), "--device", "cpu"], "ships no candidates"),
    (["run", str(TINY / "scaled_add"), "-s", str(CANDIDATES / "honest.py"), "--device", "cpu", "--timing-method",
      "graph"], "timing method 'graph' needs --device cuda"),
])
def test_user_errors(monkeypatch, capsys, args, fragment):
    code, err = _main(monkeypatch, capsys, *args)
    assert code == 2 and fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_honest_only_run_exits_zero(monkeypatch, capsys, tmp_path):
    out = tmp_path / "r.jsonl"
    code, _ = _main(monkeypatch, capsys, "run", str(TINY / "scaled_add"), "--device", "cpu", "-o", str(out),
                    "--budget", "0.05", "--seed", "5", "--workload", "n4", "--workload", "n32",
                    "-s", str(CANDIDATES / "honest.py"))
    assert code == 0
    rows, _ = read_records([out])
    assert [r["workload"] for r in rows] == ["n4", "n32"] and {r["status"] for r in rows} == {"PASSED"}
    assert rows[0]["environment"]["seed"] == 5


# --- CUDA (run on the GPU machine: pytest -q tests/cli/test_run_command.py -k gpu) ------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_candidates_of_every_kind(tmp_path):
    out = tmp_path / "r.jsonl"
    names = ("honest", "gpu_triton", "gpu_cupy", "gpu_load_inline", "gpu_illegal_access_once")
    args = [a for n in names for a in ("-s", str(CANDIDATES / f"{n}.py"))]
    proc = _solbench("run", str(TINY / "scaled_add"), "--device", "cuda", "-o", str(out), "--budget", "0.3", "-q",
                     "--timeout", "60", "--compile-timeout", "300", "--workload", "n4", "--workload", "n131072", *args)
    rows, warnings = read_records([out])
    assert not warnings and len(rows) == 2 * len(names), proc.stderr[-3000:]
    status = {(r["solution"], r["workload"]): r for r in rows}
    bad = status[("gpu_illegal_access_once", "n4")]
    assert bad["status"] == "RUNTIME_ERROR" and "illegal memory access" in bad["reason"], bad["reason"]
    # The poisoned worker was replaced: the same candidate passes the next workload.
    assert status[("gpu_illegal_access_once", "n131072")]["status"] == "PASSED"
    for (name, wl), r in status.items():
        if (name, wl) == ("gpu_illegal_access_once", "n4"):
            continue
        assert r["status"] == "PASSED", (name, wl, r["reason"], r["log"][-2000:])
        assert r["device_type"] == "cuda" and r["gpu_spec"] != "cpu_estimate" and r["roof"] == "datasheet"
        assert 0 < r["sol"] < 1 and r["timing"]["method"] in ("events", "graph")
        assert r["timing"]["flush_bytes"] > 0
        assert r["telemetry"]["available"] is True and r["telemetry"]["sm_max_mhz"] > 0
        assert r["environment"]["gpu_name"] and r["environment"]["driver"]
    assert proc.returncode == 1  # the one failure
