"""Stopping and clean-up: signals to the parent, folders of dead runs, children that left the worker's
session, a hanging candidate's timeouts, the record's log, and a run by a non-root user.

Run as root here: the workers run as ``nobody``; the non-root run drops the whole ``solbench run``
to ``nobody`` first (the Python installation may sit in root's home, so it gets the private view a
worker gets).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

import solbench
from solbench.data.results import read_records
from solbench.engine.options import RunOptions
from solbench.engine.runner import Runner
from solbench.worker import cleanup
from solbench.worker.cleanup import OWNER_FILE, PREFIX, remove_tree, sweep_dead_workers

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parent
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"
EXPLOITS = HERE / "adversarial" / "candidates"
ADVERSARIAL_FIXTURE = HERE / "adversarial" / "fixtures" / "attn_o_proj_residual"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (runs as nobody)")
NOBODY = 65534


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def _with_cmdline(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and _alive(int(entry)):
                found.append(int(entry))
    return found


def _worker_of(folder: Path) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == str(folder):
                    return int(entry)
            except OSError:
                continue
    return None


# --- signals ------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_signal_to_the_parent_kills_the_worker_and_removes_its_folder(tmp_path: Path, sig: signal.Signals) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "solbench", "run", str(TINY / "scaled_add"), "--device", "cpu",
                             "--workload", "n4", "-s", str(CANDIDATES / "hangs.py"), "-o", str(tmp_path / "r.jsonl"),
                             "--compile-timeout", "120", "--workers-ahead", "0", "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker, folder = None, None
    try:
        deadline = time.monotonic() + 120
        while worker is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            folder = next(iter(tmp.glob(PREFIX + "*")), None)
            worker = _worker_of(folder) if folder else None
        assert worker is not None, proc.communicate(timeout=30)[0] if proc.poll() is not None else "no worker"
        time.sleep(1.0)  # the worker imports torch, then the candidate hangs in its first call
        proc.send_signal(sig)
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "Traceback" not in output, output
    assert not folder.exists() and not list(tmp.glob(PREFIX + "*"))
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)


def test_stop_on_signals_raises_exit_and_restores_the_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info, cleanup.stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert info.value.code == 128 + signal.SIGTERM and signal.getsignal(signal.SIGTERM) == before


# --- folders of dead runs -----------------------------------------------------------------------

def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_start_sweeps_the_folders_of_dead_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead, live, unmarked, foreign = (tmp_path / f"{PREFIX}{n}" for n in ("dead", "live", "unmarked", "foreign"))
    for folder in (dead, live, unmarked, foreign):
        folder.mkdir()
    (dead / OWNER_FILE).write_text(f"{_dead_pid()} 12345\n")
    locked = dead / "jit-cache" / "locked"
    locked.mkdir(parents=True)
    (locked / "blob").write_bytes(b"x" * 100)
    locked.chmod(0)
    cleanup.write_owner(live)
    (foreign / OWNER_FILE).write_text(f"{_dead_pid()} 1\n")
    if os.geteuid() == 0:
        os.chown(foreign / OWNER_FILE, NOBODY, NOBODY)  # another user's file: never trusted
    else:
        foreign = live
    # Unmarked (an older solbench): removed when abandoned for an hour and no process works in it.
    abandoned, busy = tmp_path / f"{PREFIX}abandoned", tmp_path / f"{PREFIX}busy"
    for folder in (abandoned, busy):
        folder.mkdir()
        os.utime(folder, (time.time() - 7200, time.time() - 7200))
    sleeper = subprocess.Popen(["sleep", "60"], cwd=busy)
    try:
        assert sweep_dead_workers(tmp_path) == [abandoned, dead]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not dead.exists() and live.exists() and unmarked.exists() and foreign.exists() and busy.exists()
    # A run's start sweeps the temp folder.
    (dead.mkdir(), (dead / OWNER_FILE).write_text(f"{_dead_pid()} 1\n"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    Runner(RunOptions(device="cpu"), tmp_path / "r.jsonl")
    assert not dead.exists() and live.exists()


@as_root
def test_remove_tree_opens_folders_a_candidate_locked(tmp_path: Path) -> None:
    """As a non-root owner (nobody here): a folder of mode 0o300 cannot be listed, so rmtree alone
    would leave it; remove_tree opens it up first."""
    top = tmp_path / "p" / "w"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_text("x")
    for p in (top.parent, top, top / "a", top / "a" / "b", top / "a" / "b" / "f"):
        os.chown(p, NOBODY, NOBODY)
    (top / "a").chmod(0o300)
    code = f"""
        from pathlib import Path
        from solbench.guards.account import drop_privileges, private_view
        from solbench.guards.sandbox import python_paths
        from solbench.worker.cleanup import remove_tree
        private_view([*python_paths(), {str(top)!r}], {NOBODY}, {NOBODY}, None)
        drop_privileges({NOBODY}, {NOBODY})
        remove_tree(Path({str(top)!r}))
        print(Path({str(top)!r}).exists())
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.stdout.strip() == "False", done.stderr
    remove_tree(top)


