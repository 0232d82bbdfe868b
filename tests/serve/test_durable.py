"""The queue survives a SIGKILL: a server killed while one submission runs and others wait, then
started again on the same database, scores every accepted submission exactly once; the killed
server's job does not score on behind its back."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from serve_fixtures import Server, free_port, make_token, request, submit, wait_final

pytestmark = pytest.mark.slow

SLOW_START = "import time\nimport torch\n\ntime.sleep({delay})\n\n\ndef run(x, y):\n    return torch.add(y, x, alpha=2)\n"


def _jobs_of(server: Server) -> list[int]:
    """Job processes started for this server's database (their command line names the job file)."""
    folder = str(Path(server.db[len("sqlite:///"):]).with_suffix(".jobs"))
    pids = []
    for d in Path("/proc").iterdir():
        try:
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if d.name.isdigit() and "solbench.serve.job" in cmd and folder in cmd:
            pids.append(int(d.name))
    return pids


def _wait_running(server: Server, sub_id: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sub = json.loads(request(server, "GET", f"/v1/submissions/{sub_id}")[1])
        if sub["state"] == "running" and _jobs_of(server):
            return
        time.sleep(0.3)
    raise AssertionError(f"submission {sub_id} never ran: {server.log_text()}")


@pytest.mark.timeout(900)
def test_sigkill_mid_queue_then_restart_scores_each_submission_once(tmp_path):
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    token = make_token(db)
    log = tmp_path / "server.log"
    server = Server(db, free_port(), ("--lease", "2", "--batch", "1"), log=log).start()
    files = []
    for i, delay in enumerate((8, 0, 0)):  # the first one is still starting when the server dies
        f = tmp_path / f"cand{i}.py"
        f.write_text(SLOW_START.format(delay=delay))
        files.append(f)
    ids = []
    for f in files:
        status, made = submit(server, token, f, ["tiny.scaled_add"], workloads=["n4"])
        assert status == 201, made
        ids.append(made["id"])
    _wait_running(server, ids[0])
    jobs = _jobs_of(server)
    server.kill(signal.SIGKILL)
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{p}").exists() and "\nState:\tZ" not in Path(f"/proc/{p}/status").read_text()
              for p in jobs if Path(f"/proc/{p}/status").exists()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in jobs if Path(f"/proc/{p}/status").exists()
                and "\nState:\tZ" not in Path(f"/proc/{p}/status").read_text()], "the job outlived its server"
    with sqlite3.connect(tmp_path / "serve.db") as conn:
        states = dict(conn.execute("SELECT id, state FROM submissions").fetchall())
    assert states == {ids[0]: "running", ids[1]: "queued", ids[2]: "queued"}

    server = Server(db, free_port(), ("--lease", "2", "--batch", "1"), log=log).start()
    try:
        subs = [wait_final(server, i) for i in ids]
    finally:
        server.kill(signal.SIGTERM)
    assert [s["state"] for s in subs] == ["done"] * 3, [s.get("error") for s in subs]
    assert subs[0]["attempts"] == 2 and subs[1]["attempts"] == 1  # the running one ran again, the others once
    with sqlite3.connect(tmp_path / "serve.db") as conn:
        rows = conn.execute("SELECT submission_id, problem, workload, candidate, status FROM results "
                            "ORDER BY submission_id").fetchall()
    assert rows == [(i, "tiny.scaled_add", "n4", f"cand{n}", "PASSED") for n, i in enumerate(ids)]
    assert "Traceback" not in log.read_text(errors="replace")


@pytest.mark.timeout(300)
def test_sigterm_puts_the_running_submission_back_without_an_attempt(tmp_path):
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    token = make_token(db)
    server = Server(db, free_port(), ("--batch", "1"), log=tmp_path / "server.log").start()
    f = tmp_path / "sleepy.py"
    f.write_text(SLOW_START.format(delay=600))
    status, made = submit(server, token, f, ["tiny.scaled_add"], workloads=["n4"])
    assert status == 201
    _wait_running(server, made["id"])
    jobs = _jobs_of(server)
    server.kill(signal.SIGTERM)
    assert server.proc.returncode in (0, -signal.SIGTERM), server.log_text()  # uvicorn re-raises it when done
    with sqlite3.connect(tmp_path / "serve.db") as conn:
        state, attempts = conn.execute("SELECT state, attempts FROM submissions").fetchone()
    assert (state, attempts) == ("queued", 0)
    for p in jobs:
        assert not Path(f"/proc/{p}").exists() or "\nState:\tZ" in Path(f"/proc/{p}/status").read_text()
