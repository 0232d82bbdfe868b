"""The parent's handle on one worker process (see :mod:`solbench.worker.main` for the protocol).

The worker runs in its own session (``start_new_session``) and, where one can be made, its own
cgroup; a timeout or the end of its candidate kills it and everything it started, children that
left its session included (:func:`solbench.worker.cleanup.kill_tree`), and its folder goes with it.
Every request has a deadline, the reply's size is bounded before it is read, and nothing the worker
sends is unpickled: whatever the worker does (hang, crash, exit, close the socket, send garbage),
the parent gets a :class:`WorkerFailure` and carries on.

Its folder (``solbench-worker-*`` in the temp folder) is its working folder, temp folder, HOME,
cache and JIT-cache folders and, when it drops root, its ``/dev/shm``. When solbench runs as root
the worker runs as ``account`` (the run's ``worker_user``; :mod:`solbench.guards.account`) and the
folder is that user's. Its environment holds only the parent's variables it needs
(:func:`passed_env`: search path, locale, device selection, compiler and library settings). What the worker prints is the candidate's own output: the log is
read back capped and without control characters (:func:`clean_log`).
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from solbench.errors import DeviceMemoryShort, SolbenchError, says_out_of_memory
from solbench.settings import WORKER_ACCEPT_POLL_S, WORKER_EXIT_GRACE_S, WORKER_READY_GRACE_S
from solbench.worker import jitcache
from solbench.worker.cleanup import (
    PREFIX,
    join_cgroup,
    kill_tree,
    remove_cgroup,
    remove_tree,
    track,
    untrack,
    write_owner,
)
from solbench.worker.wire import (
    ProtocolError,
    SendArena,
    WireClosed,
    WireError,
    WireTimeout,
    encode_header,
    recv_message,
    send_encoded,
    send_message,
)


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
JIT_FOLDER = "jit-cache"
JIT_CACHE_VARS = {"TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor", "CUPY_CACHE_DIR": "cupy",
                  "TORCH_EXTENSIONS_DIR": "torch_extensions", "CUDA_CACHE_PATH": "cuda"}
# The worker's own HOME, temp and cache folders (below its folder), so nothing lands in the user's.
HOME_VARS = {"HOME": "home", "TMPDIR": "tmp", "XDG_CACHE_HOME": "cache"}
# The variables a worker gets from the parent (an allow-list: a credential under a name nobody
# thought of stays out): the search path and locale, device selection, and the non-secret settings
# of the compilers and math libraries a candidate uses. Everything else is dropped, and so is an
# allowed name that still looks like a credential (SECRET_VARS) or a value holding one (a URL with
# a password).
PASSED_VARS = re.compile(r"^(PATH|LANG|LANGUAGE|TZ|TERM|LD_LIBRARY_PATH|LIBRARY_PATH|CPATH|C_INCLUDE_PATH|"
                         r"CPLUS_INCLUDE_PATH|CC|CXX|CUDA_HOME|CUDA_PATH|CUDACXX|VIRTUAL_ENV|CONDA_PREFIX|"
                         r"PYTHONHASHSEED|PYTHONDONTWRITEBYTECODE|PYTHONNOUSERSITE|PYTHONWARNINGS|"
                         r"LC_\w+|CUDA_\w+|NVIDIA_\w+|NVCC_\w+|TRITON_\w+|TORCH_\w+|TORCHINDUCTOR_\w+|PYTORCH_\w+|"
                         r"CUPY_\w+|OMP_\w+|KMP_\w+|MKL_\w+|OPENBLAS_\w+|GOMP_\w+)$")
SECRET_VARS = re.compile(r"TOKEN|SECRET|PASSW|PWD|PASS$|CREDENTIAL|AUTH|JWT|DSN|API_?KEY|ACCESS_?KEY|"
                         r"PRIVATE_?KEY|_KEY$|^AWS_|^AZURE_|^GOOGLE_APPLICATION|^SSH_|^GPG_", re.IGNORECASE)
_ATTEMPT = threading.local()  # this thread's record attempt: whether running short of memory is retried


@contextmanager
def memory_retried(retried: bool = True) -> Iterator[None]:
    """While this thread holds it, a device pool that cannot be made or filled for lack of device memory
    raises :class:`DeviceMemoryShort` (the caller runs the record again with more memory) instead of
    moving that peer to the memfd route for good. On the H200 a worker moved so beside a crowded device
    had its burst's outputs clocked through host memory, and an honest candidate was judged a reward hack
    (2026-12-02: residual_layernorm, 56 ms a call for 195 us claimed)."""
    before = getattr(_ATTEMPT, "retried", False)
    _ATTEMPT.retried = retried
    try:
        yield
    finally:
        _ATTEMPT.retried = before


_URL_WITH_PASSWORD = re.compile(r"://[^/\s:@]*:[^/\s@]*@")


def passed_env(environ: dict[str, str]) -> dict[str, str]:
    """The part of ``environ`` a worker may see (:data:`PASSED_VARS` less :data:`SECRET_VARS`)."""
    return {k: v for k, v in environ.items()
            if PASSED_VARS.match(k) and not SECRET_VARS.search(k) and not _URL_WITH_PASSWORD.search(v)}


def _python_path() -> str:
    """This solbench first (installed or not), then the user's site-packages (the worker's HOME is
    another), then the parent's PYTHONPATH."""
    import site

    paths = [str(Path(__file__).resolve().parents[2])]  # the folder holding the solbench package
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and os.path.isdir(user_site):
        paths.append(user_site)
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(paths)