def _nest(top: Path, depth: int) -> Path:
    """``depth`` folders inside each other below ``top`` (made by descriptor: the path is too long)."""
    top.mkdir(parents=True)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as fh:
        fh.write("x")
    os.close(fd)
    return top


@pytest.mark.slow
def test_remove_tree_and_sweep_handle_a_3000_level_tree(tmp_path: Path) -> None:
    top = _nest(tmp_path / "w" / "home", 3000)
    remove_tree(top)
    assert not top.exists()
    dead = tmp_path / f"{PREFIX}dead"
    _nest(dead / "home", 3000)
    (dead / OWNER_FILE).write_text(f"{_dead_pid()} 1\n")
    assert sweep_dead_workers(tmp_path) == [dead] and not dead.exists()


@as_root
def test_sweep_skips_another_users_locked_folder(tmp_path: Path) -> None:
    """A folder named like a worker's that another user made with mode 700 (root's here, seen by
    nobody) is left alone: the sweep does not raise, and a run can start."""
    tmp_path.chmod(0o777)
    (tmp_path / f"{PREFIX}planted").mkdir(mode=0o700)
    code = f"""
        from solbench.guards.account import drop_privileges, private_view
        from solbench.guards.sandbox import python_paths
        from solbench.worker.cleanup import sweep_dead_workers
        private_view([*python_paths(), {str(tmp_path)!r}], {NOBODY}, {NOBODY}, None)
        drop_privileges({NOBODY}, {NOBODY})
        print(sweep_dead_workers({str(tmp_path)!r}))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.stdout.strip() == "[]", done.stderr


# --- a parent killed with SIGKILL ---------------------------------------------------------------

# SOLBENCH_STOP_DEVICE=cuda: the same on a GPU (the worker and the candidate hold a CUDA context).
STOP_DEVICE = os.environ.get("SOLBENCH_STOP_DEVICE", "cpu")
SLEEPER = """
import subprocess

import torch

