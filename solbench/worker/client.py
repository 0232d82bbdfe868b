"""The parent's handle on one worker process (see :mod:`solbench.worker.main` for the protocol).

The worker runs in its own session (``start_new_session``), so its process group holds every
process it starts; a timeout sends SIGKILL to the whole group. Every request has a deadline, the
reply's size is bounded before it is read, and nothing the worker sends is unpickled: whatever the
worker does (hang, crash, exit, close the socket, send garbage), the parent gets a
:class:`WorkerFailure` and carries on.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from solbench.errors import SolbenchError
from solbench.worker.wire import ProtocolError, WireClosed, WireError, WireTimeout, recv_message, send_message

_EXIT_GRACE_S = 2.0  # how long a worker that closed its channel gets to exit on its own
START_TIMEOUT_S = 300.0  # worker start-up (imports torch): the harness's cost, not the candidate's


class WorkerFailure(Exception):
    """The worker did not answer: ``kind`` is ``timeout``, ``died`` or ``protocol``."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class WorkerStartError(SolbenchError):
    """The worker process could not start (an installation problem, not the candidate's)."""


def describe_exit(returncode: int | None) -> str:
    """'was killed by SIGSEGV (signal 11)' or 'exited with code 3'."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by {name} (signal {-returncode})"
    return f"exited with code {returncode}"


# JIT caches each worker keeps in its own folder: a cache shared between candidates would let one
# plant compiled artefacts (a kernel binary under another kernel's key) that a later one loads.
JIT_CACHE_VARS = {"TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor", "CUPY_CACHE_DIR": "cupy",
                  "TORCH_EXTENSIONS_DIR": "torch_extensions"}


def _worker_env(work_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    for var, name in JIT_CACHE_VARS.items():
        env[var] = str(work_dir / "jit-cache" / name)
    # The worker imports this same solbench, installed or not.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"  # the log is complete up to a crash
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault leaves a Python traceback in the log
    return env


class WorkerClient:
    """One worker process for one candidate on one device; ``guards=False`` starts it without its guards."""

    def __init__(self, device: str, guards: bool = True):
        self.device = device
        self.guards = guards
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.dir: Path | None = None
        self.returncode: int | None = None
        self.spawned_at = 0.0
        self.ready = False
        self.ready_at = 0.0

    # --- lifecycle -----------------------------------------------------------------------------
    def spawn(self) -> None:
        """Start the worker process (it imports torch and solbench.timing: seconds). Does not wait."""
        self.dir = Path(tempfile.mkdtemp(prefix="solbench-worker-"))
        parent_sock, child_sock = socket.socketpair()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "solbench.worker", "--fd", str(child_sock.fileno()),
                 "--parent", str(os.getpid()), *([] if self.guards else ["--no-guards"])],
                pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.dir, env=_worker_env(self.dir), start_new_session=True,
            )
        child_sock.close()
        self.sock = parent_sock
        self.spawned_at = time.monotonic()

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the worker's hello, at most ``timeout_s`` after it was spawned."""
        assert self.sock is not None
        if self.ready:
            return
        try:
            hello = recv_message(self.sock, self.spawned_at + timeout_s, max_tensor_bytes=0)
        except WireError as err:
            code = self._stop()
            raise WorkerStartError(f"the worker process did not start ({err}; it {describe_exit(code)}): "
                                   f"{self.read_log(0, 2000).strip() or 'no output'}") from None
        if hello.get("op") != "hello":
            self._stop()
            raise WorkerStartError(f"the worker process sent {str(hello)[:200]} instead of hello")
        self.ready = True
        self.ready_at = time.monotonic()

    @property
    def log_path(self) -> Path:
        assert self.dir is not None
        return self.dir / "worker.log"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.sock is not None

    def send(self, header: dict[str, Any], timeout_s: float) -> None:
        """Send a request; raise WorkerFailure if the worker is gone or does not take it in time."""
        self._guard(lambda deadline: send_message(self.sock, header, deadline), timeout_s)

    def receive(self, timeout_s: float, max_reply_bytes: int) -> dict[str, Any]:
        """The reply to the last request, or WorkerFailure (the worker is then gone)."""
        return self._guard(lambda deadline: recv_message(self.sock, deadline, max_tensor_bytes=max_reply_bytes),
                           timeout_s)

    def request(self, header: dict[str, Any], timeout_s: float, max_reply_bytes: int) -> dict[str, Any]:
        """Send a request and return the reply within ``timeout_s`` in all, or raise WorkerFailure."""
        end = time.monotonic() + max(timeout_s, 0.001)
        self.send(header, timeout_s)
        return self.receive(max(end - time.monotonic(), 0.001), max_reply_bytes)

    def _guard(self, op: Any, timeout_s: float) -> Any:
        if not self.alive:
            raise WorkerFailure("died", "the worker is not running")
        try:
            return op(time.monotonic() + max(timeout_s, 0.001))
        except WireTimeout:
            self._stop()
            raise WorkerFailure("timeout", f"no answer within {timeout_s:.3g} s") from None
        except WireClosed:
            exited = self._wait_exit(_EXIT_GRACE_S)
            code = self._stop()
            if exited:
                raise WorkerFailure("died", f"the worker {describe_exit(code)}") from None
            raise WorkerFailure("died", "the worker closed its channel to the parent") from None
        except ProtocolError as err:
            self._stop()
            raise WorkerFailure("protocol", f"invalid message from the worker: {err}") from None

    def close(self) -> None:
        """Ask the worker to exit, then kill whatever is left of its process group."""
        if self.sock is not None and self.proc is not None and self.proc.poll() is None:
            try:
                send_message(self.sock, {"op": "exit"}, time.monotonic() + 1.0)
                self._wait_exit(_EXIT_GRACE_S)
            except WireError:
                pass
        self._stop()

    def discard(self) -> None:
        """Stop the worker and remove its folder (the log goes with it)."""
        self.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # --- internals -----------------------------------------------------------------------------
    def _wait_exit(self, timeout_s: float) -> bool:
        """Wait for the leader to exit without reaping it (its pid, and so its group id, stay reserved)."""
        if self.proc is None:
            return True
        end = time.monotonic() + timeout_s
        while True:
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return True
            if info is not None:
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.01)

    def _stop(self) -> int | None:
        """SIGKILL the whole process group, reap the leader, close the socket. Returns the exit code."""
        code = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # leader not yet reaped: the pgid is still ours
            except (ProcessLookupError, PermissionError):
                pass
            code = self.returncode = self.proc.wait()
            self.proc = None  # reaped: never signal this pid again
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        return code

    # --- the log -------------------------------------------------------------------------------
    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except (OSError, AssertionError):
            return 0

    def read_log(self, since: int, limit: int = 8192) -> str:
        """What the worker wrote after byte ``since``: the last ``limit`` bytes of it."""
        try:
            with open(self.log_path, "rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                start = max(since, end - limit)
                fh.seek(start)
                data = fh.read(end - start)
        except (OSError, AssertionError):
            return ""
        text = data.decode("utf-8", errors="replace")
        return f"[... {start - since} earlier bytes cut]\n{text}" if start > since else text