def _worker_env(work_dir: Path, user: str | None = None) -> dict[str, str]:
    env = passed_env(dict(os.environ))  # not SOLBENCH_JIT_CACHE either: the parent's store is not the worker's business
    for var, name in JIT_CACHE_VARS.items():
        env[var] = str(work_dir / JIT_FOLDER / name)
    for var, name in HOME_VARS.items():
        env[var] = str(work_dir / name)
    if user is not None:
        env["USER"] = env["LOGNAME"] = user
    env["PYTHONPATH"] = _python_path()
    env["PYTHONUNBUFFERED"] = "1"  # the log is complete up to a crash
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault leaves a Python traceback in the log
    return env


class WorkerClient:
    """One worker process for one candidate on one device; ``guards=False`` starts it without its guards."""

    def __init__(self, device: str, guards: bool = True, account: tuple[int, int] | None = None,
                 reads: tuple[str, ...] = (), launcher: tuple[str, ...] = (), transport: str = "memfd",
                 jit: tuple[str, str] | None = None, entry: str = "solbench.worker", shrink_pool: bool = False):
        self.device = device
        # The module run as ``python -m``: the candidate worker, or the problem host
        # (solbench.engine.problem_host), which starts the same way and under the same guards.
        self.entry = entry
        self.guards = guards
        # How tensors travel (RunOptions.transport, resolved): "device" (a CUDA pool shared with this
        # worker alone, solbench.worker.devwire) or "memfd" (through the host, solbench.worker.wire).
        # The device route falls back to memfd for good when either side cannot map the pool.
        self.transport = transport
        self.transport_note: str | None = None  # why it fell back
        self.shrink_pool = shrink_pool  # the device pool made again smaller for far smaller requests (devwire)
        self.pool: Any = None  # the parent's side of the device pool, made with the first message
        self.arena = SendArena()  # the memfd route's reusable file for this worker's requests
        # A profiler's command line the worker runs under (solbench profile: ncu ...). The worker then
        # connects to a socket in its folder instead of inheriting one (a launcher may close the fds
        # it does not know), and is told (--profiler) to leave local TCP open to the profiler.
        self.launcher = launcher
        self.listener: socket.socket | None = None
        self.worker_pid: int | None = None  # from its hello (under a launcher, not proc.pid)
        self.account = account  # (uid, gid) to run as (the parent is root), or None: this user
        self.reads = reads  # folders the worker may read besides the Python installation (the candidate's)
        # (store, key): JIT caches kept between runs for this candidate (solbench.worker.jitcache), or None
        self.jit = jit
        self.jit_restored_bytes = 0
        self.cgroup: Path | None = None
        self.sandbox: dict[str, Any] = {}  # what the worker applied (its hello)
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.dir: Path | None = None
        self.returncode: int | None = None
        self.spawned_at = 0.0
        self.ready = False
        self.ready_at = 0.0
        self.up_at = 0.0

    # --- lifecycle -----------------------------------------------------------------------------
    def spawn(self) -> None:
        """Start the worker process (it imports torch and solbench.timing: seconds). Does not wait."""
        self.dir = Path(tempfile.mkdtemp(prefix=PREFIX))
        track(self)
        self._prepare_folder()
        if self.launcher:
            parent_sock, child_sock = self._listen(), None
            channel = ["--connect", str(self.dir / "channel.sock")]
        else:
            parent_sock, child_sock = socket.socketpair()
            channel = ["--fd", str(child_sock.fileno())]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*self.launcher, sys.executable, "-m", self.entry, *channel, *self._arguments()],
                pass_fds=[child_sock.fileno()] if child_sock else [], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.dir, env=_worker_env(self.dir, self._user_name()),
                start_new_session=True,
            )
        if child_sock is not None:
            child_sock.close()
        self.cgroup = join_cgroup(self.proc.pid, self.dir.name)
        self.sock = parent_sock
        self.spawned_at = time.monotonic()

    def _prepare_folder(self) -> None:
        """The owner file, the home, temp and cache folders; all of it the worker user's."""
        assert self.dir is not None
        write_owner(self.dir)
        for name in HOME_VARS.values():
            (self.dir / name).mkdir()
        if self.account is not None:
            for path in (self.dir, *(self.dir / name for name in HOME_VARS.values())):
                os.chown(path, *self.account)
        if self.jit is not None:
            try:
                self.jit_restored_bytes = jitcache.restore(Path(self.jit[0]), self.jit[1], self.dir / JIT_FOLDER,
                                                           self.account)
            except OSError:  # an unreadable store: this worker compiles afresh, in a folder it makes itself
                remove_tree(self.dir / JIT_FOLDER)
                self.jit_restored_bytes = 0

    def _listen(self) -> socket.socket:
        """A listening socket in the worker's folder, for a worker started under a launcher."""
        assert self.dir is not None
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.dir / "channel.sock"))
        self.listener.listen(1)
        return self.listener

    def _arguments(self) -> list[str]:
        # Under a launcher the worker's parent is the launcher: it watches that one (its default).
        parent = [] if self.launcher else ["--parent", str(os.getpid())]
        args = [*parent, *([] if self.guards else ["--no-guards"]), *(["--profiler"] if self.launcher else [])]
        if self.account is not None:
            args += ["--user", f"{self.account[0]}:{self.account[1]}"]
        for folder in self.reads:
            args += ["--read", str(folder)]
        return args

    def _user_name(self) -> str | None:
        if self.account is None:
            return None
        import pwd

        try:
            return pwd.getpwuid(self.account[0]).pw_name
        except KeyError:
            return str(self.account[0])

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the worker's hello, at most ``timeout_s`` after it was spawned, or ``WORKER_READY_GRACE_S``
        from now where that is later (a worker started ahead, waited for long after)."""
        assert self.sock is not None
        if self.ready:
            return
        deadline = max(self.spawned_at + timeout_s, time.monotonic() + WORKER_READY_GRACE_S)
        try:
            if self.sock is self.listener:
                self.sock = self._accept(deadline)
            hello = recv_message(self.sock, deadline, max_tensor_bytes=0)
        except WireError as err:
            code = self._stop()
            raise WorkerStartError(f"the worker process did not start ({err}; it {describe_exit(code)}): "
                                   f"{self.read_log(0, 2000).strip() or 'no output'}") from None
        if hello.get("op") != "hello":
            self._stop()
            raise WorkerStartError(f"the worker process sent {clean_log(str(hello)[:200])} instead of hello")
        self.sandbox = hello.get("sandbox") if isinstance(hello.get("sandbox"), dict) else {}
        self.worker_pid = hello.get("pid") if isinstance(hello.get("pid"), int) else None
        self.ready = True
        self.ready_at = time.monotonic()
        # When it was up (CLOCK_MONOTONIC is the machine's), not when its hello was read: a worker
        # started ahead may have waited a long while for its turn.
        at = hello.get("at")
        self.up_at = at if isinstance(at, float) and self.spawned_at <= at <= self.ready_at else self.ready_at

    def _accept(self, deadline: float) -> socket.socket:
        """The worker's connection to the listening socket, by ``deadline``; the listener is closed.
        A launcher that exits first (ncu refusing an option, or without counter permissions) ends
        the wait at once: the worker it was to start will never connect."""
        assert self.listener is not None
        try:
            while True:
                self.listener.settimeout(min(max(deadline - time.monotonic(), 0.001), WORKER_ACCEPT_POLL_S))
                try:
                    conn, _ = self.listener.accept()
                    break
                except TimeoutError:
                    if self.proc is not None and self.proc.poll() is not None:
                        raise WireTimeout("the launcher exited before the worker connected") from None
                    if time.monotonic() >= deadline:
                        raise WireTimeout("the worker did not connect") from None
                except OSError:
                    raise WireTimeout("the worker did not connect") from None
        finally:
            self.listener.close()
        conn.settimeout(None)
        return conn

    def finish(self, timeout_s: float) -> int | None:
        """Ask the worker to exit and wait, at most ``timeout_s``, for the process started (a launcher:
        it writes its report after the worker exits) to end on its own; then stop what is left."""
        if self.sock is not None and self.proc is not None and self.proc.poll() is None:
            try:
                send_message(self.sock, {"op": "exit"}, time.monotonic() + 1.0)
            except WireError:
                pass
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        return self._stop()

    @property
    def log_path(self) -> Path:
        assert self.dir is not None
        return self.dir / "worker.log"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.sock is not None

    def send(self, header: dict[str, Any], timeout_s: float) -> None:
        """Send a request; raise WorkerFailure if the worker is gone or does not take it in time."""
        self._guard(lambda deadline: self._send(header, deadline), timeout_s)

    def _send(self, header: dict[str, Any], deadline: float) -> None:
        if self.transport == "device":
            from solbench.worker.devwire import ParentPool, device_index
            from solbench.worker.vmm import DeviceShareError

            try:
                if self.pool is None:
                    self.pool = ParentPool(device_index(self.device), shrink=self.shrink_pool)
                return self.pool.send(self.sock, header, deadline)
            except DeviceShareError as err:  # raised before anything is sent
                if getattr(_ATTEMPT, "retried", False) and says_out_of_memory(str(err)):
                    raise DeviceMemoryShort([f"the device pool for a request to {self.entry}: {err}"]) from None
                self._fall_back(f"the parent could not share device memory: {err}")
        send_encoded(self.sock, *encode_header(header), deadline, arena=self.arena)

    def release_pool(self, timeout_s: float) -> bool:
        """Between records: a device pool larger than ``SHRINK_BELOW`` goes back, the worker's mapping
        and cache first (asked by a ``release`` request), then the parent's; the next request makes a
        new one, outside any clock. Whether one went back. A pool sized for one record's burst (up to
        4 GiB) was held, unused, while its lane waited for the next (H200, 2026-12-02: a dozen lanes'
        pools left the records in flight short of memory)."""
        from solbench.worker.devwire import SHRINK_BELOW

        mapping = self.pool.mapping if self.pool is not None else None
        if mapping is None or mapping.size <= SHRINK_BELOW:
            return False
        self.send({"op": "release"}, timeout_s)
        reply = self.receive(timeout_s, 0)
        if reply.get("ok") is not True:
            raise WorkerFailure("protocol", f"the worker could not release its device pool: {reply.get('message')}")
        self.pool.close()
        self.pool = None
        return True

    def receive(self, timeout_s: float, max_reply_bytes: int) -> dict[str, Any]:
        """The reply to the last request, or WorkerFailure (the worker is then gone)."""
        return self._guard(lambda deadline: self._receive(deadline, max_reply_bytes), timeout_s)

    def _receive(self, deadline: float, max_reply_bytes: int) -> dict[str, Any]:
        reply = recv_message(self.sock, deadline, max_tensor_bytes=max_reply_bytes, device=self.pool)
        if self.pool is not None:
            reply = self.pool.resolve(reply)  # fresh parent copies of the inputs the worker left in the pool
        status = reply.pop("transport", None)  # the load's answer to the device pool sent with it
        if status is not None and status != "device":
            self._fall_back(f"the worker could not map the shared device pool: {clean_log(str(status)[:300])}")
        return reply

    def _fall_back(self, why: str) -> None:
        """From now on, this worker's tensors go by memfd."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.transport, self.transport_note = "memfd", why

    def request(self, header: dict[str, Any], timeout_s: float, max_reply_bytes: int,
                awaiting: Callable[[], AbstractContextManager[None]] | None = None) -> dict[str, Any]:
        """Send a request and return the reply within ``timeout_s`` in all, or raise WorkerFailure.
        ``awaiting``: held while nothing but the reply's first byte is awaited (this process does no device
        work then: the device gate may lock the worker meanwhile)."""
        end = time.monotonic() + max(timeout_s, 0.001)
        self.send(header, timeout_s)
        if awaiting is not None and self.sock is not None:
            with awaiting():
                select.select([self.sock], [], [], max(end - time.monotonic(), 0.0))
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
            exited = self._wait_exit(WORKER_EXIT_GRACE_S)
            code = self._stop()
            if exited:
                raise WorkerFailure("died", f"the worker {describe_exit(code)}") from None
            raise WorkerFailure("died", "the worker closed its channel to the parent") from None
        except ProtocolError as err:
            self._stop()
            raise WorkerFailure("protocol", f"invalid message from the worker: {err}") from None

    def close(self) -> None:
        """Kill what the worker started, ask it to exit, then kill whatever is left."""
        if self.sock is not None and self.proc is not None and self.proc.poll() is None:
            # While the worker lives, all it started are its descendants (it is their subreaper).
            kill_tree(self.proc.pid, include_root=False)
            try:
                send_message(self.sock, {"op": "exit"}, time.monotonic() + 1.0)
                self._wait_exit(WORKER_EXIT_GRACE_S)
            except WireError:
                pass
        self._stop()

    def discard(self) -> None:
        """Stop the worker and remove its folder (the log goes with it) and its cgroup."""
        self.close()
        if self.cgroup is not None:
            remove_cgroup(self.cgroup.name)
            self.cgroup = None
        if self.jit is not None and self.dir is not None:  # the worker and all it started are gone
            try:
                jitcache.save(self.dir / JIT_FOLDER, Path(self.jit[0]), self.jit[1])
            except OSError:  # a full or vanished store costs the next run a compile, never this run's results
                pass
        if self.dir is not None:
            remove_tree(self.dir)
            self.dir = None
        untrack(self)

    # --- internals -----------------------------------------------------------------------------
    def _wait_exit(self, timeout_s: float) -> bool:
        """Wait for the leader to exit without reaping it (its pid, and so its group id, stay reserved)."""
        proc = self.proc  # read once: a run stopped by a signal closes its workers from two threads
        if proc is None:
            return True
        end = time.monotonic() + timeout_s
        while True:
            try:
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return True
            if info is not None:
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.01)

    def _stop(self) -> int | None:
        """SIGKILL the worker, its cgroup, its descendants (new sessions too) and its process group,
        reap the leader, close the socket. Returns the exit code."""
        code = None
        # Taken once: a signal's clean-up in the main thread and a lane's may stop the same client
        # (H200: the second found proc None halfway and raised). Whoever takes it stops it.
        proc = self.proc
        if proc is not None:
            kill_tree(proc.pid, self.cgroup)  # leader not yet reaped: its pid is still ours
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            code = self.returncode = proc.wait()
            self.proc = None  # reaped: never signal this pid again
        pool, self.pool = self.pool, None
        if pool is not None:  # the worker is gone: its mapping with it; now the parent's
            pool.close()
        self.arena.close()  # a new worker gets a new file
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()
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
        text = clean_log(data.decode("utf-8", errors="replace"))
        return f"[... {start - since} earlier bytes cut]\n{text}" if start > since else text


# Terminal escape sequences (CSI, OSC/DCS/APC strings, other ESC sequences) and then every other
# control character but newline and tab: nothing a candidate prints can drive the terminal that shows a record.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]|"
                      r"\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # bidi overrides too


def clean_log(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (``\\r`` becomes a newline)."""
    text = _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _CONTROL.sub("", text)