torch.ones(1, device="{device}")
subprocess.Popen(["sleep", "{marker}"], start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(x, y):
    return x * 2 + y
"""
# A parent that starts a worker, has it load the candidate (which setsid-forks a sleeper), and waits.
PARENT = """
import sys, time
from solbench.worker.client import WorkerClient
client = WorkerClient({device!r}, reads=({folder!r},))
client.spawn()
client.wait_ready(300)
client.request({{"op": "load", "path": {path!r}, "device": {device!r}}}, 120, 0)
print(client.proc.pid, flush=True)
time.sleep(600)
"""


def _killed_parent(tmp_path: Path, kill_worker: bool) -> tuple[str, int]:
    """SIGKILL a parent (and its worker with ``kill_worker``) once the candidate's sleeper runs; the
    sleeper's marker and the worker's pid."""
    marker = f"7{uuid.uuid4().int % 10**6:06d}.25"
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "sleeper.py").write_text(SLEEPER.format(marker=marker, device=STOP_DEVICE))
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o777)
    tmp.chmod(0o777)
    code = PARENT.format(folder=str(folder), path=str(folder / "sleeper.py"), device=STOP_DEVICE)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT)))
    try:
        worker = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while not _with_cmdline(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _with_cmdline(marker), "the candidate's sleeper never started"
        if kill_worker:
            os.kill(worker, signal.SIGKILL)
    finally:
        parent.kill()
        parent.wait()
    return marker, worker


@pytest.mark.slow
def test_sigkill_of_the_parent_leaves_no_candidate_process(tmp_path: Path) -> None:
    """The worker, idle in its wait for the next request, sees its channel close and kills the
    setsid child before it exits (it used to exit alone, and the child ran on under init)."""
    marker, worker = _killed_parent(tmp_path, kill_worker=False)
    try:
        deadline = time.monotonic() + 10
        while (_with_cmdline(marker) or _alive(worker)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _with_cmdline(marker) == [] and not _alive(worker)
    finally:
        for pid in _with_cmdline(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_the_next_start_kills_what_a_killed_run_left(tmp_path: Path) -> None:
    """Parent and worker killed at once (nothing of solbench left to clean up): the next start's sweep
    kills the candidate's setsid child, found by its working folder, environment or cgroup."""
    marker, _ = _killed_parent(tmp_path, kill_worker=True)
    try:
        time.sleep(1.0)
        assert _with_cmdline(marker), "the sleeper died with its worker: nothing left for the sweep to do"
        assert len(sweep_dead_workers(tmp_path / "tmp")) == 1
        deadline = time.monotonic() + 5
        while _with_cmdline(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _with_cmdline(marker) == []
    finally:
        for pid in _with_cmdline(marker):
            os.kill(pid, signal.SIGKILL)


# --- processes that left the worker's session -----------------------------------------------------

def _setsid_candidate(folder: Path, marker: str, then: str) -> Path:
    folder.mkdir()
    path = folder / "setsid_many.py"
    path.write_text(textwrap.dedent(f"""
        import os, subprocess, torch

        def run(x, y):
            for _ in range(200):
                subprocess.Popen(["sleep", "{marker}"], start_new_session=True, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            {then}
            return torch.add(y, x, alpha=2)
    """))
    return path


def _run_setsid(tmp_path: Path, then: str) -> tuple[str, str]:
    marker = f"6{uuid.uuid4().int % 10**6:06d}.5"  # a sleep length no one else uses
    candidate = _setsid_candidate(tmp_path / "c", marker, then)
    try:
        result = solbench.run_problems([TINY / "scaled_add"], [candidate], device="cpu", workloads=["n4"],
                                       output=tmp_path / "r.jsonl", budget_s=0.05, compile_timeout_s=120,
                                       workers_ahead=0)
        deadline = time.monotonic() + 5
        while _with_cmdline(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _with_cmdline(marker)
    finally:
        for pid in _with_cmdline(marker):
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"{len(left)} of 200 setsid children survived"
    (record,) = result.records
    return record.status, record.reason or ""


def test_setsid_children_are_killed_by_the_proc_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a cgroup: the worker is their subreaper, so the parent finds them by parent chain."""
    monkeypatch.setattr("solbench.worker.client.join_cgroup", lambda pid, name: None)
    status, reason = _run_setsid(tmp_path, "")
    assert status == "REWARD_HACK" and "left process" in reason


def test_setsid_children_of_a_worker_that_died_are_killed_by_its_cgroup(tmp_path: Path) -> None:
    """The worker exits while 200 children in new sessions live on: only its cgroup still holds them."""
    base = cleanup._cgroup_base()
    try:
        (base / f"{PREFIX}probe").mkdir()
        (base / f"{PREFIX}probe").rmdir()
    except (OSError, TypeError):
        pytest.skip("no writable cgroup v2 here")
    status, reason = _run_setsid(tmp_path, "os._exit(3)")
    assert status == "RUNTIME_ERROR" and "exited with code 3" in reason


# --- a hanging candidate --------------------------------------------------------------------------

def test_a_first_call_that_timed_out_gets_no_second_compile_timeout(tmp_path: Path) -> None:
    t0 = time.monotonic()
    result = solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "hangs.py"], device="cpu",
                                   workloads=["n4", "n32"], output=tmp_path / "r.jsonl", compile_timeout_s=6,
                                   timeout_s=1, workers_ahead=0)
    first, second = result.records
    assert first.status == second.status == "TIMEOUT"
    assert "compile timeout (6 s)" in first.reason and "workload's timeout (1 s" in second.reason, second.reason
    assert time.monotonic() - t0 < 6 + 6 + 2 * 30  # not two compile timeouts (start-ups take the rest)


# --- the log ------------------------------------------------------------------------------------

def test_the_log_is_the_candidates_capped_output_and_can_be_left_out(tmp_path: Path) -> None:
    loud = tmp_path / "c" / "loud.py"
    loud.parent.mkdir()
    loud.write_text("import torch\n\ndef run(x, y):\n    print('\\x1b[31mred\\x1b[0m\\rline\\x07', flush=True)\n"
                    "    return torch.add(y, x, alpha=2)\n")
    common = dict(device="cpu", workloads=["n4"], budget_s=0.05, compile_timeout_s=120, workers_ahead=0)
    kept = solbench.run_problems([TINY / "scaled_add"], [loud, CANDIDATES / "noisy.py"], output=tmp_path / "a.jsonl",
                                 log_bytes=2000, **common)
    left_out = solbench.run_problems([TINY / "scaled_add"], [loud], output=tmp_path / "b.jsonl", log_bytes=0, **common)
    by_name = {r.solution: r for r in kept.records}
    assert "red\nline" in by_name["loud"].log and "\x1b" not in by_name["loud"].log and "\x07" not in by_name["loud"].log
    noisy = by_name["noisy"].log
    assert "LAST_LINE_MARKER" in noisy and noisy.startswith("[... ") and len(noisy) < 2100
    assert left_out.records[0].log == "" and left_out.records[0].status == "PASSED"


# --- a run by a non-root user ---------------------------------------------------------------------

@as_root
def test_a_non_root_run_keeps_its_results_and_its_place_with_the_oom_killer(tmp_path: Path) -> None:
    """``solbench run`` as nobody (workers as the same user): the exploits that chmod the results,
    raise the parent's oom_score_adj or read the user's home get nothing, every record is written,
    and the parent's oom_score_adj is unchanged; a canary in the (fake) home is not readable."""
    work = tmp_path / "nonroot"
    home = work / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("CANARY\n")
    probe = work / "probe"
    probe.mkdir()
    (probe / "canary.py").write_text(textwrap.dedent(f"""
        import torch

        def run(attn, weight, residual):
            try:
                open({str(home / ".ssh" / "id_rsa")!r}).read()
                return torch.addmm(residual, attn, weight.t())
            except OSError:
                return torch.zeros_like(residual)
    """))
    (work / "tmp").mkdir()
    for dirpath, dirs, files in os.walk(work):
        for name in [dirpath, *(os.path.join(dirpath, f) for f in dirs + files)]:
            os.chown(name, NOBODY, NOBODY)
    exploits = ["chmod_results", "oom_redirect", "read_home_secret"]
    argv = ["-m", "solbench", "run", str(ADVERSARIAL_FIXTURE), "--device", "cpu", "--workload", "t256",
            "--budget", "0.05", "-o", "out.jsonl", "-q", "--workers-ahead", "0", "-s", str(probe / "canary.py"),
            *(a for name in exploits for a in ("-s", str(EXPLOITS / f"{name}.py")))]
    code = f"""
        import os, sys
        from solbench.guards.account import drop_privileges, private_view
        from solbench.guards.sandbox import python_paths
        private_view([*python_paths(), {str(ROOT)!r}, {str(work)!r}], {NOBODY}, {NOBODY}, None)
        drop_privileges({NOBODY}, {NOBODY})
        print("oom before", open("/proc/self/oom_score_adj").read().strip(), flush=True)
        os.execv(sys.executable, [sys.executable, *{argv!r}])
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(home), TMPDIR=str(work / "tmp"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=work, capture_output=True, text=True,
                          env=env, timeout=600)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    rows, warnings = read_records([work / "out.jsonl"])
    assert not warnings and sorted(r["solution"] for r in rows) == sorted(["canary", *exploits]), done.stderr
    assert {r["status"] for r in rows} == {"INCORRECT"}, [(r["solution"], r["status"], r["reason"]) for r in rows]
    assert (work / "out.jsonl").stat().st_mode & 0o777 != 0 and (work / "out.jsonl").stat().st_uid == NOBODY
    assert not list((work / "tmp").glob(PREFIX + "*"))
