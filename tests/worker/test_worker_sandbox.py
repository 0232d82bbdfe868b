"""A real worker's limits, probed from inside by a candidate: the account it runs as, what it can read,
chmod, write in /proc and leave in shared memory, its HOME, temp and cache folders, and the log the
parent reads back. The probe reports by raising (the reply's message is its JSON).

Run as root, the worker is probed both as ``nobody`` (the default ``worker_user``) and as root
(Landlock and seccomp alone). The GPU test is for the GPU machine:
``python -m pytest -q -p no:cacheprovider tests/worker/test_worker_sandbox.py -k gpu``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from solbench.guards.sandbox import landlock_abi
from solbench.worker.client import WorkerClient, clean_log

NOBODY = (65534, 65534)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the privilege drop)")
landlock = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")

PROBE = '''
import json, os, subprocess


def _try(fn):
    try:
        value = fn()
        return "ok" if value is None else str(value)[:40]
    except OSError as err:
        return type(err).__name__


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def run(x, y):
    ppid = os.getppid()
    raise RuntimeError(json.dumps({
        "uid": os.getuid(), "home": os.environ["HOME"], "tmp": os.environ["TMPDIR"],
        "cache": os.environ.get("XDG_CACHE_HOME"), "triton": os.environ.get("TRITON_CACHE_DIR"),
        "secret_env": os.environ.get("SOLBENCH_TEST_API_TOKEN"),
        "fake_home": _try(lambda: open(FAKE_HOME_SECRET).read()),
        "shadow": _try(lambda: open("/etc/shadow").read()),
        "passwd": _try(lambda: len(open("/etc/passwd").read()) > 0),
        "chmod_results": _try(lambda: os.chmod(RESULTS, 0)),
        "chmod_results_folder": _try(lambda: os.chmod(os.path.dirname(RESULTS), 0)),
        "chmod_own": _try(lambda: os.chmod(os.getcwd(), 0o777)),
        "write_results": _try(lambda: _write(RESULTS, "forged")),
        "parent_oom": _try(lambda: _write(f"/proc/{ppid}/oom_score_adj", "1000")),
        "own_oom": open("/proc/self/oom_score_adj").read().strip(),
        "shm": _try(lambda: _write("/dev/shm/solbench-probe-" + str(os.getpid()), "x")),
        "child_uid": subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip(),
    }))
'''


def _probe(tmp_path: Path, account: tuple[int, int] | None, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, Path]:
    home_secret = tmp_path / "home" / ".ssh" / "id_rsa"
    home_secret.parent.mkdir(parents=True)
    home_secret.write_text("CANARY\n")
    results = tmp_path / "results" / "runs.jsonl"
    results.parent.mkdir()
    results.write_text('{"status": "PASSED"}\n')
    for path in (tmp_path, tmp_path / "home", home_secret.parent, results.parent):
        path.chmod(0o755)
    home_secret.chmod(0o644)
    results.chmod(0o666)  # writable by anyone: only the sandbox stands in the way
    folder = tmp_path / "candidate"
    folder.mkdir()
    (folder / "probe.py").write_text(f"FAKE_HOME_SECRET = {str(home_secret)!r}\nRESULTS = {str(results)!r}\n" + PROBE)
    monkeypatch.setenv("SOLBENCH_TEST_API_TOKEN", "not-for-workers")
    client = WorkerClient("cpu", account=account, reads=(str(folder),))
    client.spawn()
    client.wait_ready(300)
    try:
        assert client.request({"op": "load", "path": str(folder / "probe.py"), "device": "cpu"}, 60, 0) == {"ok": True, "setup": False}
        reply = client.request({"op": "call", "inputs": [torch.ones(1), torch.ones(1)], "expect": []}, 60, 1 << 16)
        message = reply["message"]
        # The message names where it was raised after the JSON: " (at probe.py:LINE)".
        found, _ = json.JSONDecoder().raw_decode(message[message.index("{"):])
        raised_at = (folder / "probe.py").read_text().splitlines().index("    raise RuntimeError(json.dumps({") + 1
        assert message.endswith(f" (at probe.py:{raised_at})"), message[-60:]
        found["sandbox"], found["dir"] = client.sandbox, str(client.dir)
        found["shm_in_folder"] = sorted(p.name for p in (client.dir / "shm").glob("*")) if client.dir else []
    finally:
        client.discard()
    assert not Path(found["dir"]).exists()
    assert results.read_text() == '{"status": "PASSED"}\n' and results.stat().st_mode & 0o777 == 0o666
    return found, tmp_path


def _common(found: dict) -> None:
    work = found["dir"]
    for key in ("home", "tmp", "cache", "triton"):
        assert found[key].startswith(work + "/"), (key, found[key])
    assert found["secret_env"] is None
    assert found["fake_home"] == "PermissionError" and found["shadow"] == "PermissionError"
    assert found["passwd"] == "True"
    assert found["chmod_results"] == found["chmod_results_folder"] == found["chmod_own"] == "PermissionError"
    assert found["write_results"] == "PermissionError"
    assert found["own_oom"] == "1000"
    assert "reads" in found["sandbox"]["files"] and found["sandbox"]["seccomp"].startswith("seccomp:")


@as_root
@landlock
def test_worker_as_nobody(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default when solbench runs as root: the worker and its children are nobody; the parent's
    /proc files are root's; /dev/shm is the worker's own folder, removed with it."""
    found, _ = _probe(tmp_path, NOBODY, monkeypatch)
    _common(found)
    assert found["uid"] == 65534 and found["child_uid"] == "65534" and found["sandbox"]["uid"] == 65534
    assert found["parent_oom"] == "PermissionError"
    assert found["shm"] == "ok" and found["shm_in_folder"] and found["shm_in_folder"][0].startswith("solbench-probe-")
    assert not list(Path("/dev/shm").glob("solbench-probe-*"))


