"""Ctrl-C (SIGINT) on the real `solbench` process, piped and in a terminal: one line, exit 130, no
traceback; while the command line loads and while a worker runs a candidate."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from solbench.errors import INTERRUPTED

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny" / "scaled_add"
HANGS = ROOT / "tests" / "candidates" / "hangs.py"

pytestmark = pytest.mark.slow  # a run that starts a worker, twice


def _workers_of(pid: int) -> list[int]:
    """Pids of the solbench workers under ``pid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"solbench.worker" in cmd and int(stat.rsplit(")", 1)[1].split()[1]) in (pid, *_children(pid)):
            found.append(int(entry.name))
    return found


def _maps(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/maps").read_bytes()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _interrupt(tmp_path: Path, terminal: bool, when: str) -> tuple[int, str]:
    """Start `solbench run` on a candidate that hangs; SIGINT it at ``when`` ('loading': while torch loads,
    'running': once its worker runs); its exit code and what it wrote on standard error."""
    args = [sys.executable, "-m", "solbench", "run", str(TINY), "--device", "cpu", "--workload", "n4", "-s", str(HANGS),
            "-o", str(tmp_path / "r.jsonl"), "--timeout", "120"]
    if terminal:
        leader, follower = pty.openpty()
        err_r, err_w = leader, follower
    else:
        err_r, err_w = os.pipe()
    # SIGINT as a terminal delivers it: a test runner started in the background may ignore it, and children inherit that
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=err_w, stderr=err_w, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(err_w)
    deadline = time.monotonic() + 120
    if when == "running":
        while not _workers_of(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(1.0)  # the worker is loading or calling the candidate
    else:  # once torch's library is mapped: the command line is loading (torch takes seconds)
        while b"libtorch" not in _maps(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    chunks = []
    while True:
        try:
            chunk = os.read(err_r, 65536)
        except OSError:  # a terminal's leader reads EIO once the process is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(err_r)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_ctrl_c_during_a_run_prints_one_line_and_exits_130(tmp_path, terminal):
    code, err = _interrupt(tmp_path, terminal, "running")
    assert code == 130, err
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)  # a terminal's progress bar and colours
    lines = [ln.strip() for ln in plain.replace("\r", "\n").splitlines() if ln.strip()]
    assert lines[-1] == INTERRUPTED and "Traceback" not in err, err
    assert sum(INTERRUPTED in ln for ln in lines) == 1


def test_ctrl_c_while_the_command_line_loads_prints_one_line(tmp_path):
    code, err = _interrupt(tmp_path, False, "loading")
    assert code == 130, err
    assert err.strip() == INTERRUPTED, err