@landlock
def test_worker_as_this_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No privilege drop (worker_user root, or a non-root user): Landlock and seccomp alone keep the
    home, /etc/shadow and the results out of reach; /dev/shm is not writable (it would outlive the
    worker)."""
    found, _ = _probe(tmp_path, None, monkeypatch)
    _common(found)
    assert found["uid"] == os.geteuid() and found["shm"] == "PermissionError"
    assert not list(Path("/dev/shm").glob("solbench-probe-*"))


def test_log_is_capped_and_without_control_characters(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "loud.py").write_text(
        "import sys\n\ndef run(x, y):\n"
        "    print('\\x1b[2J\\x1b]0;pwned\\x07clear\\rscreen\\x00 \\u202egnp.exe', flush=True)\n"
        "    print('x' * 5000, flush=True)\n    return x\n")
    client = WorkerClient("cpu", reads=(str(folder),))
    client.spawn()
    client.wait_ready(300)
    try:
        client.request({"op": "load", "path": str(folder / "loud.py"), "device": "cpu"}, 60, 0)
        start = client.log_size()
        client.request({"op": "call", "inputs": [torch.ones(1), torch.ones(1)], "expect": []}, 60, 1 << 16)
        whole, tail = client.read_log(start, 1 << 20), client.read_log(start, 100)
    finally:
        client.discard()
    assert whole.startswith("clear\nscreen gnp.exe\n")
    assert tail.startswith("[... ") and len(tail) < 200
    for text in (whole, tail):
        assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in text) and "\x1b" not in text and "\u202e" not in text
    assert clean_log("a\x1b[31mb\x1b[0m\r\n") == "ab\n"


def _gpu_call(folder: Path, reads: tuple[str, ...]) -> tuple[bool, str, dict]:
    """Load the GPU candidate in a worker as nobody and call it once: (passed, what went wrong, sandbox)."""
    client = WorkerClient("cuda", account=NOBODY, reads=reads)
    client.spawn()
    client.wait_ready(300)
    try:
        load = client.request({"op": "load", "path": str(folder / "gpu.py"), "device": "cuda"}, 300, 0)
        if not load.get("ok"):
            return False, f"load: {load}\n{client.read_log(0)}", client.sandbox
        x, y = torch.randn(64, 64), torch.randn(64, 64)
        reply = client.request({"op": "call", "inputs": [x, y], "expect": [{"shape": [64, 64], "dtype": "float32"}]},
                               300, 1 << 20)
        if reply.get("ok") is not True:
            return False, f"call: {reply.get('message')}\n{client.read_log(0)}", client.sandbox
        (out,) = reply["outputs"]
        ok = out["device"] == "cuda" and torch.allclose(out["data"], y + 2 * x)
        return ok, "" if ok else f"wrong output {out.get('device')}", client.sandbox
    finally:
        client.discard()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@as_root
def test_gpu_worker_as_nobody_with_landlock_reads_runs_a_kernel(tmp_path: Path) -> None:
    """On the GPU machine, as root: a worker as nobody, under the Landlock read and write rules and
    the seccomp filter, initialises CUDA and runs a kernel. (``tests/cli/test_run_command.py -k gpu``
    runs Triton, CuPy and load_inline candidates through ``solbench run``, so as nobody too.) On a
    failure the message says whether the worker works when it may read everything: if so, a read
    rule is missing (add the folder to ``worker_readable`` or give it with ``--worker-read``)."""
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "gpu.py").write_text("import torch\n\ndef run(x, y):\n    return torch.add(y, x, alpha=2)\n")
    ok, detail, sandbox = _gpu_call(folder, (str(folder),))
    if not ok:
        with_all, _, _ = _gpu_call(folder, (str(folder), "/"))
        pytest.fail(f"CUDA as nobody failed (works when every path is readable: {with_all}); sandbox {sandbox}:\n"
                    f"{detail[-4000:]}")
    assert sandbox["uid"] == 65534 and sandbox["seccomp"].startswith("seccomp:")
    assert landlock_abi() < 1 or "reads" in sandbox["files"], sandbox
